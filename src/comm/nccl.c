/* The "nccl" communicator: NCCL collectives on GPU buffers, for the cuda
 * backend. Compiled only when configure.py found NCCL (SB_HAVE_NCCL).
 *
 * Every call is enqueued on the calling thread's CUDA stream (the backend's,
 * sb_cuda_stream()), so it is ordered after the kernels that produced the
 * buffer, and the all-reduce and broadcast return without waiting: work
 * enqueued later on that stream (the optimizer, the next forward) runs
 * after them, so no host wait is needed. allreduce_f64, whose result lands
 * in host memory, waits.
 *
 * Point-to-point (blocking send and receive, grouped non-blocking isend
 * and irecv) is in nccl_p2p.c; creation and split in nccl_setup.c.
 *
 * Timing: host clocks would time the issue, not the transfer, so each call
 * is bracketed by two timing events on its stream, from a pool created at
 * set-up, and its seconds (cudaEventElapsedTime) are added to the counter
 * of its kind once the events have completed (harvested without waiting at
 * later calls, and after the wait of allreduce_f64, which the harness calls
 * at every epoch's end). Its ops state device_timed so that the
 * counted wrappers add calls and bytes only; algbw and busbw in the report
 * then come from these device spans.
 *
 * The non-blocking all-reduce (ddp's buckets), reduce-scatter and
 * all-gather (ncclReduceScatter, ncclAllGather: blocks of one size) run on a second, per-member
 * communication stream, as PyTorch DDP and llm.c overlap: an event recorded
 * on the compute stream (after the kernels that wrote the bucket) is made a
 * dependency of the communication stream, the ncclAllReduce is enqueued
 * there between timing events, test() queries the completion event (no
 * blocking) and wait() makes the compute stream wait on it (no host
 * blocking either: the optimizer enqueued afterwards runs after the
 * all-reduce).
 *
 * Bootstrap (nccl_setup.c): across processes rank 0 creates an
 * ncclUniqueId and broadcasts it over MPI, every rank then calls
 * ncclCommInitRank; within one process (mirrored) ncclCommInitAll creates
 * one member per device. */
#ifdef SB_HAVE_NCCL

#include <cuda_runtime_api.h>
#ifdef SB_HAVE_NVTX
#include <nvtx3/nvToolsExtCudaRt.h>
#endif
#include <stdio.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "backend/cuda_check.h"
#include "comm/comm.h"
#include "comm/nccl_half.h"
#include "comm/nccl_impl.h"

sb_status sb_nccl_check(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return SB_OK;
    return sb_error(SB_ERR_COMM, "%s: %s", what, ncclGetErrorString(r));
}

/* The calling thread's stream, on this communicator's device. */
sb_status sb_nccl_stream_of(struct sb_comm *c, cudaStream_t *out)
{
    if (sb_cuda_current_device() != sb_nccl_impl(c)->device)
        SB_TRY(sb_cuda_set_device(sb_nccl_impl(c)->device));
    *out = (cudaStream_t)sb_cuda_stream();
    if (!*out)
        return sb_error(SB_ERR_COMM, "nccl: no CUDA stream on device %d", sb_nccl_impl(c)->device);
    return SB_OK;
}

/* Adds n more slots to the pool, creating their events on the current
 * device (the member's). */
static sb_status grow_pool(struct nccl_impl *m, int n)
{
    struct nccl_slot *p = realloc(m->slots, (size_t)(m->n_slots + n) * sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "nccl: out of memory (event pool)");
    m->slots = p;
    for (int i = m->n_slots; i < m->n_slots + n; i++) {
        struct nccl_slot *q = &m->slots[i];
        memset(q, 0, sizeof *q);
        SB_TRY(SB_CUDA_CHECK(cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming),
                             SB_ERR_COMM));
        SB_TRY(SB_CUDA_CHECK(cudaEventCreate(&q->start), SB_ERR_COMM));
        SB_TRY(SB_CUDA_CHECK(cudaEventCreate(&q->done), SB_ERR_COMM));
        m->n_slots = i + 1; /* created so far: destroy() frees exactly these */
    }
    return SB_OK;
}

/* Adds the device time of every finished call to its counter and frees its
 * slot, without waiting (cudaEventQuery): so the seconds the report shows
 * are the transfers' spans on their stream, not the host's issue times.
 * Errors: a failed transfer (SB_ERR_COMM with CUDA's message). */
