/* All-reduces over a 16-bit wire with fp32 accumulation, flat (ring) and
 * hierarchical; see mpi_allreduce16.h. */
#include "comm/mpi_allreduce16.h"

#include <limits.h>
#include <stdint.h>

#include "comm/message_size.h"
#include "comm/mpi_wait.h"
#include "comm/ring.h"
#include "core/clock.h"
#include "job/eager_limit.h"
#include "job/job_mpi.h"

/* The largest message the exchange sends, in 16-bit words: the pieces of
 * the fp32 collectives (SB_COLLECTIVE_PIECE_BYTES, which the TCP eager
 * limit stratbench sets covers), so that both directions of a pair's
 * exchange stream at once (job/eager_limit.h). */
#define PIECE16 (SB_COLLECTIVE_PIECE_BYTES / sizeof(uint16_t))
/* every count handed to MPI is one piece's, so a block of any size fits */
_Static_assert(SB_COLLECTIVE_PIECE_BYTES / sizeof(uint16_t) <= INT_MAX,
               "a piece's count must fit MPI's int");

/* Pieces posted at once each way (requests on the stack: 2 x this). */
#define WINDOW 16

/* Pieces of a message of len words: ceil(len / PIECE16), and one (empty)
 * for len 0, so that an empty exchange still pairs as before. */
static size_t pieces(size_t len)
{
    return len ? (len + PIECE16 - 1) / PIECE16 : 1;
}

/* Sends send_len words from `send` to `to` and receives recv_len words
 * into `recv` from `from`, both on `tag`, in pieces of at most PIECE16
 * words (both sides cut a length alike, and MPI matches the messages of
 * one tag between two ranks in order), WINDOW pieces each way at a time,
 * and waits for all. A failed post returns its error with the earlier
 * pieces in flight: the job ends (a rank's error ends every rank). */
static sb_status exchange(MPI_Comm comm, const uint16_t *send, size_t send_len, int to,
                          uint16_t *recv, size_t recv_len, int from, int tag)
{
    size_t np_s = pieces(send_len), np_r = pieces(recv_len), ks = 0, kr = 0;
    while (ks < np_s || kr < np_r) {
        MPI_Request r[2 * WINDOW];
        int n = 0;
        for (int w = 0; w < WINDOW && kr < np_r; w++, kr++) {
            size_t off = kr * PIECE16, len = recv_len - off < PIECE16 ? recv_len - off : PIECE16;
            SB_TRY(SB_MPI_CHECK(
                MPI_Irecv(recv + off, (int)len, MPI_UINT16_T, from, tag, comm, &r[n++])));
        }
        for (int w = 0; w < WINDOW && ks < np_s; w++, ks++) {
            size_t off = ks * PIECE16, len = send_len - off < PIECE16 ? send_len - off : PIECE16;
            SB_TRY(SB_MPI_CHECK(
                MPI_Isend(send + off, (int)len, MPI_UINT16_T, to, tag, comm, &r[n++])));
            sb_comm_note_message_bytes(len * sizeof(uint16_t));
        }
        SB_TRY(sb_mpi_wait(r, n, MPI_STATUSES_IGNORE, "16-bit ring all-reduce"));
    }
    return SB_OK;
}

/* One ring over comm (p ranks, this one r) of buf's n floats cut into p
 * chunks (sb_ring_chunk), with its scratch from the pool (held by
 * `scratch`): the 16-bit image of buf (n words) and, after it, one
 * received chunk (n/p + 1 words). */
struct ring {
    MPI_Comm comm;
    int p, r, tag;
    enum sb_half_format fmt;
    float *buf;
    size_t n;
    uint16_t *wire, *in;
    struct sb_ar_op *scratch;
    double convert_s; /* seconds converting */
};

static sb_status ring_open(struct ring *g, MPI_Comm comm, struct sb_ar_pool *pool,
                           enum sb_half_format fmt, float *buf, size_t n, int tag)
{
    *g = (struct ring){.comm = comm, .tag = tag, .fmt = fmt, .buf = buf, .n = n};
    SB_TRY(SB_MPI_CHECK(MPI_Comm_size(comm, &g->p)));
    SB_TRY(SB_MPI_CHECK(MPI_Comm_rank(comm, &g->r)));
    size_t biggest = n / (size_t)g->p + 1;
    g->wire = sb_ar_pool_take(pool, (n + biggest) * sizeof *g->wire, &g->scratch);
    if (!g->wire) return sb_error(SB_ERR_NOMEM, "16-bit all-reduce: out of memory");
    g->in = g->wire + n;
    return SB_OK;
}

