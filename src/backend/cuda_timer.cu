/* CUDA events behind a C interface: cross-stream ordering (mirrored's
 * device-side reduction) and the phase timer of device replicas. See the
 * declarations in cuda.h. Every event is created on the calling thread's
 * device and used on the calling thread's stream. */
#include <cuda_runtime.h>
#include <stdlib.h>

extern "C" {
#include "backend/cuda.h"
}
#include "backend/cuda_internal.h"
#include "backend/cuda_check.h"

/* The thread's stream, or SB_ERR_DEVICE with the recorded reason. */
static sb_status thread_stream(cudaStream_t *s)
{
    *s = (cudaStream_t)sb_cuda_stream();
    if (!*s) return sb_error(SB_ERR_DEVICE, "cuda events: no CUDA stream on this thread");
    return SB_OK;
}

extern "C" sb_status sb_cuda_event_create(void **event)
{
    *event = NULL;
    cudaStream_t s;
    SB_TRY(thread_stream(&s)); /* makes the thread's device current */
    cudaEvent_t e;
    SB_TRY(SB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), SB_ERR_DEVICE));
    *event = (void *)e;
    return SB_OK;
}

extern "C" sb_status sb_cuda_event_record(void *event)
{
    cudaStream_t s;
    SB_TRY(thread_stream(&s));
    return SB_CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, s), SB_ERR_DEVICE);
}

extern "C" sb_status sb_cuda_stream_wait_event(void *event)
{
    cudaStream_t s;
    SB_TRY(thread_stream(&s));
    return SB_CUDA_CHECK(cudaStreamWaitEvent(s, (cudaEvent_t)event, 0), SB_ERR_DEVICE);
}

extern "C" void sb_cuda_event_destroy(void *event)
{
    if (event) cudaEventDestroy((cudaEvent_t)event);
}

/* ------------------------------------------------------------ phase timer */

struct sb_cuda_timer {
    cudaEvent_t ev[2][SB_CUDA_TIMER_MARKS]; /* timing-enabled */
    int recorded[2][SB_CUDA_TIMER_MARKS];   /* marked in that set's step */
    int cur;                                /* set of the current step */
};

extern "C" void sb_cuda_timer_destroy(struct sb_cuda_timer *t)
{
    if (!t) return;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < SB_CUDA_TIMER_MARKS; i++)
            if (t->ev[s][i]) cudaEventDestroy(t->ev[s][i]);
    free(t);
}

extern "C" sb_status sb_cuda_timer_create(struct sb_cuda_timer **out)
{
    *out = NULL;
    cudaStream_t s;
    SB_TRY(thread_stream(&s));
    struct sb_cuda_timer *t = (struct sb_cuda_timer *)calloc(1, sizeof *t);
    if (!t) return sb_error(SB_ERR_NOMEM, "cuda timer: out of memory");
    for (int set = 0; set < 2; set++) {
        for (int i = 0; i < SB_CUDA_TIMER_MARKS; i++) {
            sb_status st = SB_CUDA_CHECK(cudaEventCreate(&t->ev[set][i]), SB_ERR_DEVICE);
            if (st) {
                sb_cuda_timer_destroy(t);
                return st;
            }
        }
    }
    *out = t;
    return SB_OK;
}

extern "C" void sb_cuda_timer_begin_step(struct sb_cuda_timer *t)
{
    t->cur ^= 1;
    for (int i = 0; i < SB_CUDA_TIMER_MARKS; i++) t->recorded[t->cur][i] = 0;
}

extern "C" sb_status sb_cuda_timer_mark(struct sb_cuda_timer *t, int mark)
{
    if (mark < 0 || mark >= SB_CUDA_TIMER_MARKS)
        return sb_error(SB_ERR_INTERNAL, "cuda timer: mark %d out of range", mark);
    cudaStream_t s;
    SB_TRY(thread_stream(&s));
    SB_TRY(SB_CUDA_CHECK(cudaEventRecord(t->ev[t->cur][mark], s), SB_ERR_DEVICE));
    t->recorded[t->cur][mark] = 1;
    return SB_OK;
}

extern "C" sb_status sb_cuda_timer_previous_ms(struct sb_cuda_timer *t, int a, int b, double *ms)
{
    *ms = -1.0;
    if (a < 0 || b < 0 || a >= SB_CUDA_TIMER_MARKS || b >= SB_CUDA_TIMER_MARKS)
        return sb_error(SB_ERR_INTERNAL, "cuda timer: marks %d, %d out of range", a, b);
    int prev = t->cur ^ 1;
    if (!t->recorded[prev][a] || !t->recorded[prev][b]) return SB_OK;
    /* Wait while the stream has not reached mark b (the previous step's
     * work, normally finished: then this returns at once). Asking for the
     * time first and waiting on cudaErrorNotReady would work too, but the
     * failed call is an API error to compute-sanitizer (seen on an H200,
     * docs/gpu.md). */
    SB_TRY(SB_CUDA_CHECK(cudaEventSynchronize(t->ev[prev][b]), SB_ERR_DEVICE));
    float f = 0.0f;
    SB_TRY(SB_CUDA_CHECK(cudaEventElapsedTime(&f, t->ev[prev][a], t->ev[prev][b]), SB_ERR_DEVICE));
    *ms = (double)f;
    return SB_OK;
}
