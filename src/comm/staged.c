/* The "staged" communicator: a host-memory communicator (mpi, or local
 * between threads) carrying device buffers, by way of pinned host memory.
 *
 * Each op copies the device buffer to a pinned host buffer on the calling
 * thread's CUDA stream (sb_cuda_stream(), so the copy is ordered after the
 * kernels that produced the data), waits for the copy, runs the inner op on
 * the host buffer, copies the result back on the same stream and waits
 * again, so the interface stays blocking and the host buffer can be reused
 * by the next op. This is the path `--comm mpi` takes on GPUs (MPI without
 * CUDA awareness), and it lets several ranks or threads share one GPU.
 * DESIGN.md: "mpi (host buffers; staged through host memory for GPU buffers
 * when NCCL is not used)".
 *
 * There is no non-blocking all-reduce (sb_comm_iallreduce falls back on the
 * blocking one): staging needs the host between the copies, so there is
 * nothing to overlap without a progress thread. Non-blocking
 * point-to-point (isend, irecv) copies a send to host memory of its own at
 * issue and a receive to the device when test or wait sees the inner
 * transfer complete. split splits the inner communicator. Compiled only
 * with CUDA. */
#ifdef SB_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "backend/cuda.h"
#include "backend/cuda_check.h"
#include "comm/comm.h"

struct staged_impl {
    struct sb_comm *inner; /* host-memory communicator, owned */
    void *host;            /* pinned staging buffer (cudaMallocHost) */
    size_t cap;            /* bytes of host */
};

static struct staged_impl *impl(struct sb_comm *c) { return c->impl; }

/* The calling thread's stream (the backend's; created on first use). */
static sb_status stream(cudaStream_t *out)
{
    *out = (cudaStream_t)sb_cuda_stream();
    if (!*out) return sb_error(SB_ERR_COMM, "staged: no CUDA stream on this thread");
    return SB_OK;
}

/* Grows the pinned buffer to at least `bytes` (contents are not kept). */
static sb_status ensure_host(struct staged_impl *m, size_t bytes)
{
    if (m->cap >= bytes) return SB_OK;
    if (m->host) cudaFreeHost(m->host);
    m->host = NULL;
    m->cap = 0;
    SB_TRY(SB_CUDA_CHECK(cudaMallocHost(&m->host, bytes ? bytes : 1), SB_ERR_COMM));
    m->cap = bytes;
    return SB_OK;
}

/* host (n floats) = dev, after the work queued on this thread's stream. */
static sb_status to_host(struct staged_impl *m, const float *dev, size_t n)
{
    cudaStream_t s;
    SB_TRY(stream(&s));
    size_t bytes = n * sizeof(float);
    SB_TRY(ensure_host(m, bytes));
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(m->host, dev, bytes, cudaMemcpyDeviceToHost, s),
                         SB_ERR_COMM));
    return SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
}

/* dev (n floats) = host; waits so that the host buffer is free again. */
static sb_status to_device(struct staged_impl *m, float *dev, size_t n)
{
    cudaStream_t s;
    SB_TRY(stream(&s));
    size_t bytes = n * sizeof(float);
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(dev, m->host, bytes, cudaMemcpyHostToDevice, s),
                         SB_ERR_COMM));
    return SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
}

static sb_status staged_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    struct staged_impl *m = impl(c);
    SB_TRY(to_host(m, buf, n));
    SB_TRY(m->inner->ops->allreduce(m->inner, m->host, n));
    return to_device(m, buf, n);
}

/* The 16-bit all-reduce of the inner communicator on the staged copy
 * (--precision bf16|fp16's gradients; the wire and the sums are the inner
 * op's, comm.h). Errors: SB_ERR_USAGE when the inner communicator has no
 * 16-bit all-reduce; the copies' and the inner op's. */
