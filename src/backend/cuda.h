/* The CUDA backend's extras, callable from C: device selection, the
 * per-thread stream, and what the report says about the GPU stack.
 *
 * Every thread that runs backend ops on a GPU owns one CUDA stream and one
 * cuBLAS handle (thread-local): the backend ops take no stream argument and
 * enqueue on the calling thread's stream. Call sb_cuda_set_device() once on
 * each thread before its first op, with the device the job's placement
 * gives it (backend/placement.h; mirrored: in each replica thread; ddp,
 * central, zero: through the communicator registry); a thread that never
 * calls it gets device 0 on its first op (single, placed on GPU 0). The functions below exist in every build: without CUDA,
 * sb_cuda_device_count() returns 0 and the others return SB_ERR_DEVICE. */
#ifndef SB_CUDA_H
#define SB_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process can use; 0 when the build has no
 * CUDA, no driver is installed or no device is visible (never fails). */
int sb_cuda_device_count(void);

/* Writes one line describing the GPU stack into buf (size n), e.g.
 * "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB) x 8; driver 12.4; runtime 12.4;
 * cuBLAS 12.4.5; NCCL 2.21.5", or "no CUDA device" / "built without CUDA". */
void sb_cuda_describe(char *buf, size_t n);

/* Model name of device `device` into buf (size n); "" when unavailable. */
void sb_cuda_device_name(int device, char *buf, size_t n);

/* The GPU stack as separate strings for the report (each "" when unknown
 * or absent): model of device 0, driver and runtime versions ("12.4"),
 * cuBLAS ("12.4.5") and NCCL ("2.21.5"; "" without NCCL); count = visible
 * devices. Never fails. (src/backend/cuda_info.c) */
struct sb_cuda_versions {
    int count;
    char model[256], driver[32], runtime[32], cublas[32], nccl[32];
};
void sb_cuda_versions(struct sb_cuda_versions *v);

/* The placement rule (backend/placement.h, sb_placement_decide) asked
 * only whether `ranks_on_host` GPU processes, one replica each, fit a host
 * of `devices` visible GPUs when the communicator needs a GPU per member
 * (gpu_per_rank: nccl); always SB_OK for "mpi" (staged: ranks may share a
 * GPU). The early check of a job, before its data are loaded. Pure (no
 * CUDA call; exists in every build). Errors: SB_ERR_USAGE naming --comm
 * mpi. (src/backend/placement.c) */
sb_status sb_cuda_check_rank_placement(int gpu_per_rank, int ranks_on_host, int devices);

/* Destroys the calling thread's stream, cuBLAS handle and scratch buffers
 * (the end of a replica's thread, or of a process's training); safe to call
 * when there are none, and a no-op in a build without CUDA. */
void sb_cuda_release_thread(void);

#ifdef SB_HAVE_CUDA
/* The CUDA backend ("cuda"): cuBLAS SGEMM and kernels on the thread's
 * stream. Defined in cuda.cu. */
extern const struct sb_backend_ops sb_backend_cuda;

/* Makes `device` current for the calling thread and creates the thread's
 * stream and cuBLAS handle (again, if the thread switches device).
 * Errors: SB_ERR_DEVICE with the CUDA or cuBLAS message. */
sb_status sb_cuda_set_device(int device);

/* The calling thread's stream (a cudaStream_t, as void * so that this header
 * needs no CUDA header); creates it on device 0 if the thread has none.
 * NULL if that failed (the next sync() reports why). */
void *sb_cuda_stream(void);

/* The calling thread's current device, or -1 before sb_cuda_set_device or
 * the first op. */
int sb_cuda_current_device(void);

/* Grows the calling thread's reduction scratch to `rows` rows (one double
 * each), so that softmax_xent and count_correct on up to `rows` rows
 * allocate nothing later: call at set-up with the largest batch.
 * Errors: SB_ERR_DEVICE. */
sb_status sb_cuda_reserve_rows(size_t rows);

/* Device memory held through the backend's alloc by the whole process
 * (every thread), now and at its peak, in bytes (cudaMalloc sizes; cuBLAS
 * workspaces, NCCL buffers and the scratch of the ops are not counted). */
size_t sb_cuda_memory_current_bytes(void);
size_t sb_cuda_memory_peak_bytes(void);

/* --- events: ordering between streams (src/backend/cuda_timer.cu) -------
 * A cudaEvent_t as void *, created on the calling thread's device with
 * timing disabled. Errors: SB_ERR_DEVICE with CUDA's message. */
sb_status sb_cuda_event_create(void **event);
/* Records `event` on the calling thread's stream (after the work enqueued
 * there so far). Errors: SB_ERR_DEVICE with CUDA's message. */
