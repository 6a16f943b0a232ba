/* Tests stratbench's own all-reduce algorithms (src/comm/mpi_allreduce.c,
 * and the hierarchical one of src/comm/mpi_hier.c over hosts of
 * --ranks-per-host 2 or 1) and the first-class reduce-scatter and
 * all-gather through the "mpi" communicator, on 1 to 5 ranks: the sum is exact for
 * integer-valued floats, bit-identical on every rank for fractional ones,
 * for sizes from 0 to uneven thousands (n < p included), with several
 * all-reduces in flight at once, progressed by test calls and completed
 * in any order.
 *
 * Run plainly (as `ninja test` does) it is a singleton MPI job (p = 1) and
 * then starts itself under `mpirun -n p` for p = 2..5; exit 0 pass, 1 fail,
 * 77 skip (no mpirun). A run that hangs is ended after 300 s and fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static const size_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 64, 1000, 12345, 100003};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

/* Integer-valued input: rank r holds (r + 1) * (i % 7 + 1); the sum over p
 * ranks is exactly (i % 7 + 1) p (p + 1) / 2. */
static void fill_exact(float *x, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((rank + 1) * (int)(i % 7 + 1));
}

/* Fractional input whose sum depends on the order of additions. */
static void fill_fraction(float *x, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) x[i] = 0.1f * (float)(rank + 1) + 1e-3f * (float)(i % 101);
}