static sb_status staged_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf,
                                    size_t n, double *convert_s)
{
    struct staged_impl *m = impl(c);
    if (!m->inner->ops->allreduce16)
        return sb_error(SB_ERR_USAGE, "staged %s communicator: no 16-bit all-reduce",
                        m->inner->ops->name);
    SB_TRY(to_host(m, buf, n));
    SB_TRY(m->inner->ops->allreduce16(m->inner, fmt, m->host, n, convert_s));
    return to_device(m, buf, n);
}

/* Metrics are host doubles already: no staging. */
static sb_status staged_allreduce_f64(struct sb_comm *c, double *buf, size_t n)
{
    return impl(c)->inner->ops->allreduce_f64(impl(c)->inner, buf, n);
}

static sb_status staged_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    struct staged_impl *m = impl(c);
    if (c->rank == root) SB_TRY(to_host(m, buf, n));
    else SB_TRY(ensure_host(m, n * sizeof(float)));
    SB_TRY(m->inner->ops->broadcast(m->inner, m->host, n, root));
    return c->rank == root ? SB_OK : to_device(m, buf, n);
}

static sb_status staged_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                            enum sb_comm_kind kind)
{
    struct staged_impl *m = impl(c);
    SB_TRY(to_host(m, buf, n));
    return m->inner->ops->send(m->inner, m->host, n, peer, kind);
}

static sb_status staged_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                            enum sb_comm_kind kind)
{
    struct staged_impl *m = impl(c);
    SB_TRY(ensure_host(m, n * sizeof(float)));
    SB_TRY(m->inner->ops->recv(m->inner, m->host, n, peer, kind));
    return to_device(m, buf, n);
}

static sb_status staged_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                                enum sb_comm_kind kind)
{
    struct staged_impl *m = impl(c);
    if (!m->inner->ops->recv_any)
        return sb_error(SB_ERR_INTERNAL, "staged %s communicator: no receive from any source",
                        m->inner->ops->name);
    SB_TRY(ensure_host(m, n * sizeof(float)));
    SB_TRY(m->inner->ops->recv_any(m->inner, m->host, n, peer, kind));
    return to_device(m, buf, n);
}

/* A non-blocking point-to-point transfer in flight: the inner
 * communicator's request on a host copy of the device buffer. */
struct staged_p2p {
    struct sb_comm_request inner; /* on host */
    float *host;                  /* (n) malloc'd: several may be in flight */
    float *dev;                   /* a receive's destination; NULL for a send */
    size_t n;
};

/* Ends p once its inner request is complete: a receive's host copy goes
 * to the device (waiting for the copy); frees p. */
static sb_status p2p_finish(struct staged_p2p *p)
{
    sb_status st = SB_OK;
    if (p->dev && p->n) {
        cudaStream_t s;
        st = stream(&s);
        if (!st) st = SB_CUDA_CHECK(cudaMemcpyAsync(p->dev, p->host, p->n * sizeof(float),
                                                    cudaMemcpyHostToDevice, s), SB_ERR_COMM);
        if (!st) st = SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
    }
    free(p->host);
    free(p);
    return st;
}

/* Starts a send of device `send` (copied to host first, waiting for the
 * copy) or a receive into device `recv` of n floats with peer, through the
 * inner communicator's isend/irecv (or, without them, its blocking
 * send/recv: complete at issue). */
