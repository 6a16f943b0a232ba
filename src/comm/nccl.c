/* The "nccl" communicator: NCCL collectives on GPU buffers, for the cuda
 * backend. Compiled only when configure.py found NCCL (SB_HAVE_NCCL).
 *
 * Every call is enqueued on the calling thread's CUDA stream (the backend's,
 * sb_cuda_stream()), so it is ordered after the kernels that produced the
 * buffer, and then waits for that stream: the communicator interface is
 * blocking, so on return the result is in place.
 *
 * The non-blocking all-reduce (ddp's buckets) runs on a second, per-member
 * communication stream, as PyTorch DDP and llm.c overlap: an event recorded
 * on the compute stream (after the kernels that wrote the bucket) is made a
 * dependency of the communication stream, the ncclAllReduce is enqueued
 * there and a completion event recorded after it. test() queries that event
 * (no blocking); wait() makes the compute stream wait on it (no host
 * blocking either: work enqueued afterwards on the compute stream, e.g. the
 * optimizer, runs after the all-reduce). So for this communicator
 * sb_comm_wait returns before the data has arrived; the host-clock times
 * the wrappers record for it are issue times, not transfer times
 * (docs/gpu.md, "Timing").
 *
 * Bootstrap across processes: rank 0 creates an ncclUniqueId and broadcasts
 * it over MPI; every rank then calls ncclCommInitRank (NCCL user guide,
 * "Creating a communicator"). Within one process (mirrored),
 * ncclCommInitAll creates one member per device. */
#ifdef SB_HAVE_NCCL

#include <cuda_runtime_api.h>
#ifdef SB_HAVE_NVTX
#include <nvtx3/nvToolsExtCudaRt.h>
#endif
#include <stdio.h>
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "backend/cuda_check.h"
#include "comm/comm.h"

struct nccl_impl {
    ncclComm_t comm;
    int device;
    void *scratch;        /* device staging for host metrics */
    size_t scratch_bytes;
    cudaStream_t comm_stream; /* non-blocking all-reduces; created on first use */
};

/* A non-blocking all-reduce in flight: its completion event, recorded on the
 * communication stream after the ncclAllReduce. */
struct nccl_pending {
    cudaEvent_t done;
};

static sb_status nccl_check(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return SB_OK;
    return sb_error(SB_ERR_COMM, "%s: %s", what, ncclGetErrorString(r));
}

static struct nccl_impl *impl(struct sb_comm *c) { return c->impl; }

/* The calling thread's stream, on this communicator's device. */
static sb_status stream_of(struct sb_comm *c, cudaStream_t *out)
{
    if (sb_cuda_current_device() != impl(c)->device)
        SB_TRY(sb_cuda_set_device(impl(c)->device));
    *out = (cudaStream_t)sb_cuda_stream();
    if (!*out) return sb_error(SB_ERR_COMM, "nccl: no CUDA stream on device %d", impl(c)->device);
    return SB_OK;
}

static sb_status wait_stream(cudaStream_t s, const char *what)
{
    (void)what; /* SB_CUDA_CHECK names the call and the file:line */
    return SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
}

static sb_status nccl_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    cudaStream_t s;
    SB_TRY(stream_of(c, &s));
    SB_TRY(nccl_check(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, impl(c)->comm, s),
                      "ncclAllReduce"));
    return wait_stream(s, "cudaStreamSynchronize (ncclAllReduce)");
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

/* buf is host memory (metrics): staged through device scratch. */
static sb_status nccl_allreduce_f64(struct sb_comm *c, double *buf, size_t n)
{
    cudaStream_t s;
    SB_TRY(stream_of(c, &s));
    size_t bytes = n * sizeof *buf;
    SB_TRY(ensure_scratch(impl(c), bytes, s));
    void *d = impl(c)->scratch;
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, s), SB_ERR_COMM));
    SB_TRY(nccl_check(ncclAllReduce(d, d, n, ncclDouble, ncclSum, impl(c)->comm, s),
                      "ncclAllReduce (f64)"));
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, s), SB_ERR_COMM));
    return wait_stream(s, "cudaStreamSynchronize (ncclAllReduce f64)");
}

