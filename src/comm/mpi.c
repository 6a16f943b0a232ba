/* The "mpi" communicator: ranks of a duplicated MPI communicator, host
 * buffers. Only the thread that called MPI_Init_thread uses it.
 * Non-blocking all-reduces run the algorithm of c->allreduce_algo:
 * stratbench's ring or recursive doubling (mpi_allreduce.c), or the
 * library's MPI_Iallreduce ("mpi"), or, once its ranks are grouped into
 * hosts (sb_comm_mpi_group_hosts), the hierarchical one (mpi_hier.c).
 * Reduce-scatters and all-gathers in the ring's blocks run stratbench's
 * ring (sb_rs_start, sb_ag_start): the reduce-scatter's temporaries are
 * 2/n of the buffer, and the all-gather sends one message per step where
 * libnbc's sends to every rank at once. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/mpi_allreduce16.h"
#include "comm/mpi_impl.h"
#include "comm/mpi_wait.h"
#include "comm/ring.h"
#include "core/clock.h"
#include "job/job_mpi.h"

/* Every exchange below is non-blocking MPI plus the one polling wait with
 * the watchdog's deadline (sb_mpi_wait, comm/mpi_wait.h), so that a stalled
 * peer ends the job instead of hanging it. */

static sb_status mpi_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    MPI_Request one, *r = sb_mpi_requests(sb_mpi_chunks_of(n), &one);
    if (!r) return sb_error(SB_ERR_NOMEM, "MPI_Iallreduce: out of memory");
    int k = 0;
    sb_status st = SB_OK;
    for (size_t o = 0; o < n && !st; o += SB_MPI_CHUNK, k++) {
        int m = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        st = SB_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + o, m, MPI_FLOAT, MPI_SUM,
                                         sb_mpi_handle(c), &r[k]));
        if (st) k--;
    }
    sb_status wst = sb_mpi_wait(r, k, MPI_STATUSES_IGNORE, "MPI_Iallreduce");
    sb_mpi_release(r, &one);
    return st ? st : wst;
}

/* Metrics are a few doubles, often on the caller's stack: they travel
 * through a heap copy that stays allocated if a wait gives up with the
 * reduction in flight (MPI would otherwise write into a dead frame). */
static sb_status mpi_allreduce_f64(struct sb_comm *c, double *buf, size_t n)
{
    double *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) return sb_error(SB_ERR_NOMEM, "MPI_Iallreduce: out of memory");
    memcpy(copy, buf, n * sizeof *copy);
    MPI_Request r;
    sb_status st = SB_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, copy, (int)n, MPI_DOUBLE, MPI_SUM, sb_mpi_handle(c), &r));
    if (st) {
        free(copy);
        return st;
    }
    st = sb_mpi_wait(&r, 1, MPI_STATUSES_IGNORE, "MPI_Iallreduce");
    if (st) return st; /* still in flight: `copy` is left to MPI */
    memcpy(buf, copy, n * sizeof *copy);
    free(copy);
    return SB_OK;
}

static sb_status mpi_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    MPI_Request one, *r = sb_mpi_requests(sb_mpi_chunks_of(n), &one);
    if (!r) return sb_error(SB_ERR_NOMEM, "MPI_Ibcast: out of memory");
    int k = 0;
    sb_status st = SB_OK;
    for (size_t o = 0; o < n && !st; o += SB_MPI_CHUNK, k++) {
        int m = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        st = SB_MPI_CHECK(MPI_Ibcast(buf + o, m, MPI_FLOAT, root, sb_mpi_handle(c), &r[k]));
        if (st) k--;
    }
    sb_status wst = sb_mpi_wait(r, k, MPI_STATUSES_IGNORE, "MPI_Ibcast");
    sb_mpi_release(r, &one);
    return st ? st : wst;
}

/* MPI_Iallreduce of buf (n floats) in chunks into a new pending. */
static sb_status library_iallreduce(struct sb_comm *c, float *buf, size_t n,
                                    struct mpi_pending **out)
{
    int chunks = (int)((n + SB_MPI_CHUNK - 1) / SB_MPI_CHUNK);
    struct mpi_pending *p = calloc(1, sizeof *p + (size_t)chunks * sizeof p->req[0]);
    if (!p) return sb_error(SB_ERR_NOMEM, "MPI_Iallreduce: out of memory");
    for (size_t o = 0; o < n; o += SB_MPI_CHUNK) {
        int k = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        sb_status st = SB_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + o, k, MPI_FLOAT, MPI_SUM,
                                                   sb_mpi_handle(c), &p->req[p->n]));
        if (st) { /* requests already started cannot be cancelled: finish them */
            MPI_Waitall(p->n, p->req, MPI_STATUSES_IGNORE);
            free(p);
            return st;
        }
        p->n++;
    }
    *out = p;
    return SB_OK;
}

