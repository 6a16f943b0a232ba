/* Tests that the data-parallel synchronisation pieces (strategies/shared/
 * dp_sync.h, zero_sync.h) work on a communicator that is not the world and
 * on a range that is not the whole model: 4 ranks are split into two
 * groups of 2 ({0, 2} and {1, 3}), each rank computes the gradient of an
 * mlp on its own batch, and each group synchronises the range of the last
 * two layers (fc2, fc3) on its own. The result must equal, bit for bit,
 * the plain all-reduce (sum) of the same gradients over the group (with 2
 * ranks every element is a + b whatever the algorithm):
 *   - dp_sync (buckets a layer each, overlapping backward), with the
 *     communicator's automatic algorithm and then with the hierarchical
 *     one (the group's 2 ranks as 2 hosts of 1): the range of the
 *     gradients is the group's sum, the floats outside it are the rank's
 *     own;
 *   - zero_sync stages 1, 2 and 3: the gradient shard holds this rank's
 *     blocks of that sum (the blocks of the two ranks cover every unit
 *     once), and after the update the range of the parameters (stage 3:
 *     gathered) equals one SGD-with-momentum step with the sum, made by a
 *     separate optimizer over the whole range; fc1, outside the range, is
 *     left as it was.
 * A piece that used the world would sum 4 ranks and fail.
 *
 * Run plainly (as `ninja test` does) it starts itself under
 * `mpirun -n 4`; exit 0 pass, 1 fail, 77 skip (no mpirun). A run that hangs
 * is ended after 300 s and fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "strategies/shared/dp_sync.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/zero_sync.h"
#include "workloads/workload.h"

#define BATCH 4

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "rank %d: ", world_rank);                         \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static int world_rank;

/* The test's run config: an mlp 784-16-12-10, SGD with momentum. */
static void test_config(struct sb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->workload, sizeof cfg->workload, "mlp");
    cfg->hidden[0] = 16;
    cfg->hidden[1] = 12;
    cfg->n_hidden = 2;
    cfg->seed = 42;
    cfg->replicas = 2;
    cfg->lr = 0.1;
    cfg->momentum = 0.9;
    cfg->optimizer = SB_OPTIMIZER_SGD;
}

/* A fresh model (the same parameters on every rank) and this rank's batch,
 * forward run (backward is the caller's). */
static struct sb_model *model_forward(const struct sb_config *cfg, float *x, uint8_t *y)
{
    struct sb_model *m = NULL;
    const struct sb_workload_ops *ops = sb_workload_find("mlp");
    if (!ops || ops->create(cfg, &sb_backend_cpu, BATCH, &m) != SB_OK) return NULL;
    struct sb_rng rng;
    sb_rng_seed(&rng, 100 + (unsigned long long)world_rank, 1);
    for (size_t i = 0; i < (size_t)BATCH * m->in_dim; i++) x[i] = (float)sb_rng_uniform(&rng);
    for (int i = 0; i < BATCH; i++) y[i] = (uint8_t)sb_rng_below(&rng, 10);
    double loss = 0.0;
    if (m->ops->forward(m, x, y, BATCH, 1.0f / (2 * BATCH), &loss) != SB_OK) {
        m->ops->destroy(m);
        return NULL;
    }
    return m;
}

/* The range of fc2 and fc3 (tensors 2..5 of the mlp). */
static struct sb_grad_range part_range(const struct sb_model *m)
{
    size_t off = m->tensors[2].offset;
    return (struct sb_grad_range){off, m->n_params - off};
}

/* dp_sync over the group: the range summed, the rest untouched;
 * hierarchical: the group's all-reduces ran the hierarchical algorithm. */