static sb_status nccl_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    cudaStream_t s;
    SB_TRY(stream_of(c, &s));
    SB_TRY(nccl_check(ncclBroadcast(buf, buf, n, ncclFloat, root, impl(c)->comm, s),
                      "ncclBroadcast"));
    return wait_stream(s, "cudaStreamSynchronize (ncclBroadcast)");
}

static sb_status nccl_send(struct sb_comm *c, const float *buf, size_t n, int peer)
{
    cudaStream_t s;
    SB_TRY(stream_of(c, &s));
    SB_TRY(nccl_check(ncclSend(buf, n, ncclFloat, peer, impl(c)->comm, s), "ncclSend"));
    return wait_stream(s, "cudaStreamSynchronize (ncclSend)");
}

static sb_status nccl_recv(struct sb_comm *c, float *buf, size_t n, int peer)
{
    cudaStream_t s;
    SB_TRY(stream_of(c, &s));
    SB_TRY(nccl_check(ncclRecv(buf, n, ncclFloat, peer, impl(c)->comm, s), "ncclRecv"));
    return wait_stream(s, "cudaStreamSynchronize (ncclRecv)");
}

/* The member's communication stream on its device, created on first use
 * (non-blocking: no implicit ordering with the legacy default stream). */
static sb_status ensure_comm_stream(struct nccl_impl *m)
{
    if (m->comm_stream) return SB_OK;
    SB_TRY(SB_CUDA_CHECK(cudaStreamCreateWithFlags(&m->comm_stream, cudaStreamNonBlocking),
                         SB_ERR_COMM));
#ifdef SB_HAVE_NVTX
    char name[48];
    snprintf(name, sizeof name, "stratbench nccl (GPU %d)", m->device);
    nvtxNameCudaStreamA(m->comm_stream, name);
#endif
    return SB_OK;
}

static sb_status nccl_iallreduce(struct sb_comm *c, float *buf, size_t n,
                                 struct sb_comm_request *req)
{
    struct nccl_impl *m = impl(c);
    cudaStream_t s;
    SB_TRY(stream_of(c, &s)); /* also makes m->device current */
    SB_TRY(ensure_comm_stream(m));
    struct nccl_pending *p = malloc(sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "nccl iallreduce: out of memory");
    cudaEvent_t ready = NULL;
    p->done = NULL;
    sb_status st = SB_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                                 SB_ERR_COMM);
    if (!st) st = SB_CUDA_CHECK(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming),
                                SB_ERR_COMM);
    /* Compute stream -> ready -> communication stream: the all-reduce starts
     * after every kernel enqueued so far on the compute stream (those that
     * wrote this bucket's gradients), without the host waiting. */
    if (!st) st = SB_CUDA_CHECK(cudaEventRecord(ready, s), SB_ERR_COMM);
    if (!st) st = SB_CUDA_CHECK(cudaStreamWaitEvent(m->comm_stream, ready, 0), SB_ERR_COMM);
    if (!st) st = nccl_check(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, m->comm,
                                           m->comm_stream), "ncclAllReduce (bucket)");
    if (!st) st = SB_CUDA_CHECK(cudaEventRecord(p->done, m->comm_stream), SB_ERR_COMM);
    /* Destroying a recorded event is legal: CUDA frees it once it completes. */
    if (ready) cudaEventDestroy(ready);
    if (st) {
        if (p->done) cudaEventDestroy(p->done);
        free(p);
        return st;
    }
    req->impl = p;
    req->done = 0;
    return SB_OK;
}

static void pending_free(struct sb_comm_request *req)
{
    struct nccl_pending *p = req->impl;
    if (p->done) cudaEventDestroy(p->done);
    free(p);
    req->impl = NULL;
}

/* Polls the completion event: cudaSuccess = done, cudaErrorNotReady = not
 * yet, anything else is the all-reduce's (or an earlier kernel's) failure. */