static void ring_close(struct ring *g, double *convert_s)
{
    if (convert_s) *convert_s += g->convert_s;
    sb_ar_pool_put(g->scratch);
}

/* The ring's reduce-scatter: step s sends chunk (r-s) mod p to rank r+1
 * rounded to 16 bits and adds chunk (r-s-1) mod p from rank r-1 into buf
 * in fp32. Afterwards chunk (r+1) mod p of buf holds the fp32 sum. */
static sb_status ring_reduce_scatter(struct ring *g)
{
    int next = sb_ring_mod(g->r + 1, g->p), prev = sb_ring_mod(g->r - 1, g->p);
    sb_status st = SB_OK;
    for (int s = 0; s < g->p - 1 && !st; s++) {
        size_t so, sl, ro, rl;
        sb_ring_chunk(g->n, g->p, sb_ring_mod(g->r - s, g->p), &so, &sl);
        sb_ring_chunk(g->n, g->p, sb_ring_mod(g->r - s - 1, g->p), &ro, &rl);
        double t0 = sb_now_s();
        sb_half_encode(g->fmt, g->buf + so, g->wire + so, sl);
        g->convert_s += sb_now_s() - t0;
        st = exchange(g->comm, g->wire + so, sl, next, g->in, rl, prev, g->tag);
        t0 = sb_now_s();
        if (!st) sb_half_accumulate(g->fmt, g->buf + ro, g->in, rl);
        g->convert_s += sb_now_s() - t0;
    }
    return st;
}

/* The ring's all-gather: the owner of chunk (r+1) mod p rounds it once;
 * the 16-bit words pass round the ring, and every rank decodes the same
 * words into buf. */
static sb_status ring_allgather(struct ring *g)
{
    int next = sb_ring_mod(g->r + 1, g->p), prev = sb_ring_mod(g->r - 1, g->p);
    size_t oo, ol;
    sb_ring_chunk(g->n, g->p, sb_ring_mod(g->r + 1, g->p), &oo, &ol);
    double t0 = sb_now_s();
    sb_half_encode(g->fmt, g->buf + oo, g->wire + oo, ol);
    g->convert_s += sb_now_s() - t0;
    sb_status st = SB_OK;
    for (int s = 0; s < g->p - 1 && !st; s++) {
        size_t so, sl, ro, rl;
        sb_ring_chunk(g->n, g->p, sb_ring_mod(g->r + 1 - s, g->p), &so, &sl);
        sb_ring_chunk(g->n, g->p, sb_ring_mod(g->r - s, g->p), &ro, &rl);
        st = exchange(g->comm, g->wire + so, sl, next, g->wire + ro, rl, prev, g->tag);
    }
    t0 = sb_now_s();
    if (!st) sb_half_decode(g->fmt, g->wire, g->buf, g->n);
    g->convert_s += sb_now_s() - t0;
    return st;
}

sb_status sb_ar16_ring(MPI_Comm comm, struct sb_ar_pool *pool, enum sb_half_format fmt,
                       float *buf, size_t n, int tag, double *convert_s)
{
    int p;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_size(comm, &p)));
    if (p == 1 || n == 0) {
        double t0 = sb_now_s();
        sb_half_round(fmt, buf, n); /* the wire's rounding, as with several ranks */
        if (convert_s) *convert_s += sb_now_s() - t0;
        return SB_OK;
    }
    struct ring g;
    sb_status st = ring_open(&g, comm, pool, fmt, buf, n, tag);
    if (!st) st = ring_reduce_scatter(&g);
    if (!st) st = ring_allgather(&g);
    ring_close(&g, convert_s);
    return st;
}

/* Adds one call of `bytes` and the seconds since t0 to a stage counter. */
static void count_stage(struct sb_comm_stage *s, double bytes, double t0)
{
    s->counter.calls++;
    s->counter.bytes += bytes;
    s->counter.seconds += sb_now_s() - t0;
}