static sb_status p2p_start(struct sb_comm *c, const float *send, float *recv, size_t n,
                           int peer, struct sb_comm_request *req)
{
    struct sb_comm *in = impl(c)->inner;
    struct staged_p2p *p = calloc(1, sizeof *p);
    if (p) p->host = malloc((n ? n : 1) * sizeof(float));
    if (!p || !p->host) {
        free(p);
        return sb_error(SB_ERR_NOMEM, "staged: out of memory (point-to-point)");
    }
    p->dev = recv;
    p->n = n;
    p->inner.index = -1;
    p->inner.kind = req->kind;
    sb_status st = SB_OK;
    if (send && n) {
        cudaStream_t s;
        st = stream(&s);
        if (!st) st = SB_CUDA_CHECK(cudaMemcpyAsync(p->host, send, n * sizeof(float),
                                                    cudaMemcpyDeviceToHost, s), SB_ERR_COMM);
        if (!st) st = SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
    }
    if (!st && (send ? in->ops->isend != NULL : in->ops->irecv != NULL)) {
        st = send ? in->ops->isend(in, p->host, n, peer, &p->inner)
                  : in->ops->irecv(in, p->host, n, peer, &p->inner);
    } else if (!st) {
        st = send ? in->ops->send(in, p->host, n, peer, req->kind)
                  : in->ops->recv(in, p->host, n, peer, req->kind);
        p->inner.done = 1;
    }
    if (st) {
        if (!p->inner.impl) { /* nothing left in flight on the host copy */
            free(p->host);
            free(p);
        }
        return st;
    }
    if (p->inner.done) {
        req->impl = NULL;
        req->done = 1;
        return p2p_finish(p);
    }
    req->impl = p;
    req->done = 0;
    return SB_OK;
}

static sb_status staged_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                              struct sb_comm_request *req)
{
    return p2p_start(c, buf, NULL, n, peer, req);
}

static sb_status staged_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                              struct sb_comm_request *req)
{
    return p2p_start(c, NULL, buf, n, peer, req);
}

/* test and wait of a point-to-point request (the only non-blocking calls
 * this communicator has): the inner communicator's, then p2p_finish. */
static sb_status staged_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    struct sb_comm *in = impl(c)->inner;
    struct staged_p2p *p = req->impl;
    SB_TRY(in->ops->test(in, &p->inner, done));
    if (!*done) return SB_OK;
    req->impl = NULL;
    return p2p_finish(p);
}

static sb_status staged_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    struct sb_comm *in = impl(c)->inner;
    struct staged_p2p *p = req->impl;
    SB_TRY(in->ops->wait(in, &p->inner));
    req->impl = NULL;
    return p2p_finish(p);
}

/* The inner communicator split, wrapped again (a staging buffer of its
 * own). */
static sb_status staged_split(struct sb_comm *c, int color, int key, struct sb_comm **out)
{
    *out = NULL;
    struct sb_comm *in = impl(c)->inner, *part = NULL;
    if (!in->ops->split)
        return sb_error(SB_ERR_USAGE, "the staged %s communicator cannot be split",
                        in->ops->name);
    SB_TRY(in->ops->split(in, color, key, &part));
    return sb_comm_staged_create(part, out);
}

static void staged_destroy(struct sb_comm *c)
{
    struct staged_impl *m = c ? c->impl : NULL;
    if (m) {
        sb_comm_destroy(m->inner);
        if (m->host) cudaFreeHost(m->host); /* teardown: errors ignored */
        free(m);
    }
    free(c);
}

static const struct sb_comm_ops staged_ops = {
    .name = "staged",
    .allreduce = staged_allreduce,
    .allreduce_f64 = staged_allreduce_f64,
    .allreduce16 = staged_allreduce16,
    .broadcast = staged_broadcast,
    .send = staged_send,
    .recv = staged_recv,
    .recv_any = staged_recv_any,
    .destroy = staged_destroy,
    /* No iallreduce: blocking (see the top of the file); sb_comm_iallreduce
     * runs allreduce and the request is complete at issue. test and wait
     * serve the point-to-point requests only. */
    .test = staged_test,
    .wait = staged_wait,
    .isend = staged_isend,
    .irecv = staged_irecv,
    .split = staged_split,
};

sb_status sb_comm_staged_create(struct sb_comm *inner, struct sb_comm **out)
{
    *out = NULL;
    struct sb_comm *c = calloc(1, sizeof *c);
    struct staged_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        sb_comm_destroy(inner);
        return sb_error(SB_ERR_NOMEM, "staged communicator: out of memory");
    }
    m->inner = inner;
    c->ops = &staged_ops;
    c->impl = m;
    c->rank = inner->rank;
    c->size = inner->size;
    *out = c;
    return SB_OK;
}

#endif /* SB_HAVE_CUDA */