static void check_dp_sync(struct sb_comm *group, const struct sb_config *cfg,
                          const float *local, const float *sum, float *x, uint8_t *y,
                          int hierarchical)
{
    struct sb_model *m = model_forward(cfg, x, y);
    CHECK(m, "dp_sync: cannot build the model");
    if (!m) return;
    struct sb_grad_range r = part_range(m);
    struct sb_dp_sync_cfg sc = {.bucket_mb = SB_BUCKET_CAP_PER_LAYER_MB, .overlap = 1};
    struct sb_dp_sync *d = NULL;
    CHECK(sb_dp_sync_create(group, m, r, &sc, &d) == SB_OK, "dp_sync: create failed");
    if (d) {
        CHECK(sb_dp_sync_plan(d)->n == 2, "dp_sync: %d buckets over fc2, fc3 (want 2)",
              sb_dp_sync_plan(d)->n);
        CHECK(sb_dp_sync_begin(d, 0) == SB_DP_SYNC_BUCKETS, "dp_sync: not a bucket step");
        CHECK(sb_dp_sync_ready_fn(d) == sb_dp_sync_ready, "dp_sync: no overlap");
        sb_comm_reset_counters(group);
        CHECK(m->ops->backward(m, sb_dp_sync_ready_fn(d), d) == SB_OK, "dp_sync: backward");
        struct sb_step_result res;
        memset(&res, 0, sizeof res);
        CHECK(sb_dp_sync_finish(d, &res) == SB_OK, "dp_sync: finish failed");
        size_t bad = 0;
        for (size_t i = 0; i < m->n_params; i++) {
            int in = i >= r.offset;
            if (memcmp(&m->grads[i], in ? &sum[i] : &local[i], sizeof(float)) != 0) bad++;
        }
        CHECK(bad == 0, "dp_sync: %zu of %zu gradients differ from the group's all-reduce",
              bad, m->n_params);
        const struct sb_comm_counter *k = &group->counters[SB_COMM_ALLREDUCE];
        CHECK(k->calls == 2 && k->bytes == 4.0 * (double)r.count,
              "dp_sync: %ld all-reduces of %g bytes (want 2 of %zu)", k->calls, k->bytes,
              4 * r.count);
        long hier = group->allreduce_by_algo[SB_ALLREDUCE_HIERARCHICAL].calls;
        CHECK(hier == (hierarchical ? 2 : 0), "dp_sync: %ld hierarchical all-reduces (want %d)",
              hier, hierarchical ? 2 : 0);
    }
    sb_dp_sync_destroy(d);
    m->ops->destroy(m);
}

/* zero_sync stage `stage` over the group: blocks of the sum, then the
 * parameters after one step equal the reference step with the sum. */
static void check_zero_sync(struct sb_comm *group, const struct sb_config *cfg, int stage,
                            const float *sum, float *x, uint8_t *y)
{
    struct sb_model *m = model_forward(cfg, x, y);
    CHECK(m, "zero %d: cannot build the model", stage);
    if (!m) return;
    struct sb_grad_range r = part_range(m);
    /* The reference: the whole range stepped with the group's sum. */
    float *want = malloc(m->n_params * sizeof *want);
    memcpy(want, m->params, m->n_params * sizeof *want);
    struct sb_optimizer opt;
    memset(&opt, 0, sizeof opt);
    CHECK(sb_optimizer_init(&opt, &sb_backend_cpu, cfg, r.count) == SB_OK, "optimizer init");
    sb_optimizer_step(&opt, want + r.offset, sum + r.offset);
    sb_optimizer_free(&opt);

    struct sb_zero_sync_cfg zc = {.stage = stage, .bucket_mb = SB_BUCKET_CAP_PER_LAYER_MB,
                                  .overlap = 1, .run = cfg};
    struct sb_zero_sync *z = NULL;
    CHECK(sb_zero_sync_create(group, m, &sb_backend_cpu, r, &zc, &z) == SB_OK,
          "zero %d: create failed", stage);
    if (z) {
        sb_zero_sync_begin(z);
        if (stage == 3) { /* forward again: the hook gathers fc2, fc3 (freed at create) */
            double loss = 0.0;
            CHECK(m->ops->forward(m, x, y, BATCH, 1.0f / (2 * BATCH), &loss) == SB_OK,
                  "zero 3: forward");
        }
        CHECK(m->ops->backward(m, sb_zero_sync_ready_fn(z), z) == SB_OK, "zero %d: backward",
              stage);
        struct sb_step_result res;
        memset(&res, 0, sizeof res);
        CHECK(sb_zero_sync_finish(z, &res) == SB_OK, "zero %d: finish failed", stage);
        size_t bad = 0, mine = 0;
        const float *g = sb_zero_sync_grad_shard(z);
        for (int u = 0; u < sb_zero_sync_units(z); u++) {
            size_t off, count, soff;
            sb_zero_sync_block(z, u, &off, &count, &soff);
            mine += count;
            for (size_t i = 0; i < count; i++)
                if (memcmp(&g[soff + i], &sum[off + i], sizeof(float)) != 0) bad++;
        }
        CHECK(bad == 0, "zero %d: %zu floats of the shard differ from the group's sum", stage,
              bad);
        long total = (long)mine;
        MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        CHECK(total == 2 * (long)r.count, "zero %d: the shards cover %ld floats of 2 x %zu",
              stage, total, r.count);
        CHECK(sb_zero_sync_update(z, &res) == SB_OK, "zero %d: update failed", stage);
        CHECK(sb_zero_sync_gather_all(z) == SB_OK, "zero %d: gather_all failed", stage);
        bad = 0;
        for (size_t i = 0; i < m->n_params; i++)
            if (memcmp(&m->params[i], &want[i], sizeof(float)) != 0) bad++;
        CHECK(bad == 0, "zero %d: %zu of %zu parameters differ from the reference step", stage,
              bad, m->n_params);
        CHECK(sb_zero_sync_release(z) == SB_OK, "zero %d: release failed", stage);
    }
    sb_zero_sync_destroy(z);
    free(want);
    m->ops->destroy(m);
}