/* One algorithm, one size: exact sums, then bit-identical results. */
static void check_one(struct sb_comm *c, enum sb_allreduce_algo algo, size_t n)
{
    int p = c->size, rank = c->rank;
    float *x = malloc((n ? n : 1) * sizeof *x);
    float *all = malloc((n ? n : 1) * (size_t)p * sizeof *all);
    c->allreduce_algo = algo;
    fill_exact(x, n, rank);
    struct sb_comm_request req;
    if (sb_comm_iallreduce(c, x, n, &req) || sb_comm_wait(c, &req)) {
        CHECK(0, "%s n=%zu p=%d: failed", sb_allreduce_algo_name(algo), n, p);
    }
    for (size_t i = 0; i < n; i++) {
        float want = (float)((int)(i % 7 + 1) * p * (p + 1) / 2);
        if (x[i] != want) {
            CHECK(0, "%s n=%zu p=%d rank %d: x[%zu] = %g, want %g",
                  sb_allreduce_algo_name(algo), n, p, rank, i, x[i], want);
            break;
        }
    }
    CHECK(algo == SB_ALLREDUCE_AUTO || req.algo == algo, "%s: ran %d",
          sb_allreduce_algo_name(algo), (int)req.algo);
    fill_fraction(x, n, rank);
    if (sb_comm_iallreduce(c, x, n, &req) || sb_comm_wait(c, &req))
        CHECK(0, "%s n=%zu p=%d: failed", sb_allreduce_algo_name(algo), n, p);
    MPI_Allgather(x, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    for (int q = 1; q < p; q++)
        CHECK(memcmp(all, all + (size_t)q * n, n * sizeof *x) == 0,
              "%s n=%zu p=%d: rank %d's sum differs from rank 0's",
              sb_allreduce_algo_name(algo), n, p, q);
    double err = 0.0;
    for (size_t i = 0; i < n; i++) {
        double want = 0.0;
        for (int r = 0; r < p; r++) want += 0.1f * (float)(r + 1) + 1e-3f * (float)(i % 101);
        double d = x[i] > want ? x[i] - want : want - x[i];
        if (d > err) err = d;
    }
    CHECK(err < 1e-5, "%s n=%zu p=%d: error %g", sb_allreduce_algo_name(algo), n, p, err);
    free(x);
    free(all);
}

/* Three all-reduces in flight at once (different sizes and algorithms),
 * polled with test in turn, waited for in reverse order: messages of one
 * must never be taken for another's. */
static void check_in_flight(struct sb_comm *c)
{
    enum { K = 3 };
    size_t n[K] = {5000, 17, 64000};
    enum sb_allreduce_algo a[K] = {SB_ALLREDUCE_RING, SB_ALLREDUCE_RECURSIVE_DOUBLING,
                                   SB_ALLREDUCE_RING};
    float *x[K];
    struct sb_comm_request req[K];
    for (int k = 0; k < K; k++) {
        x[k] = malloc(n[k] * sizeof(float));
        fill_exact(x[k], n[k], c->rank);
        c->allreduce_algo = a[k];
        if (sb_comm_iallreduce(c, x[k], n[k], &req[k])) CHECK(0, "in flight: start failed");
        for (int j = 0; j <= k; j++) {
            int done = 0;
            if (sb_comm_test(c, &req[j], &done)) CHECK(0, "in flight: test failed");
        }
    }
    for (int k = K - 1; k >= 0; k--)
        if (sb_comm_wait(c, &req[k])) CHECK(0, "in flight: wait failed");
    int p = c->size;
    for (int k = 0; k < K; k++) {
        for (size_t i = 0; i < n[k]; i++)
            if (x[k][i] != (float)((int)(i % 7 + 1) * p * (p + 1) / 2)) {
                CHECK(0, "in flight %d (p=%d): x[%zu] = %g", k, p, i, x[k][i]);
                break;
            }
        free(x[k]);
    }
}

/* The hierarchical all-reduce over hosts of 2 ranks (1 for odd p): every
 * size exact and bit-identical (check_one), and its three stages counted
 * once per all-reduce, the intra-host ones at the buffer's bytes. */
static void check_hierarchical(MPI_Comm world)
{
    struct sb_comm *h = NULL;
    int p = 0;
    MPI_Comm_size(world, &p);
    if (sb_comm_mpi_create(&world, &h) || sb_comm_mpi_group_hosts(h, p % 2 == 0 ? 2 : 1)) {
        CHECK(0, "hierarchical: no communicator: %s", sb_error_message());
        sb_comm_destroy(h);
        return;
    }
    for (size_t s = 0; s < N_SIZES; s++) check_one(h, SB_ALLREDUCE_HIERARCHICAL, sizes[s]);
    const struct sb_comm_counter *all = &h->allreduce_by_algo[SB_ALLREDUCE_HIERARCHICAL];
    CHECK(all->calls == 2 * (long)N_SIZES, "hierarchical calls %ld", all->calls);
    CHECK(h->n_stages == 3, "hierarchical stages %d", h->n_stages);
    for (int i = 0; i < h->n_stages; i++) {
        CHECK(h->stages[i].counter.calls == all->calls, "stage %s: %ld calls",
              h->stages[i].name, h->stages[i].counter.calls);
        if (i != 1)
            CHECK(h->stages[i].counter.bytes == all->bytes, "stage %s: %g bytes",
                  h->stages[i].name, h->stages[i].counter.bytes);
    }
    /* auto picks it only for 2+ hosts of 2+ ranks (here p = 4: 2 hosts of 2) */
    struct sb_comm_request req;
    float x[64] = {0};
    h->allreduce_algo = SB_ALLREDUCE_AUTO;
    if (sb_comm_iallreduce(h, x, 64, &req) || sb_comm_wait(h, &req)) CHECK(0, "auto failed");
    CHECK((p >= 4 && p % 2 == 0) == (req.algo == SB_ALLREDUCE_HIERARCHICAL),
          "auto at p=%d ran %s", p, sb_allreduce_algo_name(req.algo));
    sb_comm_destroy(h);
}

/* The ring's blocks of n floats over p ranks into counts[p] (n/p, one
 * more for the first n mod p); returns where rank's block starts. */
static size_t ring_counts(size_t n, int p, int rank, size_t *counts)
{
    size_t first = 0;
    for (int r = 0; r < p; r++) {
        counts[r] = n / (size_t)p + ((size_t)r < n % (size_t)p ? 1 : 0);
        if (r < rank) first += counts[r];
    }
    return first;
}

/* Reduce-scatter then all-gather of n floats in uneven blocks (block r:
 * the r-th of p near-equal parts, which the ring runs): the blocks hold
 * the exact sums, the send buffer is untouched, the gather restores the
 * whole sum on every rank, and each counts one call and 4n bytes
 * (nccl-tests' convention). */
static void check_reduce_scatter_allgather(struct sb_comm *c, size_t n)
{
    int p = c->size, rank = c->rank;
    size_t counts[8], first = ring_counts(n, p, rank, counts);
    float *x = malloc((n ? n : 1) * sizeof *x), *mine = malloc((counts[rank] + 1) * sizeof *x);
    fill_exact(x, n, rank);
    struct sb_comm_counter rs0 = c->counters[SB_COMM_REDUCE_SCATTER],
                           ag0 = c->counters[SB_COMM_ALLGATHER];
    struct sb_comm_request req;
    if (sb_comm_ireduce_scatter(c, x, mine, counts, &req) || sb_comm_wait(c, &req))
        CHECK(0, "reduce-scatter n=%zu p=%d failed", n, p);
    for (size_t i = 0; i < counts[rank]; i++)
        if (mine[i] != (float)((int)((first + i) % 7 + 1) * p * (p + 1) / 2)) {
            CHECK(0, "reduce-scatter n=%zu p=%d rank %d: block[%zu] = %g", n, p, rank, i,
                  mine[i]);
            break;
        }
    float *again = malloc((n ? n : 1) * sizeof *x);
    fill_exact(again, n, rank);
    CHECK(n == 0 || memcmp(x, again, n * sizeof *x) == 0,
          "reduce-scatter n=%zu p=%d wrote into its send buffer", n, p);
    free(again);
    memset(x, 0, n * sizeof *x);
    if (sb_comm_iallgather(c, mine, x, counts, &req) || sb_comm_wait(c, &req))
        CHECK(0, "all-gather n=%zu p=%d failed", n, p);
    for (size_t i = 0; i < n; i++)
        if (x[i] != (float)((int)(i % 7 + 1) * p * (p + 1) / 2)) {
            CHECK(0, "all-gather n=%zu p=%d: x[%zu] = %g", n, p, i, x[i]);
            break;
        }
    CHECK(c->counters[SB_COMM_REDUCE_SCATTER].calls == rs0.calls + 1 &&
              c->counters[SB_COMM_REDUCE_SCATTER].bytes == rs0.bytes + 4.0 * (double)n,
          "reduce-scatter counted %ld calls, %g bytes", c->counters[SB_COMM_REDUCE_SCATTER].calls,
          c->counters[SB_COMM_REDUCE_SCATTER].bytes);
    CHECK(c->counters[SB_COMM_ALLGATHER].calls == ag0.calls + 1 &&
              c->counters[SB_COMM_ALLGATHER].bytes == ag0.bytes + 4.0 * (double)n,
          "all-gather counted %ld calls, %g bytes", c->counters[SB_COMM_ALLGATHER].calls,
          c->counters[SB_COMM_ALLGATHER].bytes);
    free(x);
    free(mine);
}

/* Blocks that are not the ring's (all n on the last rank): the library's
 * MPI_Ireduce_scatter; the last rank receives the exact sums. */
static void check_reduce_scatter_skewed(struct sb_comm *c, size_t n)
{
    int p = c->size, rank = c->rank;
    size_t counts[8] = {0};
    counts[p - 1] = n;
    float *x = malloc((n ? n : 1) * sizeof *x), *mine = malloc((n ? n : 1) * sizeof *x);
    fill_exact(x, n, rank);
    struct sb_comm_request req;
    if (sb_comm_ireduce_scatter(c, x, mine, counts, &req) || sb_comm_wait(c, &req))
        CHECK(0, "skewed reduce-scatter n=%zu p=%d failed", n, p);
    for (size_t i = 0; rank == p - 1 && i < n; i++)
        if (mine[i] != (float)((int)(i % 7 + 1) * p * (p + 1) / 2)) {
            CHECK(0, "skewed reduce-scatter n=%zu p=%d: block[%zu] = %g", n, p, i, mine[i]);
            break;
        }
    free(x);
    free(mine);
}

/* Two ring all-gathers in flight at once, waited in the reverse order (a
 * schedule advances only when it is tested or waited on: the one waited
 * first must complete while the other sits at its first step), the second
 * in place (its send block is its own place in recv); then blocks that
 * are not the ring's (all n on the last rank): the library's
 * MPI_Iallgatherv. Every rank ends with the whole buffer. */
static void check_allgather_in_flight_in_place_skewed(struct sb_comm *c, size_t n)
{
    int p = c->size, rank = c->rank;
    size_t counts[8], first = ring_counts(n, p, rank, counts);
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b), *mine = malloc(n * sizeof *a);
    for (size_t i = 0; i < counts[rank]; i++) {
        mine[i] = (float)(first + i);
        b[first + i] = (float)(first + i) + 0.5f;
    }
    struct sb_comm_request ra, rb;
    if (sb_comm_iallgather(c, mine, a, counts, &ra) ||
        sb_comm_iallgather(c, b + first, b, counts, &rb) || sb_comm_wait(c, &rb) ||
        sb_comm_wait(c, &ra))
        CHECK(0, "all-gathers in flight n=%zu p=%d failed", n, p);
    for (size_t i = 0; i < n; i++)
        if (a[i] != (float)i || b[i] != (float)i + 0.5f) {
            CHECK(0, "all-gathers in flight n=%zu p=%d: a[%zu] = %g, b[%zu] = %g", n, p, i, a[i],
                  i, b[i]);
            break;
        }
    size_t skewed[8] = {0};
    skewed[p - 1] = n;
    for (size_t i = 0; rank == p - 1 && i < n; i++) mine[i] = (float)(3 * i);
    memset(a, 0, n * sizeof *a);
    if (sb_comm_iallgather(c, mine, a, skewed, &ra) || sb_comm_wait(c, &ra))
        CHECK(0, "skewed all-gather n=%zu p=%d failed", n, p);
    for (size_t i = 0; i < n; i++)
        if (a[i] != (float)(3 * i)) {
            CHECK(0, "skewed all-gather n=%zu p=%d: a[%zu] = %g", n, p, i, a[i]);
            break;
        }
    free(a);
    free(b);
    free(mine);
}

