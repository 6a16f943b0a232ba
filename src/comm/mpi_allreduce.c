/* Ring and recursive-doubling all-reduce on non-blocking point-to-point
 * messages; see mpi_allreduce.h. */
#include "comm/mpi_allreduce.h"

#include <stdlib.h>
#include <string.h>

#include "comm/message_size.h"
#include "comm/mpi_wait.h"
#include "comm/ring.h"
#include "job/eager_limit.h"
#include "job/job_mpi.h"

/* A step's range is sent in messages of at most this many floats: under
 * the TCP eager limit stratbench sets (job/eager_limit.h), so that both
 * ranks of an exchange stream at once; MPI counts are int too. */
#define PIECE (SB_COLLECTIVE_PIECE_BYTES / sizeof(float))

/* One step: send buf-range to send_peer, receive into recv (scratch or
 * buf) from recv_peer, then, if add, buf-range add_dst += recv. An empty
 * range posts nothing (both sides compute the same sizes). */
struct step {
    const float *send;
    size_t send_n;
    int send_peer;
    float *recv;
    size_t recv_n;
    int recv_peer;
    float *add_dst; /* NULL: received in place, nothing to add */
    const float *add_src; /* what add_dst gains: recv, or (reduce-scatter) this rank's own */
};

/* What a schedule computes. */
enum op_kind { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER };

struct sb_ar_op {
    struct sb_ar_op *next_free;
    struct sb_ar_pool *pool;
    MPI_Comm comm;
    enum op_kind kind;
    enum sb_allreduce_algo algo; /* OP_ALLREDUCE's */
    float *buf;
    size_t n;
    const float *src; /* reduce-scatter: this rank's contribution (n floats) */
    int p, rank, tag;
    int step, n_steps;
    float *scratch; /* received data to add: n/p + 1 floats (ring), n (doubling),
                     * 2 (n/p + 1) (reduce-scatter: two halves, in turn), none
                     * (all-gather: received in place) */
    size_t scratch_cap;
    MPI_Request *req;
    int n_req, cap_req;
    struct step cur;
    /* recursive doubling: p' (largest power of two <= p), rem = p - p',
     * this rank's index among the p' (-1: folded into a partner) */
    int p2, rem, vrank;
};

/* World rank of recursive doubling's virtual rank v (0..p'-1). */
static int real_rank(const struct sb_ar_op *o, int v)
{
    return v < o->rem ? 2 * v + 1 : v + o->rem;
}

/* Fills o->cur with step s of a ring all-gather pass in which this rank
 * starts with chunk `own` complete: it passes chunk own-s (its own at
 * s = 0, else the one received at step s-1) on to rank r+1 and receives
 * chunk own-1-s from rank r-1 in place. */
static void pass_step(struct sb_ar_op *o, int own, int s)
{
    struct step *st = &o->cur;
    int p = o->p;
    size_t off, cnt;
    st->send_peer = sb_ring_mod(o->rank + 1, p);
    st->recv_peer = sb_ring_mod(o->rank - 1, p);
    sb_ring_chunk(o->n, p, sb_ring_mod(own - s, p), &off, &cnt);
    st->send = o->buf + off;
    st->send_n = cnt;
    sb_ring_chunk(o->n, p, sb_ring_mod(own - 1 - s, p), &off, &cnt);
    st->recv = o->buf + off;
    st->recv_n = cnt;
    st->add_dst = NULL;
}

/* Fills o->cur with step s of the ring all-reduce: p-1 reduce-scatter
 * steps, after which rank r holds chunk r+1 reduced, then the all-gather
 * pass of it. */
static void ring_step(struct sb_ar_op *o, int s)
{
    struct step *st = &o->cur;
    int p = o->p, r = o->rank;
    if (s >= p - 1) {
        pass_step(o, r + 1, s - (p - 1));
        return;
    }
    size_t off, cnt;
    st->send_peer = sb_ring_mod(r + 1, p);
    st->recv_peer = sb_ring_mod(r - 1, p);
    sb_ring_chunk(o->n, p, sb_ring_mod(r - s, p), &off, &cnt);
    st->send = o->buf + off;
    st->send_n = cnt;
    sb_ring_chunk(o->n, p, sb_ring_mod(r - s - 1, p), &off, &cnt);
    st->recv = o->scratch;
    st->recv_n = cnt;
    st->add_dst = o->buf + off;
    st->add_src = o->scratch;
}