/* The algorithm an all-reduce of n floats runs: c->allreduce_algo, or
 * for auto sb_allreduce_choose_hosts by size, ranks and hosts (the same
 * choice on every rank). */
static enum sb_allreduce_algo choose(const struct sb_comm *c, size_t n)
{
    const struct mpi_impl *m = c->impl;
    if (c->allreduce_algo != SB_ALLREDUCE_AUTO) return c->allreduce_algo;
    return sb_allreduce_choose_hosts(n * sizeof(float), c->size,
                                     m->hier ? sb_hier_hosts(m->hier) : 1);
}

/* The next all-reduce tag of an "mpi" communicator: 1..32767 (MPI
 * guarantees a tag upper bound >= 32767); 0 is central's point-to-point. */
static int next_tag(struct sb_comm *c)
{
    struct mpi_impl *m = c->impl;
    return 1 + (int)(m->seq++ % 32767u);
}

/* Runs choose()'s algorithm; records it in req->algo. */
static sb_status mpi_iallreduce(struct sb_comm *c, float *buf, size_t n,
                                struct sb_comm_request *req)
{
    struct mpi_impl *m = c->impl;
    enum sb_allreduce_algo algo = choose(c, n);
    req->algo = algo;
    struct mpi_pending *p = NULL;
    if (algo == SB_ALLREDUCE_HIERARCHICAL && !m->hier)
        return sb_error(SB_ERR_INTERNAL, "hierarchical all-reduce: the communicator's ranks "
                        "are not grouped into hosts");
    if (algo == SB_ALLREDUCE_LIBRARY) {
        SB_TRY(library_iallreduce(c, buf, n, &p));
    } else {
        p = calloc(1, sizeof *p);
        if (!p) return sb_error(SB_ERR_NOMEM, "all-reduce: out of memory");
        sb_status st;
        if (algo == SB_ALLREDUCE_HIERARCHICAL) {
            st = sb_hier_start(m->hier, buf, n, c->stages, &p->hier);
        } else {
            st = sb_ar_start(m->comm, algo, buf, n, next_tag(c), &m->pool, &p->op);
        }
        if (st) {
            free(p);
            return st;
        }
    }
    req->impl = p;
    req->done = 0;
    int done = 0;
    if (p->hier) SB_TRY(sb_hier_progress(m->hier, p->hier, 0, &done));
    else if (p->op) SB_TRY(sb_ar_progress(p->op, 0, &done)); /* n == 0 or one rank: done */
    else done = p->n == 0;
    if (done) {
        free(p);
        req->impl = NULL;
        req->done = 1;
    }
    return SB_OK;
}

/* Polls (block = 0) or waits for (block = 1) req: the one place this
 * communicator waits on a non-blocking all-reduce. */
static sb_status mpi_progress(struct sb_comm *c, struct sb_comm_request *req, int block,
                              int *done)
{
    struct mpi_pending *p = req->impl;
    *done = 0;
    if (p->hier) {
        SB_TRY(sb_hier_progress(((struct mpi_impl *)c->impl)->hier, p->hier, block, done));
    } else if (p->op) {
        SB_TRY(sb_ar_progress(p->op, block, done));
    } else if (block) {
        /* With the watchdog's deadline; on an error the requests stay
         * pending and p stays allocated (the job is ending). */
        SB_TRY(sb_mpi_wait(p->req, p->n, MPI_STATUSES_IGNORE,
                           p->what ? p->what : "MPI_Iallreduce"));
        *done = 1;
    } else {
        SB_TRY(SB_MPI_CHECK(MPI_Testall(p->n, p->req, done, MPI_STATUSES_IGNORE)));
    }
    if (*done) {
        if (p->decode_to) sb_half_decode(p->fmt, p->wire, p->decode_to, p->decode_n);
        free(p);
        req->impl = NULL;
    }
    return SB_OK;
}