static sb_status nccl_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    (void)c;
    struct nccl_pending *p = req->impl;
    *done = 0;
    cudaError_t e = cudaEventQuery(p->done);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not an error: clear it for later checks */
        return SB_OK;
    }
    pending_free(req);
    SB_TRY(SB_CUDA_CHECK(e, SB_ERR_COMM));
    *done = 1;
    return SB_OK;
}

/* Orders the calling thread's compute stream after the all-reduce (device
 * side; the host does not block). */
static sb_status nccl_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    struct nccl_pending *p = req->impl;
    if (!p) return SB_OK; /* released by a failed test: its error was returned there */
    cudaStream_t s;
    sb_status st = stream_of(c, &s);
    if (!st) st = SB_CUDA_CHECK(cudaStreamWaitEvent(s, p->done, 0), SB_ERR_COMM);
    pending_free(req);
    return st;
}

static void nccl_destroy(struct sb_comm *c)
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
        if (m->scratch) cudaFree(m->scratch);
        if (previous >= 0) cudaSetDevice(previous);
        cudaGetLastError(); /* keep teardown failures out of later checks */
        free(m);
    }
    free(c);
}

static const struct sb_comm_ops nccl_ops = {
    .name = "nccl",
    .allreduce = nccl_allreduce,
    .allreduce_f64 = nccl_allreduce_f64,
    .broadcast = nccl_broadcast,
    .send = nccl_send,
    .recv = nccl_recv,
    .destroy = nccl_destroy,
    .iallreduce = nccl_iallreduce,
    .test = nccl_test,
    .wait = nccl_wait,
};

/* A member with no NCCL communicator yet. */
static sb_status member_new(int device, struct sb_comm **out)
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
    return SB_OK;
}

sb_status sb_comm_nccl_create(const void *mpi_comm, int device, struct sb_comm **out)
{
    *out = NULL;
    MPI_Comm world = *(const MPI_Comm *)mpi_comm;
    int rank = 0, size = 0;
    if (MPI_Comm_rank(world, &rank) != MPI_SUCCESS || MPI_Comm_size(world, &size) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: MPI_Comm_rank/size failed");
    /* The backend's thread context and the NCCL communicator must share the
     * device: select it before anything else touches the GPU. A failure here
     * on one rank is shared with all (the MPI_Allreduce below) before any
     * rank enters ncclCommInitRank, which would wait for the missing rank. */
    sb_status local = sb_cuda_set_device(device);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0 && !local) local = nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, world) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: MPI_Bcast of the ncclUniqueId failed");
    int failed = local != SB_OK, any_failed = 0;
    if (MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, world) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: MPI_Allreduce of the set-up status failed");
    if (local) return local;
    if (any_failed)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: another rank failed to set up its GPU");
    struct sb_comm *c;
    SB_TRY(member_new(device, &c));
    sb_status st = nccl_check(ncclCommInitRank(&impl(c)->comm, size, id, rank),
                              "ncclCommInitRank");
    if (st) {
        nccl_destroy(c);
        return st;
    }
    c->rank = rank;
    c->size = size;
    *out = c;
    return SB_OK;
}

sb_status sb_comm_nccl_create_all(int n, const int *devices, struct sb_comm **out)
{
    for (int i = 0; i < n; i++) out[i] = NULL;
    ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
    if (!comms) return sb_error(SB_ERR_NOMEM, "nccl communicator: out of memory");
    /* ncclCommInitAll visits every device; put the caller's back, so that a
     * thread that already has a backend context keeps launching on it. */
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    sb_status st = nccl_check(ncclCommInitAll(comms, n, devices), "ncclCommInitAll");
    if (previous >= 0) cudaSetDevice(previous);
    for (int i = 0; i < n && !st; i++) {
        st = member_new(devices[i], &out[i]);
        if (st) break;
        impl(out[i])->comm = comms[i];
        comms[i] = NULL;
        out[i]->rank = i;
        out[i]->size = n;
    }
    if (st) {
        for (int i = 0; i < n; i++) {
            sb_comm_destroy(out[i]);
            out[i] = NULL;
            if (comms[i]) ncclCommDestroy(comms[i]);
        }
    }
    free(comms);
    return st;
}

#endif /* SB_HAVE_NCCL */