sb_status sb_ar16_hier(MPI_Comm local, int local_tag, MPI_Comm cross, int cross_tag,
                       struct sb_ar_pool *pool, enum sb_half_format fmt, float *buf, size_t n,
                       struct sb_comm_stage *stages, double *convert_s)
{
    struct ring g;
    sb_status st = ring_open(&g, local, pool, fmt, buf, n, local_tag);
    size_t oo = 0, ol = n; /* the chunk this rank carries across hosts */
    if (!st) sb_ring_chunk(n, g.p, sb_ring_mod(g.r + 1, g.p), &oo, &ol);
    double t0 = sb_now_s();
    if (!st && g.p > 1) st = ring_reduce_scatter(&g);
    if (!st) count_stage(&stages[0], (double)n * sizeof(uint16_t), t0);
    t0 = sb_now_s();
    if (!st) st = sb_ar16_ring(cross, pool, fmt, buf + oo, ol, cross_tag, &g.convert_s);
    if (!st) count_stage(&stages[1], (double)ol * sizeof(uint16_t), t0);
    t0 = sb_now_s();
    if (!st && g.p > 1) st = ring_allgather(&g); /* the chunk is 16-bit exact: no new rounding */
    if (!st) count_stage(&stages[2], (double)n * sizeof(uint16_t), t0);
    ring_close(&g, convert_s);
    return st;
}

/* Offset of block k (0 <= k < p) of `counts`. */
static size_t block_off(const size_t *counts, int k)
{
    size_t off = 0;
    for (int i = 0; i < k; i++) off += counts[i];
    return off;
}

/* Ring reduce-scatter's step s (0 < s < p) over ranks of one exchange:
 * sends `acc` (the running sum of block b_send, rounded to 16 bits into
 * `out`), receives block b_recv's partial sum into `in`, and leaves
 * send's block b_recv plus the received words in acc (fp32). */
static sb_status rs_step(struct ring *g, const float *send, const size_t *counts, float *acc,
                         int b_send, int b_recv, uint16_t *out)
{
    size_t sl = counts[b_send], rl = counts[b_recv], ro = block_off(counts, b_recv);
    double t0 = sb_now_s();
    sb_half_encode(g->fmt, acc, out, sl);
    g->convert_s += sb_now_s() - t0;
    SB_TRY(exchange(g->comm, out, sl, sb_ring_mod(g->r + 1, g->p), g->in, rl,
                    sb_ring_mod(g->r - 1, g->p), g->tag));
    t0 = sb_now_s();
    for (size_t i = 0; i < rl; i++) acc[i] = send[ro + i];
    sb_half_accumulate(g->fmt, acc, g->in, rl);
    g->convert_s += sb_now_s() - t0;
    return SB_OK;
}

sb_status sb_rs16_ring(MPI_Comm comm, struct sb_ar_pool *pool, enum sb_half_format fmt,
                       const float *send, float *recv, const size_t *counts, int tag,
                       double *convert_s)
{
    int p, r;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_size(comm, &p)));
    SB_TRY(SB_MPI_CHECK(MPI_Comm_rank(comm, &r)));
    size_t biggest = 1;
    for (int i = 0; i < p; i++)
        if (counts[i] > biggest) biggest = counts[i];
    double t0 = sb_now_s();
    if (p == 1) {
        for (size_t i = 0; i < counts[0]; i++) recv[i] = send[i];
        sb_half_round(fmt, recv, counts[0]);
        if (convert_s) *convert_s += sb_now_s() - t0;
        return SB_OK;
    }
    struct ring g = {.comm = comm, .p = p, .r = r, .tag = tag, .fmt = fmt};
    /* (biggest floats) the running sum of one block, then (biggest words
     * each) its 16-bit image and the block received */
    float *acc = sb_ar_pool_take(pool, biggest * (sizeof *acc + 2 * sizeof *g.in), &g.scratch);
    if (!acc) return sb_error(SB_ERR_NOMEM, "16-bit reduce-scatter: out of memory");
    uint16_t *out = (uint16_t *)(acc + biggest);
    g.in = out + biggest;
    sb_status st = SB_OK;
    /* Step s sends block (r-s-1) mod p and receives block (r-s-2) mod p, so
     * that rank r ends with block r (the blocks of MPI_Reduce_scatter). */
    int first = sb_ring_mod(r - 1, p);
    size_t fo = block_off(counts, first);
    for (size_t i = 0; !st && i < counts[first]; i++) acc[i] = send[fo + i];
    for (int s = 0; s < p - 1 && !st; s++)
        st = rs_step(&g, send, counts, acc, sb_ring_mod(r - s - 1, p), sb_ring_mod(r - s - 2, p),
                     out);
    for (size_t i = 0; !st && i < counts[r]; i++) recv[i] = acc[i];
    ring_close(&g, convert_s);
    return st;
}
