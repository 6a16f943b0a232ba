/* Link probe by ping-pong and exchange; see probe.h. */
#include "job/probe.h"


#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "job/eager_limit.h"
#include "job/job_mpi.h"

#define ALPHA_TRIPS 20
#define SIZE_SMALL (256 * 1024)
#define SIZE_LARGE (1024 * 1024)
#define BW_TRIES 3
/* The sized ladder (probe.h): 16 KiB x 4^k up to 16 MiB; it climbs to the
 * next rung only while that rung's round trip, 4 times the last one's,
 * would stay within SIZED_BUDGET_S. */
#define SIZED_FIRST (16 * 1024)
#define SIZED_LARGEST (16 * 1024 * 1024)
#define SIZED_BUDGET_S 0.04
#define GAMMA_FLOATS (1024 * 1024)
#define GAMMA_TRIES 3
/* slots of one sized link in the broadcast: n, then bytes, α, B per class,
 * then the same of its exchange classes */
#define SIZED_SLOTS (2 * (1 + 3 * SB_LINK_MAX_SIZES))
/* the exchanges at each rung (probe.h): after one unmeasured round, as
 * many runs as the rung's round trips (BW_TRIES, 2 above 1 MiB), each of
 * SWAP_ROUNDS rounds back to back; the best run's seconds a round */
#define SWAP_ROUNDS 2

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Rank 0's side with `peer`, or the peer's side with rank 0 (me != 0):
 * sends `bytes` from buf and waits for a 1-byte reply (or the reverse).
 * Returns the round-trip seconds on rank 0. */
static sb_status exchange(MPI_Comm comm, int me, int peer, char *buf, int bytes, double *rtt)
{
    char ack = 0;
    double t0 = sb_now_s();
    if (me == 0) {
        SB_TRY(SB_MPI_CHECK(MPI_Send(buf, bytes, MPI_CHAR, peer, 1, comm)));
        SB_TRY(SB_MPI_CHECK(MPI_Recv(&ack, 1, MPI_CHAR, peer, 2, comm, MPI_STATUS_IGNORE)));
    } else {
        SB_TRY(SB_MPI_CHECK(MPI_Recv(buf, bytes, MPI_CHAR, 0, 1, comm, MPI_STATUS_IGNORE)));
        SB_TRY(SB_MPI_CHECK(MPI_Send(&ack, 1, MPI_CHAR, 0, 2, comm)));
    }
    *rtt = sb_now_s() - t0;
    return SB_OK;
}

/* The fixed sequence of exchanges both sides of one link run; on rank 0
 * it yields the link's α and B. */
static sb_status probe_pair(MPI_Comm comm, int me, int peer, char *buf, double *alpha_s,
                            double *bandwidth_Bps)
{
    double rtt = 0.0, trips[ALPHA_TRIPS];
    for (int i = 0; i < 2; i++) SB_TRY(exchange(comm, me, peer, buf, 1, &rtt));
    SB_TRY(exchange(comm, me, peer, buf, SIZE_LARGE, &rtt)); /* warm the large path */
    for (int i = 0; i < ALPHA_TRIPS; i++) SB_TRY(exchange(comm, me, peer, buf, 1, &trips[i]));
    double best[2] = {1e30, 1e30};
    const int sizes[2] = {SIZE_SMALL, SIZE_LARGE};
    for (int t = 0; t < BW_TRIES; t++)
        for (int s = 0; s < 2; s++) {
            SB_TRY(exchange(comm, me, peer, buf, sizes[s], &rtt));
            if (rtt < best[s]) best[s] = rtt;
        }
    qsort(trips, ALPHA_TRIPS, sizeof trips[0], cmp_double);
    *alpha_s = 0.5 * trips[ALPHA_TRIPS / 2];
    double dt = best[1] - best[0];
    /* A slope lost in noise (dt <= 0): fall back to the large send alone. */
    *bandwidth_Bps = dt > 0 ? (SIZE_LARGE - SIZE_SMALL) / dt : SIZE_LARGE / best[1];
    return SB_OK;
}

/* The best round trip of `tries` sends of `bytes` (both sides run it). */
static sb_status best_rtt(MPI_Comm comm, int me, int peer, char *buf, int bytes, int tries,
                          double *best)
{
    *best = 1e30;
    for (int t = 0; t < tries; t++) {
        double rtt = 0.0;
        SB_TRY(exchange(comm, me, peer, buf, bytes, &rtt));
        if (rtt < *best) *best = rtt;
    }
    return SB_OK;
}