static sb_status harvest(struct sb_comm *c)
{
    struct nccl_impl *m = sb_nccl_impl(c);
    for (int i = 0; i < m->n_slots; i++) {
        struct nccl_slot *q = &m->slots[i];
        if (!q->timing) continue;
        cudaError_t e = cudaEventQuery(q->done);
        if (e == cudaErrorNotReady) {
            cudaGetLastError(); /* not an error: clear it for later checks */
            continue;
        }
        SB_TRY(SB_CUDA_CHECK(e, SB_ERR_COMM));
        float ms = 0.0f;
        SB_TRY(SB_CUDA_CHECK(cudaEventElapsedTime(&ms, q->start, q->done), SB_ERR_COMM));
        if (q->kind < SB_COMM_NKINDS) c->counters[q->kind].seconds += 1e-3 * (double)ms;
        q->timing = 0;
    }
    return SB_OK;
}

/* A free slot for a call of `kind` (harvesting finished ones first; the
 * pool grows only when more calls are in flight than it has slots). */
sb_status sb_nccl_acquire(struct sb_comm *c, int kind, struct nccl_slot **out)
{
    struct nccl_impl *m = sb_nccl_impl(c);
    SB_TRY(harvest(c));
    if (kind < 0 || kind > SB_COMM_NKINDS) kind = SB_COMM_NKINDS; /* uncounted: credited to none */
    int i = 0;
    while (i < m->n_slots && (m->slots[i].timing || m->slots[i].live)) i++;
    if (i == m->n_slots) SB_TRY(grow_pool(m, m->n_slots ? m->n_slots : SB_NCCL_SLOTS_INITIAL));
    struct nccl_slot *q = &m->slots[i];
    q->kind = kind;
    *out = q;
    return SB_OK;
}

static sb_status nccl_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    SB_NCCL_TIMED(c, SB_COMM_ALLREDUCE, s,
                  ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, sb_nccl_impl(c)->comm, s),
                  "ncclAllReduce");
    return SB_OK;
}

/* Grows the device scratch to `bytes`, zeroed on stream s (zeros keep it
 * finite and compute-sanitizer's initcheck quiet). cudaFree waits for the device, so
 * the old block is not in use when it goes. */
static sb_status ensure_scratch(struct nccl_impl *m, size_t bytes, cudaStream_t s)
{
    if (m->scratch_bytes >= bytes) return SB_OK;
    if (m->scratch) cudaFree(m->scratch);
    m->scratch = NULL;
    m->scratch_bytes = 0;
    SB_TRY(SB_CUDA_CHECK(cudaMalloc(&m->scratch, bytes), SB_ERR_COMM));
    m->scratch_bytes = bytes;
    return SB_CUDA_CHECK(cudaMemsetAsync(m->scratch, 0, bytes, s), SB_ERR_COMM);
}

/* The 16-bit all-reduce (comm.h, allreduce16): buf (n floats, device)
 * converted into the scratch as fp16/bf16, ncclAllReduce with
 * ncclFloat16/ncclBfloat16 (NCCL adds two 16-bit values and rounds once
 * per hop, which equals adding in fp32 and rounding), converted back; all
 * on the calling thread's stream, no wait. The conversions are kernels in
 * the stream's order: their time is not split out (convert_s untouched). */
static sb_status nccl_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf,
                                  size_t n, double *convert_s)
{
    (void)convert_s;
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    struct nccl_impl *m = sb_nccl_impl(c);
    SB_TRY(ensure_scratch(m, (n ? n : 1) * sizeof(uint16_t), s));
    uint16_t *h = m->scratch;
    int bf16 = fmt == SB_HALF_BF16;
    SB_TRY(SB_CUDA_CHECK((cudaError_t)sb_nccl_half_encode(buf, h, n, bf16, s), SB_ERR_COMM));
    SB_NCCL_TIMED(c, SB_COMM_ALLREDUCE, s,
                  ncclAllReduce(h, h, n, bf16 ? ncclBfloat16 : ncclFloat16, ncclSum, m->comm, s),
                  "ncclAllReduce (16-bit)");
    return SB_CUDA_CHECK((cudaError_t)sb_nccl_half_decode(h, buf, n, bf16, s), SB_ERR_COMM);
}

/* buf is host memory (metrics, once per epoch): staged through device
 * scratch, and the only op that waits (the result lands on the host). The
 * wait also finishes every earlier call, so all their seconds are
 * harvested here, before the report reads the counters. */
static sb_status nccl_allreduce_f64(struct sb_comm *c, double *buf, size_t n)
{
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    size_t bytes = n * sizeof *buf;
    SB_TRY(ensure_scratch(sb_nccl_impl(c), bytes, s));
    void *d = sb_nccl_impl(c)->scratch;
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, s), SB_ERR_COMM));
    SB_TRY(sb_nccl_check(ncclAllReduce(d, d, n, ncclDouble, ncclSum, sb_nccl_impl(c)->comm, s),
                         "ncclAllReduce (f64)"));
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, s),
                         SB_ERR_COMM));
    SB_TRY(SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM));
    if (sb_nccl_impl(c)->comm_stream)
        SB_TRY(SB_CUDA_CHECK(cudaStreamSynchronize(sb_nccl_impl(c)->comm_stream), SB_ERR_COMM));
    return harvest(c);
}

