/* Ring all-reduce over a 16-bit wire with fp32 accumulation; see
 * mpi_allreduce16.h. */
#include "comm/mpi_allreduce16.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "comm/mpi_wait.h"
#include "core/clock.h"
#include "job/job_mpi.h"

/* Chunk c of n floats over p ranks: [*off, *off + *len). */
static void chunk(size_t n, int p, int c, size_t *off, size_t *len)
{
    size_t q = n / (size_t)p, extra = n % (size_t)p, uc = (size_t)c;
    *len = q + (uc < extra ? 1 : 0);
    *off = uc * q + (uc < extra ? uc : extra);
}

static int mod(int a, int p) { return ((a % p) + p) % p; }

/* Sends send_len words from `send` to `to` and receives recv_len words
 * into `recv` from `from`, both on `tag`, and waits for both. */
static sb_status exchange(MPI_Comm comm, const uint16_t *send, size_t send_len, int to,
                          uint16_t *recv, size_t recv_len, int from, int tag)
{
    MPI_Request r[2];
    SB_TRY(SB_MPI_CHECK(MPI_Irecv(recv, (int)recv_len, MPI_UINT16_T, from, tag, comm, &r[0])));
    sb_status st = SB_MPI_CHECK(MPI_Isend(send, (int)send_len, MPI_UINT16_T, to, tag, comm, &r[1]));
    if (st) {
        MPI_Cancel(&r[0]);
        MPI_Request_free(&r[0]);
        return st;
    }
    return sb_mpi_wait(r, 2, MPI_STATUSES_IGNORE, "16-bit ring all-reduce");
}

sb_status sb_ar16_ring(MPI_Comm comm, enum sb_half_format fmt, float *buf, size_t n, int tag,
                       double *convert_s)
{
    int p, r;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &r);
    double t0 = sb_now_s(), convert = 0.0;
    if (p == 1 || n == 0) {
        sb_half_round(fmt, buf, n); /* the wire's rounding, as with several ranks */
        if (convert_s) *convert_s += sb_now_s() - t0;
        return SB_OK;
    }
    size_t biggest = n / (size_t)p + 1;
    if (biggest > (size_t)INT_MAX)
        return sb_error(SB_ERR_USAGE, "16-bit all-reduce: %zu floats per rank is too many", biggest);
    uint16_t *wire = malloc(n * sizeof *wire);          /* (n) the 16-bit image of buf */
    uint16_t *in = malloc(biggest * sizeof *in);        /* (n/p + 1) one received chunk */
    if (!wire || !in) {
        free(wire);
        free(in);
        return sb_error(SB_ERR_NOMEM, "16-bit all-reduce: out of memory");
    }
    int next = mod(r + 1, p), prev = mod(r - 1, p);
    sb_status st = SB_OK;
    /* Reduce-scatter: the partial sum of a chunk travels rounded to 16 bits
     * and is added to the local fp32 values in fp32. */
    for (int s = 0; s < p - 1 && !st; s++) {
        size_t so, sl, ro, rl;
        chunk(n, p, mod(r - s, p), &so, &sl);
        chunk(n, p, mod(r - s - 1, p), &ro, &rl);
        t0 = sb_now_s();
        sb_half_encode(fmt, buf + so, wire + so, sl);
        convert += sb_now_s() - t0;
        st = exchange(comm, wire + so, sl, next, in, rl, prev, tag);
        t0 = sb_now_s();
        if (!st) sb_half_accumulate(fmt, buf + ro, in, rl);
        convert += sb_now_s() - t0;
    }
    /* All-gather: the owner rounds its reduced chunk once; the 16-bit words
     * pass round the ring, and every rank decodes the same words. */
    size_t oo, ol;
    chunk(n, p, mod(r + 1, p), &oo, &ol);
    t0 = sb_now_s();
    if (!st) sb_half_encode(fmt, buf + oo, wire + oo, ol);
    convert += sb_now_s() - t0;
    for (int s = 0; s < p - 1 && !st; s++) {
        size_t so, sl, ro, rl;
        chunk(n, p, mod(r + 1 - s, p), &so, &sl);
        chunk(n, p, mod(r - s, p), &ro, &rl);
        st = exchange(comm, wire + so, sl, next, wire + ro, rl, prev, tag);
    }
    t0 = sb_now_s();
    if (!st) sb_half_decode(fmt, wire, buf, n);
    convert += sb_now_s() - t0;
    if (convert_s) *convert_s += convert;
    free(wire);
    free(in);
    return st;
}