static sb_status mpi_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    return mpi_progress(c, req, 0, done);
}

static sb_status mpi_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    int done = 0;
    return mpi_progress(c, req, 1, &done);
}

/* A request of one MPI call with its int counts and displacements, which
 * MPI reads until completion: laid out as struct mpi_pending (n = 1), so
 * mpi_test and mpi_wait complete and free it like an all-reduce's. */
static struct mpi_pending *pending_with_counts(int size, int **counts, int **displs)
{
    size_t head = sizeof(struct mpi_pending) + sizeof(MPI_Request);
    head = (head + sizeof(int) - 1) / sizeof(int) * sizeof(int);
    struct mpi_pending *p = malloc(head + 2 * (size_t)size * sizeof(int));
    if (!p) return NULL;
    p->op = NULL;
    p->hier = NULL;
    p->what = NULL;
    p->decode_to = NULL;
    p->wire = NULL;
    p->n = 1;
    *counts = (int *)(void *)((char *)p + head);
    *displs = *counts + size;
    return p;
}

/* counts (size_t) -> int counts and displacements; SB_ERR_COMM past 2^31. */
static sb_status int_counts(const size_t *counts, int size, int *c, int *d)
{
    size_t off = 0;
    for (int r = 0; r < size; r++) {
        if (counts[r] > (size_t)INT_MAX || off > (size_t)INT_MAX)
            return sb_error(SB_ERR_COMM, "MPI: a block of more than 2^31 floats");
        c[r] = (int)counts[r];
        d[r] = (int)off;
        off += counts[r];
    }
    return SB_OK;
}

/* Whether counts are the ring's chunks of their sum (sb_ring_chunk). */
static int ring_blocks(const size_t *counts, int size, size_t *total)
{
    size_t n = 0;
    for (int r = 0; r < size; r++) n += counts[r];
    *total = n;
    for (int r = 0; r < size; r++) {
        size_t off, count;
        sb_ring_chunk(n, size, r, &off, &count);
        if (counts[r] != count) return 0;
    }
    return 1;
}

/* Starts stratbench's ring reduce-scatter (start = sb_rs_start) or
 * all-gather (sb_ag_start) of n floats into a new pending that mpi_test and
 * mpi_wait advance and free like an all-reduce's. */
static sb_status ring_start(struct sb_comm *c,
                            sb_status (*start)(MPI_Comm, const float *, float *, size_t, int,
                                               struct sb_ar_pool *, struct sb_ar_op **),
                            const float *send, float *recv, size_t n, const char *what,
                            struct sb_comm_request *req)
{
    struct mpi_impl *m = c->impl;
    struct mpi_pending *p = calloc(1, sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "%s: out of memory", what);
    sb_status st = start(m->comm, send, recv, n, next_tag(c), &m->pool, &p->op);
    if (st) {
        free(p);
        return st;
    }
    req->impl = p;
    return SB_OK;
}

/* stratbench's ring (sb_rs_start: temporaries of 2/n of the buffer) where
 * the blocks are its chunks, as zero's and the hierarchical all-reduce's
 * are; MPI_Ireduce_scatter for any other split. */
static sb_status mpi_ireduce_scatter(struct sb_comm *c, const float *send, float *recv,
                                     const size_t *counts, struct sb_comm_request *req)
{
    size_t n;
    if (ring_blocks(counts, c->size, &n))
        return ring_start(c, sb_rs_start, send, recv, n, "reduce-scatter", req);
    int *cnt, *disp;
    struct mpi_pending *p = pending_with_counts(c->size, &cnt, &disp);
    if (!p) return sb_error(SB_ERR_NOMEM, "MPI_Ireduce_scatter: out of memory");
    sb_status st = int_counts(counts, c->size, cnt, disp);
    if (!st)
        st = SB_MPI_CHECK(MPI_Ireduce_scatter(send, recv, cnt, MPI_FLOAT, MPI_SUM, sb_mpi_handle(c),
                                              &p->req[0]));
    if (st) {
        free(p);
        return st;
    }
    req->impl = p;
    return SB_OK;
}

/* stratbench's ring (sb_ag_start: one message per step) where the blocks
 * are its chunks; MPI_Iallgatherv for any other split. */