/* Fills o->cur with step s (0..p-2) of the ring reduce-scatter that ends
 * with chunk r on rank r: step s sends the partial sum of chunk r-1-s (at
 * s = 0 this rank's own values) to rank r+1, receives chunk r-2-s's from
 * rank r-1 into one half of the scratch (the last step: into o->buf, the
 * caller's receive block) and adds this rank's values to it. The half sent
 * at step s was filled at step s-1; the other half receives. */
static void rs_step(struct sb_ar_op *o, int s)
{
    struct step *st = &o->cur;
    int p = o->p, r = o->rank;
    size_t off, cnt, half = o->scratch_cap / 2;
    st->send_peer = sb_ring_mod(r + 1, p);
    st->recv_peer = sb_ring_mod(r - 1, p);
    sb_ring_chunk(o->n, p, sb_ring_mod(r - 1 - s, p), &off, &cnt);
    st->send = s == 0 ? o->src + off : o->scratch + (size_t)((s - 1) % 2) * half;
    st->send_n = cnt;
    sb_ring_chunk(o->n, p, sb_ring_mod(r - 2 - s, p), &off, &cnt);
    st->recv = s == p - 2 ? o->buf : o->scratch + (size_t)(s % 2) * half;
    st->recv_n = cnt;
    st->add_dst = st->recv;
    st->add_src = o->src + off;
}

/* Fills o->cur with step s of recursive doubling: s = 0 the pre-step
 * (ranks below 2 rem: even ones hand their buffer to the odd one above),
 * 1..lg p' the exchanges with virtual partner v ^ 2^(s-1), lg p' + 1 the
 * post-step (odd ones hand the sum back). Empty where this rank sits out. */
static void doubling_step(struct sb_ar_op *o, int s)
{
    struct step *st = &o->cur;
    int r = o->rank;
    st->send_n = st->recv_n = 0;
    st->add_dst = NULL;
    st->add_src = o->scratch;
    int folded = r < 2 * o->rem; /* takes part in the pre/post-step */
    if (s == 0) {
        if (!folded) return;
        if (r % 2 == 0) {
            st->send = o->buf;
            st->send_n = o->n;
            st->send_peer = r + 1;
        } else {
            st->recv = o->scratch;
            st->recv_n = o->n;
            st->recv_peer = r - 1;
            st->add_dst = o->buf;
        }
    } else if (s < o->n_steps - 1) {
        if (o->vrank < 0) return;
        int peer = real_rank(o, o->vrank ^ (1 << (s - 1)));
        st->send = o->buf;
        st->send_n = o->n;
        st->send_peer = peer;
        st->recv = o->scratch;
        st->recv_n = o->n;
        st->recv_peer = peer;
        st->add_dst = o->buf;
    } else {
        if (!folded) return;
        if (r % 2 == 1) {
            st->send = o->buf;
            st->send_n = o->n;
            st->send_peer = r - 1;
        } else {
            st->recv = o->buf;
            st->recv_n = o->n;
            st->recv_peer = r + 1;
        }
    }
}

/* Posts `count` floats at p to/from peer in pieces. */
static sb_status post(struct sb_ar_op *o, float *p, size_t count, int peer, int send)
{
    for (size_t off = 0; off < count; off += PIECE) {
        int k = (int)(count - off < PIECE ? count - off : PIECE);
        MPI_Request *rq = &o->req[o->n_req];
        int rc = send ? MPI_Isend(p + off, k, MPI_FLOAT, peer, o->tag, o->comm, rq)
                      : MPI_Irecv(p + off, k, MPI_FLOAT, peer, o->tag, o->comm, rq);
        SB_TRY(SB_MPI_CHECK_RC(rc, send ? "all-reduce: MPI_Isend" : "all-reduce: MPI_Irecv"));
        if (send) sb_comm_note_message_bytes((size_t)k * sizeof(float));
        o->n_req++;
    }
    return SB_OK;
}

/* Plans and posts step o->step. Receives first, so the matching send finds
 * a posted receive. */
