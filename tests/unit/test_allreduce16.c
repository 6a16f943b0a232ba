/* Tests the 16-bit wire formats (src/core/half.c) and the 16-bit ring
 * all-reduce with fp32 accumulation (src/comm/mpi_allreduce16.c) through
 * the "mpi" communicator.
 *
 * In the parent process: fp16 and bf16 round to nearest even (ties,
 * subnormals, overflow, every fp16 pattern round-trips), and fp32
 * accumulation of 16-bit values keeps what fp16 accumulation loses:
 * 2048 values of 2^-12 added onto 1.0 give 1.5 in fp32 but stay 1.0 when
 * every partial sum is rounded to fp16. The collectives' scratch
 * (sb_ar_pool_take) is the same memory from one call to the next, the
 * smallest that fits, and never one block for two holders at once. Then, under `mpirun -n p` for
 * p = 2, 3 (and 1 as a singleton): the ring's result is bit-identical on
 * every rank, exact for sums that fp16/bf16 represent, within one
 * rounding per hop of the fp32 sum otherwise, and counted as 2 bytes per
 * value (half of the fp32 all-reduce's 4). Under `mpirun -n 4` the same
 * checks run the hierarchical algorithm (hosts of 2 ranks: 16-bit
 * reduce-scatter within the host, ring across, all-gather within), whose
 * three stages count n, n/2 and n words of 2 bytes. The 16-bit
 * point-to-point (central's pushes and pulls under --precision bf16|fp16)
 * carries sb_half_round's values, taken at issue, 2 bytes each, and its
 * receive from any source names the sender. A ring whose chunks are
 * many 1 MiB pieces sums exactly and sends no larger message. Exit 0
 * pass, 1 fail,
 * 77 skip (no mpirun). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/message_size.h"
#include "comm/mpi_allreduce.h"
#include "job/eager_limit.h"
#include "core/half.h"

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static void check_conversions(void)
{
    /* fp16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even (1). */
    CHECK(sb_f32_to_fp16(1.0f) == 0x3c00, "fp16(1)");
    CHECK(sb_f32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "fp16 tie to even (down)");
    CHECK(sb_f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02, "fp16 tie to even (up)");
    CHECK(sb_f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01, "fp16 above the tie");
    CHECK(sb_f32_to_fp16(65504.0f) == 0x7bff, "fp16 max");
    CHECK(sb_f32_to_fp16(65520.0f) == 0x7c00, "fp16 overflow to infinity");
    CHECK(sb_f32_to_fp16(0x1p-24f) == 0x0001, "fp16 smallest subnormal");
    CHECK(sb_f32_to_fp16(0x1p-25f) == 0x0000, "fp16 half the smallest subnormal: tie to 0");
    CHECK(sb_f32_to_fp16(-2.0f) == 0xc000, "fp16(-2)");
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++) {
        float x = sb_fp16_to_f32((uint16_t)h);
        if (!isnan(x) && sb_f32_to_fp16(x) != h) bad++;
    }
    CHECK(bad == 0, "fp16: %d patterns do not round-trip", bad);
    /* The bulk paths (F16C 8 at a time where the CPU has it) agree with the
     * scalar conversion, ties and subnormals included. */
    enum { N = 4099 };
    static float x[N], back[N];
    static uint16_t h[N];
    for (int i = 0; i < N; i++)
        x[i] = (i % 3 ? 1.0f : -1.0f) * ldexpf(1.0f + (float)(i % 2048) / 2048.0f, i % 40 - 30);
    for (int f = 0; f < 2; f++) {
        enum sb_half_format fmt = f ? SB_HALF_BF16 : SB_HALF_FP16;
        sb_half_encode(fmt, x, h, N);
        sb_half_decode(fmt, h, back, N);
        int mism = 0;
        for (int i = 0; i < N; i++) {
            uint16_t one = f ? sb_f32_to_bf16(x[i]) : sb_f32_to_fp16(x[i]);
            float dec = f ? sb_bf16_to_f32(one) : sb_fp16_to_f32(one);
            if (h[i] != one || back[i] != dec) mism++;
        }
        CHECK(mism == 0, "%s: %d bulk conversions differ from the scalar ones", f ? "bf16" : "fp16",
              mism);
    }
    /* bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7. */
    CHECK(sb_f32_to_bf16(1.0f) == 0x3f80, "bf16(1)");
    CHECK(sb_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie to even (down)");
    CHECK(sb_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "bf16 tie to even (up)");
    CHECK(sb_bf16_to_f32(0x3f81) == 1.0f + 0x1p-7f, "bf16 decode");
    CHECK(isnan(sb_bf16_to_f32(sb_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
}

/* Many small values onto a large one: fp32 accumulation of the 16-bit
 * words keeps them; rounding every partial sum to fp16 loses them all. */
static void check_accumulation(void)
{
    enum { K = 2048 };
    uint16_t small = sb_f32_to_fp16(0x1p-12f); /* exact in fp16 */
    float acc32 = 1.0f;
    uint16_t acc16 = sb_f32_to_fp16(1.0f);
    for (int k = 0; k < K; k++) {
        sb_half_accumulate(SB_HALF_FP16, &acc32, &small, 1);
        acc16 = sb_f32_to_fp16(sb_fp16_to_f32(acc16) + sb_fp16_to_f32(small));
    }
    CHECK(acc32 == 1.5f, "fp32 accumulation: %g, want 1.5", acc32);
    CHECK(sb_fp16_to_f32(acc16) == 1.0f, "fp16 accumulation: %g (expected to lose them: 1)",
          sb_fp16_to_f32(acc16));
    CHECK(sb_fp16_to_f32(sb_f32_to_fp16(acc32)) == 1.5f, "one rounding at the end keeps 1.5");
}

/* Scratch from a communicator's pool: two taken at once are two blocks;
 * given back, a later take gets the smallest block that holds it (already
 * faulted in), a new one when none does; the pool frees them all. */
static void check_scratch_pool(void)
{
    struct sb_ar_pool pool = {0};
    struct sb_ar_op *a, *b, *c, *d, *e;
    char *pa = sb_ar_pool_take(&pool, 1000, &a), *pb = sb_ar_pool_take(&pool, 4000, &b);
    char *pe = sb_ar_pool_take(&pool, 1000, &e);
    CHECK(pa && pb && pe && pa != pb && pa != pe && pb != pe,
          "scratch: two holders share one block");
    memset(pa, 1, 1000);
    memset(pb, 2, 4000); /* each holds its bytes (ASan/valgrind would see an overrun) */
    memset(pe, 3, 1000);
    sb_ar_pool_put(a);
    sb_ar_pool_put(b);
    sb_ar_pool_put(e);
    char *pd = sb_ar_pool_take(&pool, 999, &d), *pc = sb_ar_pool_take(&pool, 2000, &c);
    CHECK((pd == pa || pd == pe) && pc == pb,
          "scratch: not the smallest pooled block that fits");
    sb_ar_pool_put(c);
    sb_ar_pool_put(d);
    sb_ar_pool_put(NULL);
    char *pf = sb_ar_pool_take(&pool, 4001, &a);
    CHECK(pf && pf != pa && pf != pb && pf != pe, "scratch: 4001 bytes from a block of 4000");
    sb_ar_pool_put(a);
    sb_ar_pool_free(&pool);
    CHECK(pool.free == NULL, "scratch: the pool kept a block after sb_ar_pool_free");
}

static const size_t sizes[] = {0, 1, 2, 3, 5, 64, 1000, 12345};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

static void check_ring(struct sb_comm *c, enum sb_half_format fmt, size_t n)
{
    int p = c->size, rank = c->rank;
    const char *name = fmt == SB_HALF_BF16 ? "bf16" : "fp16";
    float *x = malloc((n ? n : 1) * sizeof *x);
    float *all = malloc((n ? n : 1) * (size_t)p * sizeof *all);
    /* Exact: small integers, whose sums every format holds. */
    for (size_t i = 0; i < n; i++) x[i] = (float)((rank + 1) * (int)(i % 7 + 1));
    sb_comm_reset_counters(c);
    CHECK(sb_comm_allreduce16(c, fmt, x, n, NULL) == SB_OK, "%s n=%zu p=%d failed", name, n, p);
    CHECK(c->counters[SB_COMM_ALLREDUCE].calls == 1, "%s: one call counted", name);
    CHECK(c->counters[SB_COMM_ALLREDUCE].bytes == 2.0 * (double)n,
          "%s n=%zu: %g bytes counted, want 2n", name, n, c->counters[SB_COMM_ALLREDUCE].bytes);
    for (size_t i = 0; i < n; i++) {
        float want = (float)((int)(i % 7 + 1) * p * (p + 1) / 2);
        if (x[i] != want) {
            CHECK(0, "%s n=%zu p=%d: x[%zu] = %g, want %g", name, n, p, i, x[i], want);
            break;
        }
    }
    /* Fractional: within one rounding per hop of the sum; bit-identical. */
    double tol = fmt == SB_HALF_BF16 ? 0x1p-8 : 0x1p-11; /* half an ulp, relative */
    for (size_t i = 0; i < n; i++) x[i] = 0.1f * (float)(rank + 1) + 1e-3f * (float)(i % 101);
    CHECK(sb_comm_allreduce16(c, fmt, x, n, NULL) == SB_OK, "%s fraction failed", name);
    for (size_t i = 0; i < n; i++) {
        double want = 0.0;
        for (int r = 0; r < p; r++) want += 0.1f * (float)(r + 1) + 1e-3f * (float)(i % 101);
        if (fabs(x[i] - want) > (double)(p + 1) * tol * fabs(want)) {
            CHECK(0, "%s n=%zu p=%d: x[%zu] = %.8g, want %.8g", name, n, p, i, x[i], want);
            break;
        }
    }
    MPI_Allgather(x, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    for (int r = 1; r < p && n; r++)
        CHECK(memcmp(all, all + (size_t)r * n, n * sizeof *all) == 0,
              "%s n=%zu: rank %d differs from rank 0", name, n, r);
    free(x);
    free(all);
}

/* The 16-bit reduce-scatter with uneven blocks (block i: i + 3 floats):
 * rank r gets block r's exact sum of small integers, counted as 2 bytes a
 * value of the whole buffer, and send is left as it was. */
static void check_reduce_scatter(struct sb_comm *c, enum sb_half_format fmt)
{
    int p = c->size, rank = c->rank;
    size_t counts[8], n = 0, off = 0;
    for (int i = 0; i < p; i++) {
        counts[i] = (size_t)i + 3;
        if (i < rank) off += counts[i];
        n += counts[i];
    }
    float send[64], keep[64], recv[16];
    for (size_t i = 0; i < n; i++) keep[i] = send[i] = (float)((rank + 1) * (int)(i % 5 + 1));
    struct sb_comm_request req = {.index = 7};
    sb_comm_reset_counters(c);
    CHECK(sb_comm_reduce_scatter16(c, fmt, send, recv, counts, &req, NULL) == SB_OK,
          "reduce-scatter16 p=%d failed", p);
    CHECK(req.done == 1 && req.bytes == 2 * n, "reduce-scatter16: request not filled");
    CHECK(c->counters[SB_COMM_REDUCE_SCATTER].bytes == 2.0 * (double)n,
          "reduce-scatter16: %g bytes, want 2n", c->counters[SB_COMM_REDUCE_SCATTER].bytes);
    CHECK(memcmp(send, keep, n * sizeof *send) == 0, "reduce-scatter16 wrote its send buffer");
    for (size_t i = 0; i < counts[rank]; i++) {
        float want = (float)((int)((off + i) % 5 + 1) * p * (p + 1) / 2);
        if (recv[i] != want) {
            CHECK(0, "reduce-scatter16 p=%d rank %d: recv[%zu] = %g, want %g", p, rank, i,
                  recv[i], want);
            break;
        }
    }
}

/* The 16-bit point-to-point (isend16, irecv16, recv_any16) between ranks
 * 0 and 1 (p >= 2): rank 0 sends n values that are not 16-bit (each 1 +
 * an odd multiple of 2^-20, so the wire must round them), changes its
 * buffer as soon as the send returns (the words were taken at issue), and
 * rank 1 receives exactly sb_half_round's values, counted as one call of
 * 2n bytes of its kind; then rank 1 sends back to any source and rank 0
 * learns its peer; n = 0 completes at issue. */
static void check_p2p16(struct sb_comm *c, enum sb_half_format fmt)
{
    if (c->size < 2 || c->rank > 1) return;
    enum { N = 1001 };
    static float x[N], want[N], got[N];
    for (int i = 0; i < N; i++) want[i] = x[i] = (1.0f + (float)(2 * i + 1) * 0x1p-20f) * (i - 500);
    sb_half_round(fmt, want, N);
    CHECK(memcmp(want, x, sizeof x) != 0, "p2p16: the values are 16-bit already");
    sb_comm_reset_counters(c);
    struct sb_comm_request req = {0};
    if (c->rank == 0) {
        CHECK(sb_comm_isend16(c, fmt, x, N, 1, SB_COMM_PUSH, &req) == SB_OK, "isend16 failed");
        for (int i = 0; i < N; i++) x[i] = -7.0f; /* taken at issue: not what arrives */
        CHECK(sb_comm_wait(c, &req) == SB_OK, "isend16: wait failed");
        CHECK(c->counters[SB_COMM_PUSH].calls == 1 && c->counters[SB_COMM_PUSH].bytes == 2.0 * N,
              "isend16: %ld calls, %g bytes, want 1 and 2n", c->counters[SB_COMM_PUSH].calls,
              c->counters[SB_COMM_PUSH].bytes);
        int peer = -1;
        CHECK(sb_comm_recv_any16(c, fmt, got, N, &peer, SB_COMM_PUSH) == SB_OK,
              "recv_any16 failed");
        CHECK(peer == 1 && memcmp(got, want, sizeof got) == 0,
              "recv_any16: peer %d, values not the sent ones rounded", peer);
        CHECK(c->counters[SB_COMM_PUSH].calls == 2 &&
                  c->counters[SB_COMM_PUSH].bytes == 4.0 * N,
              "recv_any16: not counted at 2 bytes a value");
        CHECK(sb_comm_send16(c, fmt, x, 0, 1, SB_COMM_PULL) == SB_OK, "send16 of 0 failed");
    } else {
        CHECK(sb_comm_irecv16(c, fmt, got, N, 0, SB_COMM_PULL, &req) == SB_OK, "irecv16 failed");
        CHECK(sb_comm_wait(c, &req) == SB_OK, "irecv16: wait failed");
        CHECK(memcmp(got, want, sizeof got) == 0, "irecv16: not the sent values rounded");
        CHECK(c->counters[SB_COMM_PULL].calls == 1 && c->counters[SB_COMM_PULL].bytes == 2.0 * N,
              "irecv16: %ld calls, %g bytes, want 1 and 2n", c->counters[SB_COMM_PULL].calls,
              c->counters[SB_COMM_PULL].bytes);
        CHECK(sb_comm_send16(c, fmt, got, N, 0, SB_COMM_PUSH) == SB_OK, "send16 failed");
        CHECK(sb_comm_recv16(c, fmt, got, 0, 0, SB_COMM_PULL) == SB_OK, "recv16 of 0 failed");
    }
}

/* A 16-bit ring whose chunks are more pieces than one window (p = 2:
 * chunks of 17 pieces of 1 MiB and a few words): exact sums (each rank's
 * values are small integers), and no message above the 1 MiB piece
 * (SB_COLLECTIVE_PIECE_BYTES, comm/message_size.h). */
static void check_pieces(struct sb_comm *c)
{
    if (c->size != 2) return;
    size_t words = SB_COLLECTIVE_PIECE_BYTES / 2, n = 2 * (17 * words + 5);
    float *x = malloc(n * sizeof *x);
    CHECK(x != NULL, "pieces: out of memory");
    if (!x) return;
    for (size_t i = 0; i < n; i++) x[i] = (float)((c->rank + 1) * (int)(i % 7));
    CHECK(sb_comm_allreduce16(c, SB_HALF_BF16, x, n, NULL) == SB_OK, "pieces: all-reduce failed");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += x[i] != (float)(3 * (int)(i % 7));
    CHECK(bad == 0, "pieces: %zu of %zu sums wrong", bad, n);
    CHECK(sb_comm_largest_message_bytes() == SB_COLLECTIVE_PIECE_BYTES,
          "pieces: largest message %zu bytes, want %zu", sb_comm_largest_message_bytes(),
          (size_t)SB_COLLECTIVE_PIECE_BYTES);
    free(x);
}

static int run_ranks(void)
{
    MPI_Init(NULL, NULL);
    MPI_Comm world = MPI_COMM_WORLD;
    struct sb_comm *c = NULL;
    if (sb_comm_mpi_create(&world, &c)) {
        fprintf(stderr, "cannot create the communicator\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check_reduce_scatter(c, SB_HALF_FP16);
    check_reduce_scatter(c, SB_HALF_BF16);
    check_p2p16(c, SB_HALF_FP16);
    check_p2p16(c, SB_HALF_BF16);
    check_pieces(c);
    int hier = c->size == 4;
    if (hier) {
        CHECK(sb_comm_mpi_group_hosts(c, 2) == SB_OK, "cannot group the ranks into hosts of 2");
        c->allreduce_algo = SB_ALLREDUCE_HIERARCHICAL;
    }
    for (size_t k = 0; k < N_SIZES; k++) {
        check_ring(c, SB_HALF_FP16, sizes[k]);
        check_ring(c, SB_HALF_BF16, sizes[k]);
    }
    if (hier) { /* since the last reset: the two bf16 calls of the largest size; local
                * rank i carries chunk (i+1) mod 2 across hosts */
        size_t n = sizes[N_SIZES - 1], shard = n / 2 + (size_t)(c->rank % 2 == 1 ? n % 2 : 0);
        const struct sb_comm_counter *ctr = &c->allreduce_by_algo[SB_ALLREDUCE_HIERARCHICAL];
        CHECK(ctr->calls == 2 && ctr->bytes == 4.0 * (double)n, "hierarchical: %ld calls, %g "
              "bytes counted under the algorithm, want 2 and 4n", ctr->calls, ctr->bytes);
        CHECK(c->n_stages == 3 && c->stages[0].counter.bytes == 4.0 * (double)n &&
                  c->stages[1].counter.bytes == 4.0 * (double)shard &&
                  c->stages[2].counter.bytes == 4.0 * (double)n,
              "hierarchical stages: %g, %g, %g bytes, want 2n, 2 x shard (%zu), 2n per call",
              c->stages[0].counter.bytes, c->stages[1].counter.bytes,
              c->stages[2].counter.bytes, shard);
    }
    /* The fp32 all-reduce of the same buffer counts twice the bytes. */
    float y[1000] = {0};
    sb_comm_reset_counters(c);
    CHECK(sb_comm_allreduce(c, y, 1000) == SB_OK, "fp32 all-reduce failed");
    CHECK(c->counters[SB_COMM_ALLREDUCE].bytes == 4000.0, "fp32: 4 bytes a value");
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    sb_comm_destroy(c);
    MPI_Finalize();
    return total ? 1 : 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_ranks();
    check_conversions();
    check_accumulation();
    check_scratch_pool();
    if (failures) return 1;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    int failed = 0;
    char cmd[4096];
    for (int p = 1; p <= 4; p++) {
        snprintf(cmd, sizeof cmd, "timeout 120 mpirun -n %d --oversubscribe --bind-to none '%s'", p,
                 argv[0]);
        int rc = system(cmd);
        if (rc != 0) {
            printf("p=%d: mpirun exited with %d\n", p, rc);
            failed = 1;
        }
    }
    return failed;
}