static sb_status mpi_iallgather(struct sb_comm *c, const float *send, float *recv,
                                const size_t *counts, struct sb_comm_request *req)
{
    size_t n;
    if (ring_blocks(counts, c->size, &n))
        return ring_start(c, sb_ag_start, send, recv, n, "all-gather", req);
    int *cnt, *disp;
    struct mpi_pending *p = pending_with_counts(c->size, &cnt, &disp);
    if (!p) return sb_error(SB_ERR_NOMEM, "MPI_Iallgatherv: out of memory");
    sb_status st = int_counts(counts, c->size, cnt, disp);
    if (!st)
        st = SB_MPI_CHECK(MPI_Iallgatherv(send, cnt[c->rank], MPI_FLOAT, recv, cnt, disp, MPI_FLOAT,
                                          sb_mpi_handle(c), &p->req[0]));
    if (st) {
        free(p);
        return st;
    }
    req->impl = p;
    return SB_OK;
}

static sb_status wrap(MPI_Comm h, struct sb_comm **out);

/* color < 0: the ranks that share memory with this one (one host). */
static sb_status mpi_split(struct sb_comm *c, int color, int key, struct sb_comm **out)
{
    MPI_Comm h;
    SB_TRY(color < 0 ? SB_MPI_CHECK(MPI_Comm_split_type(sb_mpi_handle(c), MPI_COMM_TYPE_SHARED, key,
                                                        MPI_INFO_NULL, &h))
                     : SB_MPI_CHECK(MPI_Comm_split(sb_mpi_handle(c), color, key, &h)));
    return wrap(h, out);
}

static void mpi_destroy(struct sb_comm *c)
{
    struct mpi_impl *m = c->impl;
    if (m) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        sb_hier_destroy(m->hier);
        if (!finalized) MPI_Comm_free(&m->comm);
        sb_ar_pool_free(&m->pool);
        free(m);
    }
    free(c);
}


/* The 16-bit all-reduce (mpi_allreduce16.h) in the communicator's
 * algorithm: hierarchical where choose() picks it for the wire's 2n bytes
 * (--allreduce hierarchical, or auto on 2+ hosts of 2+ ranks), otherwise
 * the ring (the 16-bit wire has no recursive doubling or library path).
 * Counted under its algorithm like the fp32 all-reduces. */
static sb_status mpi_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf,
                                 size_t n, double *convert_s)
{
    struct mpi_impl *m = c->impl;
    enum sb_allreduce_algo algo =
        c->allreduce_algo != SB_ALLREDUCE_AUTO
            ? c->allreduce_algo
            : sb_allreduce_choose_hosts(n * sizeof(uint16_t), c->size,
                                        m->hier ? sb_hier_hosts(m->hier) : 1);
    if (algo == SB_ALLREDUCE_HIERARCHICAL && !m->hier)
        return sb_error(SB_ERR_INTERNAL, "hierarchical all-reduce: the communicator's ranks "
                        "are not grouped into hosts");
    double t0 = sb_now_s();
    sb_status st;
    if (algo == SB_ALLREDUCE_HIERARCHICAL) {
        struct sb_comm *lo = sb_hier_local(m->hier), *cr = sb_hier_cross(m->hier);
        st = sb_ar16_hier(((struct mpi_impl *)lo->impl)->comm, next_tag(lo),
                          ((struct mpi_impl *)cr->impl)->comm, next_tag(cr), &m->pool, fmt,
                          buf, n, c->stages, convert_s);
    } else {
        algo = SB_ALLREDUCE_RING;
        st = sb_ar16_ring(m->comm, &m->pool, fmt, buf, n, next_tag(c), convert_s);
    }
    struct sb_comm_counter *k = &c->allreduce_by_algo[algo];
    k->calls++;
    k->bytes += (double)n * sizeof(uint16_t);
    k->seconds += sb_now_s() - t0;
    return st;
}

/* The 16-bit ring reduce-scatter (mpi_allreduce16.h) on the next tag. */
static sb_status mpi_reduce_scatter16(struct sb_comm *c, enum sb_half_format fmt,
                                      const float *send, float *recv, const size_t *counts,
                                      double *convert_s)
{
    struct mpi_impl *m = c->impl;
    return sb_rs16_ring(m->comm, &m->pool, fmt, send, recv, counts, next_tag(c), convert_s);
}