static sb_status post_step(struct sb_ar_op *o)
{
    if (o->kind == OP_REDUCE_SCATTER) rs_step(o, o->step);
    else if (o->kind == OP_ALLGATHER) pass_step(o, o->rank, o->step); /* chunk r is rank r's */
    else if (o->algo == SB_ALLREDUCE_RING) ring_step(o, o->step);
    else doubling_step(o, o->step);
    o->n_req = 0;
    if (o->cur.recv_n) SB_TRY(post(o, o->cur.recv, o->cur.recv_n, o->cur.recv_peer, 0));
    if (o->cur.send_n)
        SB_TRY(post(o, (float *)o->cur.send, o->cur.send_n, o->cur.send_peer, 1));
    return SB_OK;
}

/* The current step's data has arrived: add it where the step says. */
static void finish_step(struct sb_ar_op *o)
{
    const struct step *st = &o->cur;
    if (!st->add_dst || !st->recv_n) return;
    float *restrict dst = st->add_dst;
    const float *restrict src = st->add_src;
    for (size_t i = 0; i < st->recv_n; i++) dst[i] += src[i];
}

static void release(struct sb_ar_op *o)
{
    o->next_free = o->pool->free;
    o->pool->free = o;
}

/* The pooled schedule with the smallest scratch that holds `scratch`
 * floats and whose request array holds `reqs` (so that an all-gather,
 * which needs none, does not take a reduce-scatter's), or a new one. */
static struct sb_ar_op *acquire(struct sb_ar_pool *pool, size_t scratch, int reqs)
{
    struct sb_ar_op **best = NULL;
    for (struct sb_ar_op **pp = &pool->free; *pp; pp = &(*pp)->next_free)
        if ((*pp)->scratch_cap >= scratch && (*pp)->cap_req >= reqs &&
            (!best || (*pp)->scratch_cap < (*best)->scratch_cap))
            best = pp;
    struct sb_ar_op *o;
    if (best) {
        o = *best;
        *best = o->next_free;
        return o;
    }
    o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->scratch = malloc((scratch ? scratch : 1) * sizeof(float));
    o->req = malloc((size_t)(reqs ? reqs : 1) * sizeof *o->req);
    if (!o->scratch || !o->req) {
        free(o->scratch);
        free(o->req);
        free(o);
        return NULL;
    }
    o->scratch_cap = scratch;
    o->cap_req = reqs;
    return o;
}

/* Takes a schedule from the pool and fills what every kind shares. */
static sb_status begin(MPI_Comm comm, size_t n, size_t scratch, size_t longest, int tag,
                       struct sb_ar_pool *pool, struct sb_ar_op **out)
{
    *out = NULL;
    int p = 1, rank = 0;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_size(comm, &p)));
    SB_TRY(SB_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
    if (scratch == 0) scratch = n / (size_t)p + 1;
    if (longest == 0) longest = scratch;
    int reqs = 2 * (int)((longest + PIECE - 1) / PIECE + 1);
    struct sb_ar_op *o = acquire(pool, scratch, reqs);
    if (!o) return sb_error(SB_ERR_NOMEM, "all-reduce of %zu floats: out of memory", n);
    o->pool = pool;
    o->comm = comm;
    o->n = n;
    o->p = p;
    o->rank = rank;
    o->tag = tag;
    o->step = 0;
    o->n_req = 0;
    o->kind = OP_ALLREDUCE;
    o->src = NULL;
    *out = o;
    return SB_OK;
}

/* Posts o's first step, or releases o on an error. */
static sb_status first_step(struct sb_ar_op *o)
{
    if (o->n_steps <= 0) return SB_OK;
    sb_status st = post_step(o);
    if (st) release(o);
    return st;
}

