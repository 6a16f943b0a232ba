/* Unit test of what the harness asks a strategy about its groups, in a
 * real MPI job of 4 ranks, one replica each, on the cpu backend with a
 * stand-in strategy whose parameters and consistency groups each case sets.
 *
 * The replica consistency check over groups (src/harness/consistency.c):
 *
 * - two groups ({0, 1} and {2, 3}) that hold different parameters, each
 *   agreeing within itself, pass, while the same parameters checked as one
 *   world group (no consistency_group op: today's check) fail, naming
 *   replica 2;
 * - a group whose members disagree is caught: replica 3 against its
 *   group's first, replica 2;
 * - groups may hold parts of different sizes;
 * - a difference within the tolerance passes but is measured;
 * - a rank without replicas (a server) takes part without a group.
 *
 * The wait phase (src/harness/cross_rank.c): with compute 1, 2, 3, 4 ms on
 * ranks 0..3, the harness derives rank 0's wait as 4 - 1 = 3 ms over what
 * the strategy reported, unless the strategy owns its wait (owns_wait):
 * then its own wait and bubble stay.
 * Starts itself under `mpirun -n 4`; exit 0 pass, 1 fail, 77 skip (no
 * mpirun). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/status.h"
#include "harness/consistency.h"
#include "harness/loop.h"
#include "harness/straggler.h"
#include "job/job.h"
#include "strategies/shared/replica.h"
#include "strategies/strategy.h"

#define RANKS 4
#define MAX_PARAMS 64

static int failures;
static struct sb_job job;

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            failures++;                                                            \
            fprintf(stderr, "rank %d: %s:%d: ", job.rank, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
        }                                                                          \
    } while (0)

/* The stand-in strategy's state: this rank's parameters, group and
 * replica count. */
static float params[MAX_PARAMS];
static int group, n_local = 1;

static float *fake_replica_params(struct sb_strategy *s, int i, int *n)
{
    (void)s;
    *n = n_local;
    return i < n_local ? params : NULL;
}

static int fake_group(const struct sb_strategy *s)
{
    (void)s;
    return group;
}

static const struct sb_strategy_ops world_ops = {.name = "world",
                                                 .replica_params = fake_replica_params};
static const struct sb_strategy_ops group_ops = {.name = "groups",
                                                 .replica_params = fake_replica_params,
                                                 .consistency_group = fake_group};

static const struct sb_strategy_ops owning_ops = {.name = "owning", .owns_wait = 1};

static struct sb_model model;
static struct sb_replica replica;
static struct sb_config cfg;
static struct sb_strategy_env env;

#define STEPS 3

/* Runs the cross-rank accounting over STEPS steps in which this rank
 * computed 1 + rank ms (forward) and reported a wait of 0.25 ms and a
 * bubble of 0.5 ms; on rank 0, *wait and *bubble are its phases after it
 * (the last step's; every step is alike) and *wait_across the median
 * across ranks of the ranks' wait. */
static sb_status cross_rank(const struct sb_strategy_ops *ops, double *wait, double *bubble,
                            double *wait_across)
{
    struct sb_strategy s = {.ops = ops, .env = &env, .replica = &replica};
    struct sb_run_record rec = {.cfg = &cfg};
    struct sb_loop L = {.cfg = &cfg, .job = &job, .s = &s, .rec = &rec};
    sb_status st = sb_loop_timings_alloc(&L.t, STEPS);
    for (int i = 0; !st && i < STEPS; i++) {
        L.t.step_ms[i] = 10.0;
        for (int p = 0; p < SB_PHASE_COUNT; p++) L.t.phase_ms[p][i] = 0.0;
        L.t.phase_ms[SB_PHASE_FORWARD][i] = 1.0 + job.rank;
        L.t.phase_ms[SB_PHASE_WAIT][i] = 0.25;
        L.t.phase_ms[SB_PHASE_BUBBLE][i] = 0.5;
        L.t.n++;
    }
    if (!st) st = sb_loop_cross_rank_stats(&L);
    if (!st) {
        *wait = L.t.phase_ms[SB_PHASE_WAIT][STEPS - 1];
        *bubble = L.t.phase_ms[SB_PHASE_BUBBLE][STEPS - 1];
        *wait_across = rec.phases_by_rank[SB_PHASE_WAIT].median;
    }
    sb_loop_timings_free(&L.t);
    free((void *)rec.noise_by_rank);
    free((void *)rec.memory);
    sb_straggler_free(&rec.stragglers);
    return st;
}

/* Fills this rank's n parameters with base + k / 100 and runs one check
 * with ops; returns its status and *acc. */
static sb_status check(const struct sb_strategy_ops *ops, size_t n, float base,
                       struct sb_consistency *acc)
{
    model.n_params = n;
    for (size_t k = 0; k < n; k++) params[k] = base + (float)k / 100.0f;
    struct sb_strategy s = {.ops = ops, .env = &env, .replica = &replica};
    memset(acc, 0, sizeof *acc);
    return sb_consistency_check(&s, &job, 7, acc);
}