static int run_checks(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm mpi_world = MPI_COMM_WORLD;
    struct sb_comm *world = NULL, *group = NULL;
    if (size != 4 || sb_comm_mpi_create(&mpi_world, &world) != SB_OK ||
        sb_comm_split(world, world_rank % 2, world_rank, &group) != SB_OK) {
        fprintf(stderr, "needs 4 ranks and a split communicator\n");
        MPI_Finalize();
        return 1;
    }
    CHECK(group->size == 2 && group->rank == world_rank / 2, "group rank %d of %d",
          group->rank, group->size);
    struct sb_config cfg;
    test_config(&cfg);
    float *x = malloc((size_t)BATCH * 784 * sizeof *x);
    uint8_t y[BATCH];
    /* This rank's local gradient, and the group's sum by a plain all-reduce. */
    struct sb_model *m = model_forward(&cfg, x, y);
    if (!m || m->ops->backward(m, NULL, NULL) != SB_OK) {
        fprintf(stderr, "cannot compute the gradient\n");
        MPI_Finalize();
        return 1;
    }
    size_t n = m->n_params;
    float *local = malloc(n * sizeof *local), *sum = malloc(n * sizeof *sum);
    memcpy(local, m->grads, n * sizeof *local);
    memcpy(sum, m->grads, n * sizeof *sum);
    m->ops->destroy(m);
    MPI_Comm mpi_group;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &mpi_group);
    MPI_Allreduce(MPI_IN_PLACE, sum, (int)n, MPI_FLOAT, MPI_SUM, mpi_group);
    MPI_Comm_free(&mpi_group);

    check_dp_sync(group, &cfg, local, sum, x, y, 0);
    if (sb_comm_mpi_group_hosts(group, 1) == SB_OK) {
        group->allreduce_algo = SB_ALLREDUCE_HIERARCHICAL;
        check_dp_sync(group, &cfg, local, sum, x, y, 1);
        group->allreduce_algo = SB_ALLREDUCE_AUTO;
    } else {
        CHECK(0, "cannot group the group's ranks into hosts");
    }
    for (int stage = 1; stage <= 3; stage++) check_zero_sync(group, &cfg, stage, sum, x, y);

    free(local);
    free(sum);
    free(x);
    sb_comm_destroy(group);
    sb_comm_destroy(world);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0) printf("%s: %d failure(s) over 4 ranks\n", all ? "FAIL" : "ok", all);
    MPI_Finalize();
    return all ? 1 : 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_checks();
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 300 mpirun -n 4 --oversubscribe --bind-to none '%s'",
             argv[0]);
    int rc = system(cmd);
    if (rc != 0) printf("mpirun exited with %d\n", rc);
    return rc != 0;
}