/* Both sides send `bytes` to each other at once: one round posts every
 * piece of at most SB_COLLECTIVE_PIECE_BYTES to be received into rbuf and
 * sent from buf, as the rings cut their messages (comm/mpi_allreduce.c;
 * a whole message above the TCP eager limit would go by rendezvous, whose
 * two directions take turns: job/eager_limit.h), and waits for all. One
 * unmeasured round (it absorbs the two sides' different start), then
 * `tries` runs of SWAP_ROUNDS rounds, each round's receives done before
 * the next round's sends start, as a ring's steps go. *best: the best
 * run's seconds per round. A failed post returns its error with the
 * round's earlier pieces in flight: the probe's error ends the job on
 * every rank (sb_probe_links' callers), as a comm error does. */
static sb_status best_swap(MPI_Comm comm, int peer, char *buf, char *rbuf, int bytes, int tries,
                           double *best)
{
    enum { MAX_PIECES = SIZED_LARGEST / SB_COLLECTIVE_PIECE_BYTES };
    const int piece = (int)SB_COLLECTIVE_PIECE_BYTES;
    MPI_Request req[2 * MAX_PIECES];
    *best = 1e30;
    for (int t = 0; t <= tries; t++) {
        double t0 = sb_now_s();
        for (int i = 0; i < (t ? SWAP_ROUNDS : 1); i++) {
            int n = 0;
            for (int off = 0; off < bytes; off += piece)
                SB_TRY(SB_MPI_CHECK(MPI_Irecv(rbuf + off, bytes - off < piece ? bytes - off : piece,
                                              MPI_CHAR, peer, 4, comm, &req[n++])));
            for (int off = 0; off < bytes; off += piece)
                SB_TRY(SB_MPI_CHECK(MPI_Isend(buf + off, bytes - off < piece ? bytes - off : piece,
                                              MPI_CHAR, peer, 4, comm, &req[n++])));
            SB_TRY(SB_MPI_CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE)));
        }
        double dt = (sb_now_s() - t0) / SWAP_ROUNDS;
        if (t > 0 && dt < *best) *best = dt;
    }
    return SB_OK;
}

/* The sized ladder with one peer (probe.h): rank 0 tells the peer each
 * next size (0: done) so that both stop at the same rung. On rank 0, into
 * out the classes sb_link_fit_sized fits through the rungs (core/link.h),
 * T the round trip less the acknowledgement's α, and the exchange classes
 * sb_link_fit_exchange fits through the same rungs timed as exchanges
 * (rbuf: the exchanges' receive buffer, SIZED_LARGEST bytes). */
static sb_status probe_sized(MPI_Comm comm, int me, int peer, char *buf, char *rbuf,
                             double alpha_s, struct sb_link *out)
{
    double m[SB_LINK_MAX_SIZES + 1], t[SB_LINK_MAX_SIZES + 1], x[SB_LINK_MAX_SIZES + 1];
    int n = 0, next = SIZED_FIRST;
    for (;;) {
        int size = 0;
        if (me == 0) {
            size = (n > 0 && 4.0 * t[n - 1] > SIZED_BUDGET_S) || n > SB_LINK_MAX_SIZES ? 0 : next;
            SB_TRY(SB_MPI_CHECK(MPI_Send(&size, 1, MPI_INT, peer, 3, comm)));
        } else {
            SB_TRY(SB_MPI_CHECK(MPI_Recv(&size, 1, MPI_INT, 0, 3, comm, MPI_STATUS_IGNORE)));
        }
        if (size <= 0) break;
        double best = 0.0;
        int tries = size > SIZE_LARGE ? 2 : BW_TRIES;
        SB_TRY(best_rtt(comm, me, peer, buf, size, tries, &best));
        SB_TRY(best_swap(comm, me == 0 ? peer : 0, buf, rbuf, size, tries, &x[n]));
        m[n] = size;
        t[n++] = best - alpha_s > 0 ? best - alpha_s : best;
        next = size < SIZED_LARGEST ? 4 * size : 0;
        if (!next) break; /* both sides know: the top rung */
    }
    memset(out, 0, sizeof *out);
    sb_link_fit_sized(m, t, n, out);
    sb_link_fit_exchange(m, x, n, out);
    return SB_OK;
}