static sb_status nccl_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    SB_NCCL_TIMED(c, SB_COMM_BROADCAST, s,
                  ncclBroadcast(buf, buf, n, ncclFloat, root, sb_nccl_impl(c)->comm, s),
                  "ncclBroadcast");
    return SB_OK;
}

/* Opens a call of `kind` on the member's communication stream: acquires a
 * slot, makes the communication stream wait for everything enqueued so far
 * on the compute stream (the kernels that wrote the buffer), without the
 * host waiting, and records the slot's start event there. */
sb_status sb_nccl_async_begin(struct sb_comm *c, enum sb_comm_kind kind, struct nccl_slot **out)
{
    struct nccl_impl *m = sb_nccl_impl(c);
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s)); /* also makes m->device current */
    struct nccl_slot *q;
    SB_TRY(sb_nccl_acquire(c, (int)kind, &q));
    SB_TRY(SB_CUDA_CHECK(cudaEventRecord(q->ready, s), SB_ERR_COMM));
    SB_TRY(SB_CUDA_CHECK(cudaStreamWaitEvent(m->comm_stream, q->ready, 0), SB_ERR_COMM));
    SB_TRY(SB_CUDA_CHECK(cudaEventRecord(q->start, m->comm_stream), SB_ERR_COMM));
    *out = q;
    return SB_OK;
}

/* Closes the call opened by async_begin after its NCCL call returned rc:
 * records the completion event that test polls and wait orders the
 * compute stream after. */
sb_status sb_nccl_async_end(struct sb_comm *c, struct nccl_slot *q, ncclResult_t rc,
                            const char *what, struct sb_comm_request *req)
{
    SB_TRY(sb_nccl_check(rc, what));
    SB_TRY(SB_CUDA_CHECK(cudaEventRecord(q->done, sb_nccl_impl(c)->comm_stream), SB_ERR_COMM));
    q->timing = 1;
    q->live = 1;
    req->impl = q;
    req->done = 0;
    return SB_OK;
}

static sb_status nccl_iallreduce(struct sb_comm *c, float *buf, size_t n,
                                 struct sb_comm_request *req)
{
    struct nccl_slot *q;
    SB_TRY(sb_nccl_async_begin(c, SB_COMM_ALLREDUCE, &q));
    return sb_nccl_async_end(c, q,
                             ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, sb_nccl_impl(c)->comm,
                                           sb_nccl_impl(c)->comm_stream),
                             "ncclAllReduce (bucket)", req);
}

/* NCCL's reduce-scatter and all-gather take one block size for every
 * rank: *count = counts[0] when every count equals it. Errors:
 * SB_ERR_USAGE naming the call otherwise. */
static sb_status equal_blocks(const struct sb_comm *c, const size_t *counts, const char *what,
                              size_t *count)
{
    for (int r = 1; r < c->size; r++)
        if (counts[r] != counts[0])
            return sb_error(SB_ERR_USAGE, "%s: NCCL needs blocks of one size (rank %d: %zu "
                            "floats, rank 0: %zu)", what, r, counts[r], counts[0]);
    *count = counts[0];
    return SB_OK;
}

/* ncclReduceScatter: send (size x count floats) -> recv (count), on the
 * communication stream like the non-blocking all-reduce. */
static sb_status nccl_ireduce_scatter(struct sb_comm *c, const float *send, float *recv,
                                      const size_t *counts, struct sb_comm_request *req)
{
    size_t count = 0;
    SB_TRY(equal_blocks(c, counts, "ncclReduceScatter", &count));
    struct nccl_slot *q;
    SB_TRY(sb_nccl_async_begin(c, SB_COMM_REDUCE_SCATTER, &q));
    return sb_nccl_async_end(c, q,
                             ncclReduceScatter(send, recv, count, ncclFloat, ncclSum,
                                               sb_nccl_impl(c)->comm, sb_nccl_impl(c)->comm_stream),
                             "ncclReduceScatter", req);
}

/* ncclAllGather: send (count floats) -> recv (size x count), rank order. */
static sb_status nccl_iallgather(struct sb_comm *c, const float *send, float *recv,
                                 const size_t *counts, struct sb_comm_request *req)
{
    size_t count = 0;
    SB_TRY(equal_blocks(c, counts, "ncclAllGather", &count));
    struct nccl_slot *q;
    SB_TRY(sb_nccl_async_begin(c, SB_COMM_ALLGATHER, &q));
    return sb_nccl_async_end(c, q,
                             ncclAllGather(send, recv, count, ncclFloat, sb_nccl_impl(c)->comm,
                                           sb_nccl_impl(c)->comm_stream),
                             "ncclAllGather", req);
}