static int run_checks(int argc, char **argv)
{
    if (sb_job_init(&job, &argc, &argv, 1) != SB_OK || job.size != RANKS) {
        fprintf(stderr, "needs an MPI job of %d ranks\n", RANKS);
        return 1;
    }
    replica.model = &model;
    cfg.replicas = RANKS;
    env.be = &sb_backend_cpu;
    env.cfg = &cfg;
    struct sb_consistency acc;
    int half = job.rank / 2; /* group 0: ranks 0, 1; group 1: ranks 2, 3 */
    group = half;

    /* Every rank the same parameters: one world agrees. */
    sb_status st = check(&world_ops, 16, 1.0f, &acc);
    CHECK(st == SB_OK && acc.checksums_equal && acc.replicas == RANKS, "world: %s",
          sb_error_message());

    /* Two groups, different parameters, each agreeing within itself. */
    st = check(&group_ops, 16, half ? 2.0f : 1.0f, &acc);
    CHECK(st == SB_OK, "two agreeing groups failed: %s", sb_error_message());
    CHECK(acc.checksums_equal == 1 && acc.replicas == RANKS, "two agreeing groups: equal %d",
          acc.checksums_equal);
    /* The same parameters as one world group fail, naming replica 2. */
    st = check(&world_ops, 16, half ? 2.0f : 1.0f, &acc);
    CHECK(st == SB_ERR_INTERNAL, "world over two parts passed");
    CHECK(strstr(sb_error_message(), "replica 2 (rank 2) diverged from replica 0"),
          "message '%s'", sb_error_message());
    CHECK(acc.worst_replica == 2 && fabs(acc.max_abs_diff - 1.0) < 1e-6,
          "worst %d, diff %g", acc.worst_replica, acc.max_abs_diff);

    /* A group whose members disagree: rank 3 off by 0.5 in its group. */
    st = check(&group_ops, 16, half ? (job.rank == 3 ? 2.5f : 2.0f) : 1.0f, &acc);
    CHECK(st == SB_ERR_INTERNAL, "a disagreeing group passed");
    CHECK(strstr(sb_error_message(), "replica 3 (rank 3) diverged from replica 2"),
          "message '%s'", sb_error_message());
    CHECK(acc.worst_replica == 3 && fabs(acc.max_abs_diff - 0.5) < 1e-6 &&
          fabs(acc.tolerance - 1e-4 * 2.15) < 1e-9,
          "worst %d, diff %g, tolerance %g", acc.worst_replica, acc.max_abs_diff, acc.tolerance);

    /* Parts of different sizes (16 and 9 parameters). */
    st = check(&group_ops, half ? 9 : 16, half ? 2.0f : 1.0f, &acc);
    CHECK(st == SB_OK && acc.checksums_equal, "parts of two sizes: %s", sb_error_message());

    /* Within the tolerance: rank 1 off by 1e-6 passes, measured. */
    st = check(&group_ops, 16, job.rank == 1 ? 1.0f + 1e-6f : (half ? 2.0f : 1.0f), &acc);
    CHECK(st == SB_OK && acc.checksums_equal == 0 && acc.worst_replica == 1 &&
          acc.max_abs_diff > 0 && acc.max_abs_diff < acc.tolerance,
          "drift: %s equal %d worst %d diff %g", sb_error_message(), acc.checksums_equal,
          acc.worst_replica, acc.max_abs_diff);

    /* Rank 0 holds no replica (a server): ranks 1 (group 0) and 2, 3
     * (group 1) are replicas 0, 1 and 2; rank 3 disagrees. */
    n_local = job.rank == 0 ? 0 : 1;
    st = check(&group_ops, 16, half ? (job.rank == 3 ? 3.0f : 2.0f) : 1.0f, &acc);
    CHECK(st == SB_ERR_INTERNAL && acc.replicas == 3, "with a server: %s", sb_error_message());
    CHECK(strstr(sb_error_message(), "replica 2 (rank 3) diverged from replica 1"),
          "message '%s'", sb_error_message());
    n_local = 1;

    /* The harness derives the wait; a strategy that owns it keeps its own. */
    double wait = -1.0, bubble = -1.0, across = -1.0;
    st = cross_rank(&world_ops, &wait, &bubble, &across);
    CHECK(st == SB_OK, "cross-rank stats: %s", sb_error_message());
    /* Derived: ranks wait 3, 2, 1, 0 ms; their median 1.5. */
    if (job.rank == 0)
        CHECK(wait == 3.0 && bubble == 0.5 && across == 1.5,
              "derived: wait %g, bubble %g, across ranks %g", wait, bubble, across);
    st = cross_rank(&owning_ops, &wait, &bubble, &across);
    CHECK(st == SB_OK, "cross-rank stats: %s", sb_error_message());
    if (job.rank == 0)
        CHECK(wait == 0.25 && bubble == 0.5 && across == 0.25,
              "owned: wait %g, bubble %g, across ranks %g", wait, bubble, across);

    int rank = job.rank;
    sb_job_finish(&job);
    if (rank == 0) printf("%s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_checks(argc, argv);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 120 mpirun -n %d --oversubscribe --bind-to none '%s'",
             RANKS, argv[0]);
    return system(cmd) == 0 ? 0 : 1;
}