/* γ of this machine (probe.h): the best of GAMMA_TRIES passes of the
 * comm's reduction loop (src/comm/mpi_allreduce.c, finish_step:
 * dst[i] += src[i] over floats) over GAMMA_FLOATS floats, per byte of dst.
 * 0 when out of memory. */
static double probe_gamma(void)
{
    float *dst = calloc(2 * (size_t)GAMMA_FLOATS, sizeof(float));
    if (!dst) return 0.0;
    float *restrict d = dst;
    const float *restrict src = dst + GAMMA_FLOATS;
    for (size_t i = 0; i < GAMMA_FLOATS; i++) dst[GAMMA_FLOATS + i] = 1e-3f * (float)(i & 1023);
    double best = 1e30;
    for (int t = 0; t <= GAMMA_TRIES; t++) { /* the first pass warms the pages */
        double t0 = sb_now_s();
        for (size_t i = 0; i < GAMMA_FLOATS; i++) d[i] += src[i];
        double dt = sb_now_s() - t0;
        if (t > 0 && dt < best) best = dt;
    }
    volatile float sink = d[GAMMA_FLOATS - 1];
    (void)sink;
    free(dst);
    return best / (GAMMA_FLOATS * sizeof(float));
}

/* Packs a sized link's classes, then its exchange classes, into
 * SIZED_SLOTS doubles, or back. */
static void pack_sized(const struct sb_link *l, double *slot)
{
    double *x = slot + SIZED_SLOTS / 2;
    slot[0] = l->n_sizes;
    x[0] = l->n_exchange_sizes;
    for (int k = 0; k < SB_LINK_MAX_SIZES; k++) {
        slot[1 + 3 * k] = l->size_bytes[k];
        slot[2 + 3 * k] = l->size_alpha_s[k];
        slot[3 + 3 * k] = l->size_bandwidth_Bps[k];
        x[1 + 3 * k] = l->exchange_bytes[k];
        x[2 + 3 * k] = l->exchange_alpha_s[k];
        x[3 + 3 * k] = l->exchange_bandwidth_Bps[k];
    }
}

static void unpack_sized(const double *slot, struct sb_link *l)
{
    const double *x = slot + SIZED_SLOTS / 2;
    l->n_sizes = (int)slot[0];
    l->n_exchange_sizes = (int)x[0];
    for (int k = 0; k < SB_LINK_MAX_SIZES; k++) {
        l->size_bytes[k] = slot[1 + 3 * k];
        l->size_alpha_s[k] = slot[2 + 3 * k];
        l->size_bandwidth_Bps[k] = slot[3 + 3 * k];
        l->exchange_bytes[k] = x[1 + 3 * k];
        l->exchange_alpha_s[k] = x[2 + 3 * k];
        l->exchange_bandwidth_Bps[k] = x[3 + 3 * k];
    }
}

/* Whether rank q is probed as a cross-host peer: the lowest rank of a
 * host other than rank 0's, or rank 1 when every rank shares rank 0's
 * host (all_local). */
static int probed_peer(const char *hosts, int len, int q, int all_local)
{
    const char *hq = hosts + (size_t)q * len;
    if (all_local) return q == 1;
    if (strcmp(hq, hosts) == 0) return 0;
    for (int r = 1; r < q; r++)
        if (strcmp(hosts + (size_t)r * len, hq) == 0) return 0;
    return 1;
}

/* Probes every peer in turn, then, on a job spanning hosts, the lowest
 * other rank of rank 0's host (the within-host link). */