/* The 16-bit all-gather (comm.h's allgather16): this rank's block rounded
 * into 16-bit words, MPI_Allgatherv of MPI_UINT16_T, every block decoded
 * into recv; the words come from the communicator's pool. */
static sb_status mpi_allgather16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                                 float *recv, const size_t *counts, double *convert_s)
{
    struct mpi_impl *m = c->impl;
    size_t n = 0;
    for (int r = 0; r < c->size; r++) n += counts[r];
    int *cnt = malloc(2 * (size_t)c->size * sizeof *cnt), *disp = cnt ? cnt + c->size : NULL;
    struct sb_ar_op *held = NULL;
    /* (counts[rank] words) the block sent, then (n words) every block */
    uint16_t *mine = cnt ? sb_ar_pool_take(&m->pool, (counts[c->rank] + n + 1) * sizeof *mine,
                                           &held) : NULL;
    if (!mine) {
        free(cnt);
        return sb_error(SB_ERR_NOMEM, "16-bit all-gather: out of memory");
    }
    uint16_t *all = mine + counts[c->rank];
    sb_status st = int_counts(counts, c->size, cnt, disp);
    double t0 = sb_now_s();
    sb_half_encode(fmt, send, mine, counts[c->rank]);
    double convert = sb_now_s() - t0;
    if (!st)
        st = SB_MPI_CHECK(MPI_Allgatherv(mine, cnt[c->rank], MPI_UINT16_T, all, cnt, disp,
                                         MPI_UINT16_T, m->comm));
    t0 = sb_now_s();
    if (!st) sb_half_decode(fmt, all, recv, n);
    convert += sb_now_s() - t0;
    if (convert_s) *convert_s += convert;
    sb_ar_pool_put(held);
    free(cnt);
    return st;
}

static const struct sb_comm_ops mpi_ops = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .allreduce_f64 = mpi_allreduce_f64,
    .broadcast = mpi_broadcast,
    .send = sb_mpi_send,
    .recv = sb_mpi_recv,
    .recv_any = sb_mpi_recv_any,
    .destroy = mpi_destroy,
    .iallreduce = mpi_iallreduce,
    .test = mpi_test,
    .wait = mpi_wait,
    .ireduce_scatter = mpi_ireduce_scatter,
    .iallgather = mpi_iallgather,
    .isend = sb_mpi_isend,
    .irecv = sb_mpi_irecv,
    .split = mpi_split,
    .allreduce16 = mpi_allreduce16,
    .reduce_scatter16 = mpi_reduce_scatter16,
    .allgather16 = mpi_allgather16,
    .isend16 = sb_mpi_isend16,
    .irecv16 = sb_mpi_irecv16,
    .recv_any16 = sb_mpi_recv_any16,
};

/* A communicator owning MPI communicator h (freed with it, or at once on
 * failure). */
static sb_status wrap(MPI_Comm h, struct sb_comm **out)
{
    *out = NULL;
    struct sb_comm *c = calloc(1, sizeof *c);
    struct mpi_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        MPI_Comm_free(&h);
        return sb_error(SB_ERR_NOMEM, "mpi communicator: out of memory");
    }
    m->comm = h;
    c->ops = &mpi_ops;
    c->impl = m;
    MPI_Comm_rank(h, &c->rank);
    MPI_Comm_size(h, &c->size);
    *out = c;
    return SB_OK;
}

sb_status sb_comm_mpi_create(const void *mpi_comm, struct sb_comm **out)
{
    *out = NULL;
    MPI_Comm h;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_dup(*(const MPI_Comm *)mpi_comm, &h)));
    return wrap(h, out);
}

sb_status sb_comm_mpi_comm(const struct sb_comm *c, void *mpi_comm)
{
    if (c->ops != &mpi_ops)
        return sb_error(SB_ERR_USAGE, "the %s communicator has no MPI communicator of its own",
                        c->ops->name);
    *(MPI_Comm *)mpi_comm = sb_mpi_handle(c);
    return SB_OK;
}

sb_status sb_comm_mpi_group_hosts(struct sb_comm *c, int ranks_per_host)
{
    if (c->ops != &mpi_ops)
        return sb_error(SB_ERR_USAGE, "the %s communicator cannot group its ranks into hosts",
                        c->ops->name);
    struct mpi_impl *m = c->impl;
    if (m->hier) return SB_OK;
    return sb_hier_create(c, ranks_per_host, &m->hier);
}