static int run_checks(void)
{
    MPI_Init(NULL, NULL);
    MPI_Comm world = MPI_COMM_WORLD;
    struct sb_comm *c = NULL;
    if (sb_comm_mpi_create(&world, &c)) {
        fprintf(stderr, "cannot create the communicator: %s\n", sb_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    enum sb_allreduce_algo algos[] = {SB_ALLREDUCE_RING, SB_ALLREDUCE_RECURSIVE_DOUBLING,
                                      SB_ALLREDUCE_LIBRARY, SB_ALLREDUCE_AUTO};
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
        for (size_t s = 0; s < N_SIZES; s++) check_one(c, algos[a], sizes[s]);
    check_in_flight(c);
    check_hierarchical(world);
    for (size_t s = 0; s < N_SIZES; s++) check_reduce_scatter_allgather(c, sizes[s]);
    check_reduce_scatter_skewed(c, 1000);
    check_allgather_in_flight_in_place_skewed(c, 12345);
    /* The counters split all-reduces by algorithm. */
    long calls = 0;
    for (int a = 0; a < SB_ALLREDUCE_NALGOS; a++) calls += c->allreduce_by_algo[a].calls;
    CHECK(calls == c->counters[SB_COMM_ALLREDUCE].calls, "by-algorithm calls %ld != %ld", calls,
          c->counters[SB_COMM_ALLREDUCE].calls);
    CHECK(c->allreduce_by_algo[SB_ALLREDUCE_RING].calls >= 2 * (long)N_SIZES + 2,
          "ring calls %ld", c->allreduce_by_algo[SB_ALLREDUCE_RING].calls);
    CHECK(c->allreduce_by_algo[SB_ALLREDUCE_RECURSIVE_DOUBLING].calls >= 2 * (long)N_SIZES + 1,
          "recursive-doubling calls %ld",
          c->allreduce_by_algo[SB_ALLREDUCE_RECURSIVE_DOUBLING].calls);
    CHECK(c->allreduce_by_algo[SB_ALLREDUCE_LIBRARY].calls == 2 * (long)N_SIZES,
          "mpi calls %ld", c->allreduce_by_algo[SB_ALLREDUCE_LIBRARY].calls);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int rank = c->rank, p = c->size;
    sb_comm_destroy(c);
    MPI_Finalize();
    if (rank == 0) printf("p=%d: %s (%d failures)\n", p, total ? "FAIL" : "ok", total);
    return total ? 1 : 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_checks();
    /* Not under mpirun: p = 1 in a child (a singleton MPI job), then
     * p = 2..5 under mpirun. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    int failed = 0;
    char cmd[4096];
    for (int p = 1; p <= 5; p++) {
        snprintf(cmd, sizeof cmd, "timeout 300 mpirun -n %d --oversubscribe --bind-to none '%s'", p,
                 argv[0]);
        int rc = system(cmd);
        if (rc != 0) {
            printf("p=%d: mpirun exited with %d\n", p, rc);
            failed = 1;
        }
    }
    return failed;
}