static sb_status probe_all(MPI_Comm comm, int rank, int size, const char *hosts, int len,
                           struct sb_link_probe *out)
{
    char *buf = malloc(2 * (size_t)SIZED_LARGEST), *rbuf;
    if (!buf) return sb_error(SB_ERR_NOMEM, "link probe: out of memory");
    rbuf = buf + SIZED_LARGEST;
    memset(buf, 1, 2 * (size_t)SIZED_LARGEST); /* its pages mapped before any send is timed */
    sb_status st = SB_OK;
    double t0 = sb_now_s();
    /* alpha, bandwidth, peers, cross, s, intra done, intra alpha, intra B, γ, sized s,
     * then the sized inter link and the sized intra link */
    enum { FIXED = 10, N_RES = FIXED + 2 * SIZED_SLOTS };
    double res[N_RES] = {0.0, 1e300};
    struct sb_link sized = {0}, sized_intra = {0};
    int all_local = 1, local_peer = -1;
    for (int r = 1; r < size; r++) {
        int same = strcmp(hosts + (size_t)r * len, hosts) == 0;
        if (!same) all_local = 0;
        if (same && local_peer < 0) local_peer = r;
    }
    double sized_s = 0.0;
    for (int q = 1; q < size && !st; q++) {
        if (!probed_peer(hosts, len, q, all_local)) continue;
        if (rank != 0 && rank != q) continue;
        double a = 0.0, b = 0.0;
        struct sb_link l = {0};
        st = probe_pair(comm, rank == 0 ? 0 : q, q, buf, &a, &b);
        double ts = sb_now_s();
        if (!st) st = probe_sized(comm, rank == 0 ? 0 : q, q, buf, rbuf, a, &l);
        sized_s += sb_now_s() - ts;
        if (!st && rank == 0) {
            if (a > res[0]) res[0] = a;
            if (b < res[1]) res[1] = b, sized = l;
            res[2] += 1;
            res[3] = all_local ? 0 : 1;
            if (all_local) res[5] = 1, res[6] = a, res[7] = b, sized_intra = l;
        }
    }
    if (!st && !all_local && local_peer > 0 && (rank == 0 || rank == local_peer)) {
        double a = 0.0, b = 0.0;
        struct sb_link l = {0};
        st = probe_pair(comm, rank == 0 ? 0 : local_peer, local_peer, buf, &a, &b);
        double ts = sb_now_s();
        if (!st) st = probe_sized(comm, rank == 0 ? 0 : local_peer, local_peer, buf, rbuf, a, &l);
        sized_s += sb_now_s() - ts;
        if (!st && rank == 0) res[5] = 1, res[6] = a, res[7] = b, sized_intra = l;
    }
    free(buf);
    if (rank == 0) {
        double tg = sb_now_s();
        res[8] = probe_gamma();
        sized_s += sb_now_s() - tg;
    }
    res[9] = sized_s;
    pack_sized(&sized, res + FIXED);
    pack_sized(&sized_intra, res + FIXED + SIZED_SLOTS);
    res[4] = sb_now_s() - t0;
    if (!st) st = SB_MPI_CHECK(MPI_Bcast(res, N_RES, MPI_DOUBLE, 0, comm));
    if (st) return st;
    out->done = res[2] > 0;
    out->alpha_s = res[0];
    out->bandwidth_Bps = out->done ? res[1] : 0.0;
    out->peers = (int)res[2];
    out->cross_host = (int)res[3];
    out->seconds = res[4];
    out->intra_done = res[5] > 0;
    out->intra_alpha_s = res[6];
    out->intra_bandwidth_Bps = res[7];
    out->gamma_s_per_byte = res[8];
    out->sized_seconds = res[9];
    unpack_sized(res + FIXED, &out->sized);
    unpack_sized(res + FIXED + SIZED_SLOTS, &out->intra_sized);
    return SB_OK;
}

sb_status sb_probe_links(const struct sb_job *job, struct sb_link_probe *out)
{
    memset(out, 0, sizeof *out);
    int size = job->size, rank = 0;
    if (!job->mpi || size < 2) return SB_OK;
    MPI_Comm world = sb_job_comm(job), comm;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_dup(world, &comm)));
    MPI_Comm_rank(comm, &rank);
    int len = MPI_MAX_PROCESSOR_NAME, n = 0;
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    MPI_Get_processor_name(name, &n);
    char *hosts = calloc((size_t)size, (size_t)len);
    sb_status st = hosts ? SB_OK : sb_error(SB_ERR_NOMEM, "link probe: out of memory");
    if (!st)
        st = SB_MPI_CHECK(MPI_Allgather(name, len, MPI_CHAR, hosts, len, MPI_CHAR, comm));
    if (!st) st = probe_all(comm, rank, size, hosts, len, out);
    free(hosts);
    MPI_Comm_free(&comm);
    return st;
}