/* Polls the completion event: cudaSuccess = done, cudaErrorNotReady = not
 * yet, anything else is the all-reduce's (or an earlier kernel's) failure. */
static sb_status nccl_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    (void)c;
    struct nccl_slot *q = req->impl;
    *done = 0;
    cudaError_t e = cudaEventQuery(q->done);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not an error: clear it for later checks */
        return SB_OK;
    }
    q->live = 0;
    req->impl = NULL;
    SB_TRY(SB_CUDA_CHECK(e, SB_ERR_COMM));
    *done = 1;
    return SB_OK;
}

/* Orders the calling thread's compute stream after the all-reduce (device
 * side; the host does not block). */
static sb_status nccl_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    struct nccl_slot *q = req->impl;
    if (!q) return SB_OK; /* released by a failed test: its error was returned there */
    q->live = 0;
    req->impl = NULL;
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    return SB_CUDA_CHECK(cudaStreamWaitEvent(s, q->done, 0), SB_ERR_COMM);
}

void sb_nccl_destroy(struct sb_comm *c)
{
    struct nccl_impl *m = c ? c->impl : NULL;
    if (m) {
        /* Teardown errors are ignored: nothing useful can follow. The
         * calling thread's current device is restored afterwards: it may be
         * another member's thread, whose backend context must stay on its
         * own GPU. */
        int previous = -1;
        if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
        cudaSetDevice(m->device);
        /* The communicator goes first, while every stream it has seen still
         * exists: its last operations (queued on comm_stream) must finish
         * before the stream is destroyed. ncclCommDestroy of members made by
         * ncclCommInitAll may be called one after another from one thread:
         * NCCL frees the clique's shared resources at the last one. */
        if (m->comm_stream) cudaStreamSynchronize(m->comm_stream);
        if (m->comm) ncclCommDestroy(m->comm);
        if (m->comm_stream) cudaStreamDestroy(m->comm_stream);
        for (int i = 0; i < m->n_slots; i++) { /* pending ones are freed when done */
            cudaEventDestroy(m->slots[i].ready);
            cudaEventDestroy(m->slots[i].start);
            cudaEventDestroy(m->slots[i].done);
        }
        free(m->slots);
        if (m->scratch) cudaFree(m->scratch);
        if (previous >= 0) cudaSetDevice(previous);
        cudaGetLastError(); /* keep teardown failures out of later checks */
        free(m);
    }
    free(c);
}

static const struct sb_comm_ops nccl_ops = {
    .name = "nccl",
    .device_timed = 1,
    .allreduce = nccl_allreduce,
    .allreduce_f64 = nccl_allreduce_f64,
    .broadcast = nccl_broadcast,
    .send = sb_nccl_send,
    .recv = sb_nccl_recv,
    .isend = sb_nccl_isend,
    .irecv = sb_nccl_irecv,
    .split = sb_nccl_split,
    .destroy = sb_nccl_destroy,
    .iallreduce = nccl_iallreduce,
    .ireduce_scatter = nccl_ireduce_scatter,
    .iallgather = nccl_iallgather,
    .test = nccl_test,
    .wait = nccl_wait,
    .allreduce16 = nccl_allreduce16,
};

/* A member with no NCCL communicator yet, with its communication stream
 * and event pool created on `device` (the calling thread's current device
 * is put back). */
sb_status sb_nccl_member_new(int device, struct sb_comm **out)
{
    *out = calloc(1, sizeof **out);
    struct nccl_impl *m = calloc(1, sizeof *m);
    if (!*out || !m) {
        free(*out);
        free(m);
        *out = NULL;
        return sb_error(SB_ERR_NOMEM, "nccl communicator: out of memory");
    }
    m->device = device;
    (*out)->ops = &nccl_ops;
    (*out)->impl = m;
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    sb_status st = SB_CUDA_CHECK(cudaSetDevice(device), SB_ERR_COMM);
    /* Non-blocking: no implicit ordering with the legacy default stream. */
    if (!st) st = SB_CUDA_CHECK(cudaStreamCreateWithFlags(&m->comm_stream,
                                                          cudaStreamNonBlocking), SB_ERR_COMM);
#ifdef SB_HAVE_NVTX
    if (!st) {
        char name[48];
        snprintf(name, sizeof name, "stratbench nccl (GPU %d)", device);
        nvtxNameCudaStreamA(m->comm_stream, name);
    }
#endif
    if (!st) st = grow_pool(m, SB_NCCL_SLOTS_INITIAL);
    if (previous >= 0) cudaSetDevice(previous);
    if (st) {
        sb_nccl_destroy(*out);
        *out = NULL;
    }
    return st;
}

#endif /* SB_HAVE_NCCL */