sb_status sb_cuda_event_record(void *event);
/* Makes the calling thread's stream wait, on the device, for the work
 * before the last record of `event` (cudaStreamWaitEvent; the host does
 * not block). The event may have been recorded by another thread, on
 * another stream of any device. Errors: SB_ERR_DEVICE with CUDA's message. */
sb_status sb_cuda_stream_wait_event(void *event);
/* Safe on NULL and on an event still pending (CUDA frees it when done). */
void sb_cuda_event_destroy(void *event);

/* --- graph-ready step (src/backend/cuda_step.cu) -------------------------
 * idx (n) = perm[*pos .. *pos + n), then *pos += stride: a step's batch
 * indices taken on the device from the epoch's permutation (perm, int32,
 * uploaded once per epoch) at a position kept in device memory (pos, one
 * int32), so a step copies nothing from the host and a captured graph
 * reads new indices on every replay. Two kernels on the thread's stream;
 * failures are recorded for check(). */
void sb_cuda_take_batch(int32_t *idx, const int32_t *perm, int32_t *pos, int n, int stride);

/* --- --cuda-graph: one step captured once, then replayed -----------------
 * A step graph owns the capture's state: whether a capture is open on the
 * owner thread's stream and, once one has ended, the executable graph
 * (cudaGraphExec_t). Its caller enqueues a step between begin and end as
 * it would run it (nothing runs until the graph is launched), then
 * launches the graph for that step and every later one.
 * create: Errors: SB_ERR_NOMEM. destroy: safe on NULL; ends an open
 * capture first. */
struct sb_cuda_step_graph;
sb_status sb_cuda_step_graph_create(struct sb_cuda_step_graph **out);
void sb_cuda_step_graph_destroy(struct sb_cuda_step_graph *g);
/* 1 once a capture has ended and been instantiated: launch it. */
int sb_cuda_step_graph_ready(const struct sb_cuda_step_graph *g);
/* 1 between begin and end (or abort): work enqueued now is recorded, not run. */
int sb_cuda_step_graph_capturing(const struct sb_cuda_step_graph *g);
/* Starts capturing the work this thread enqueues on its stream
 * (cudaStreamBeginCapture, thread-local mode). Errors: SB_ERR_DEVICE. */
sb_status sb_cuda_step_graph_begin(struct sb_cuda_step_graph *g);
/* Ends the capture and instantiates the graph. Errors: SB_ERR_DEVICE
 * (e.g. a call that capture does not allow was made, which invalidates
 * it); the capture is closed either way. */
sb_status sb_cuda_step_graph_end(struct sb_cuda_step_graph *g);
/* Ends the capture and drops what it recorded, leaving the stream usable
 * for an error path; the error message already recorded (sb_error) stays. */
void sb_cuda_step_graph_abort(struct sb_cuda_step_graph *g);
/* Launches the instantiated graph on the thread's stream (no wait).
 * Errors: SB_ERR_DEVICE. */
sb_status sb_cuda_step_graph_launch(struct sb_cuda_step_graph *g);

/* --- phase timer: CUDA events on the thread's stream ---------------------
 * Host clocks around asynchronous launches measure launch time, so device
 * phases are timed with events recorded at marks 0..SB_CUDA_TIMER_MARKS-1
 * on the stream. Two sets of events alternate by step: a step's marks are
 * read during the next step (sb_cuda_timer_previous_ms), when the stream
 * has normally passed them, so the read does not wait. */
#define SB_CUDA_TIMER_MARKS 8
struct sb_cuda_timer;
/* Creates a timer on the calling thread's device. Errors: SB_ERR_DEVICE,
 * SB_ERR_NOMEM. */
sb_status sb_cuda_timer_create(struct sb_cuda_timer **out);
/* Safe on NULL. */
void sb_cuda_timer_destroy(struct sb_cuda_timer *t);
/* Starts a new step: the current set becomes the previous one and the
 * other set, cleared of marks, the current one. */
void sb_cuda_timer_begin_step(struct sb_cuda_timer *t);
/* Records mark `mark` (0..SB_CUDA_TIMER_MARKS-1) of the current step on the
 * calling thread's stream. Errors: SB_ERR_DEVICE. */
sb_status sb_cuda_timer_mark(struct sb_cuda_timer *t, int mark);
/* *ms = device time from mark a to mark b of the previous step, or -1 when
 * that step recorded either mark not at all. Waits for mark b only if the
 * stream has not passed it yet (cudaEventSynchronize). Errors:
 * SB_ERR_DEVICE. */
sb_status sb_cuda_timer_previous_ms(struct sb_cuda_timer *t, int a, int b, double *ms);
#endif

#ifdef __cplusplus
}
#endif

#endif