sb_status sb_ar_start(MPI_Comm comm, enum sb_allreduce_algo algo, float *buf, size_t n,
                      int tag, struct sb_ar_pool *pool, struct sb_ar_op **out)
{
    *out = NULL;
    int ring = algo == SB_ALLREDUCE_RING;
    if (!ring && algo != SB_ALLREDUCE_RECURSIVE_DOUBLING)
        return sb_error(SB_ERR_INTERNAL, "all-reduce: algorithm %s has no schedule",
                        sb_allreduce_algo_name(algo));
    struct sb_ar_op *o;
    SB_TRY(begin(comm, n, ring ? 0 : n, ring ? 0 : n, tag, pool, &o));
    o->algo = algo;
    o->buf = buf;
    int p = o->p, rank = o->rank;
    if (ring) {
        o->n_steps = 2 * (p - 1);
    } else {
        int p2 = 1, lg = 0;
        while (2 * p2 <= p) {
            p2 *= 2;
            lg++;
        }
        o->p2 = p2;
        o->rem = p - p2;
        if (rank < 2 * o->rem) o->vrank = rank % 2 ? rank / 2 : -1;
        else o->vrank = rank - o->rem;
        o->n_steps = p > 1 ? lg + 2 : 0;
    }
    if (n == 0 || p == 1) o->n_steps = 0;
    sb_status st = first_step(o);
    *out = st ? NULL : o;
    return st;
}

sb_status sb_rs_start(MPI_Comm comm, const float *send, float *recv, size_t n, int tag,
                      struct sb_ar_pool *pool, struct sb_ar_op **out)
{
    *out = NULL;
    int p = 1;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_size(comm, &p)));
    struct sb_ar_op *o;
    SB_TRY(begin(comm, n, 2 * (n / (size_t)p + 1), 0, tag, pool, &o));
    o->kind = OP_REDUCE_SCATTER;
    o->buf = recv;
    o->src = send;
    o->n_steps = n == 0 || p == 1 ? 0 : p - 1;
    if (p == 1 && n) memcpy(recv, send, n * sizeof(float));
    sb_status st = first_step(o);
    *out = st ? NULL : o;
    return st;
}

sb_status sb_ag_start(MPI_Comm comm, const float *send, float *recv, size_t n, int tag,
                      struct sb_ar_pool *pool, struct sb_ar_op **out)
{
    *out = NULL;
    struct sb_ar_op *o; /* no scratch: every step receives in place */
    SB_TRY(begin(comm, n, 1, n, tag, pool, &o));
    o->kind = OP_ALLGATHER;
    o->buf = recv;
    o->n_steps = n == 0 || o->p == 1 ? 0 : o->p - 1;
    size_t off, cnt;
    sb_ring_chunk(n, o->p, o->rank, &off, &cnt);
    if (cnt && send != recv + off) memmove(recv + off, send, cnt * sizeof(float));
    sb_status st = first_step(o);
    *out = st ? NULL : o;
    return st;
}

sb_status sb_ar_progress(struct sb_ar_op *o, int block, int *done)
{
    *done = 0;
    while (o->step < o->n_steps) {
        if (o->n_req > 0) {
            int flag = 1;
            /* On an error the op is abandoned, not pooled: its requests
             * may still be pending (the job ends anyway). Blocking waits
             * carry the watchdog's deadline (comm/mpi_wait.h). */
            if (block)
                SB_TRY(sb_mpi_wait(o->req, o->n_req, MPI_STATUSES_IGNORE, "all-reduce step"));
            else
                SB_TRY(SB_MPI_CHECK(MPI_Testall(o->n_req, o->req, &flag, MPI_STATUSES_IGNORE)));
            if (!flag) return SB_OK;
        }
        finish_step(o);
        o->step++;
        o->n_req = 0;
        if (o->step < o->n_steps) SB_TRY(post_step(o));
    }
    release(o);
    *done = 1;
    return SB_OK;
}

void *sb_ar_pool_take(struct sb_ar_pool *pool, size_t bytes, struct sb_ar_op **holder)
{
    struct sb_ar_op *o = acquire(pool, (bytes + sizeof(float) - 1) / sizeof(float), 0);
    *holder = o;
    if (!o) return NULL;
    o->pool = pool;
    return o->scratch;
}

void sb_ar_pool_put(struct sb_ar_op *holder)
{
    if (holder) release(holder);
}

void sb_ar_pool_free(struct sb_ar_pool *pool)
{
    while (pool->free) {
        struct sb_ar_op *o = pool->free;
        pool->free = o->next_free;
        free(o->scratch);
        free(o->req);
        free(o);
    }
}
