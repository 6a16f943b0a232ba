/* Strategy "ddp": one MPI rank per replica (like PyTorch
 * DistributedDataParallel). Each rank computes the gradient of its slice of
 * the global batch; the gradients are summed with all-reduces, so every rank
 * applies the same mean gradient and the replicas stay identical.
 *
 * The synchronisation is strategies/shared/dp_sync.h over the dp
 * communicator of a 1-deep grid (comm/grid.h: sb_grid_adopt, the world
 * itself with its all-reduce set-up) and the whole model: gradient
 * buckets (--bucket-mb) all-reduced as backward makes them ready
 * (--no-overlap: after backward), the compression and local SGD hook
 * (--grad-compression, --local-sgd), and the hierarchical all-reduce
 * where the communicator runs it (strategy "hierarchical"). Timing definitions: docs/ddp.md.
 *
 * On CPUs the "mpi" communicator runs the --allreduce algorithm
 * (stratbench's ring or recursive doubling over MPI point-to-point, Open
 * MPI's MPI_Iallreduce for --allreduce mpi, or the hierarchical one:
 * src/comm/mpi.c). On GPUs (sb_comm_world_create: --comm nccl, or
 * host-staged mpi) a bucket's all-reduce runs on NCCL's communication
 * stream, ordered after the kernels that wrote it by an event, and the wait
 * makes the compute stream wait on its completion event; the host never
 * blocks inside the step (src/comm/nccl.c). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce_algo.h"
#include "comm/cost_model.h"
#include "comm/grid.h"
#include "strategies/shared/buckets.h"
#include "strategies/shared/dp_sync.h"
#include "strategies/shared/grad_sync.h"
#include "strategies/shared/replica.h"

struct ddp {
    struct sb_replica *replica;
    struct sb_grid *grid;     /* 1-deep: dp = the world (sb_grid_adopt) */
    struct sb_comm *comm;     /* grid->dp_comm (the grid's) */
    struct sb_dp_sync *sync;  /* the gradients' synchronisation over comm */
};

/* ddp's own flags (cfg->strategy_opts). */
struct ddp_opts {
    double bucket_mb; /* --bucket-mb: gradient bucket size in MiB (PyTorch's 25) */
    int overlap;      /* start a bucket's all-reduce during backward (--no-overlap: 0) */
};
_Static_assert(sizeof(struct ddp_opts) <= SB_STRATEGY_OPTS_BYTES, "ddp options");

static const struct ddp_opts *opts(const struct sb_config *cfg)
{
    return (const struct ddp_opts *)(const void *)cfg->strategy_opts;
}

static const struct sb_strategy_option ddp_options[] = {
    {"bucket-mb", "X", SB_OPTION_NUMBER, offsetof(struct ddp_opts, bucket_mb), 1e-6, 1e6, 25.0,
     0, "bucket_mb", 0, "gradient bucket size in MiB", NULL},
    {"no-overlap", NULL, SB_OPTION_SWITCH, offsetof(struct ddp_opts, overlap), 0, 0, 1, 0,
     "overlap", 1, "all-reduce after backward instead of during it", NULL},
    {0},
};

static void ddp_destroy(struct sb_strategy *s)
{
    struct ddp *d = s->impl;
    if (!d) return;
    sb_dp_sync_destroy(d->sync);
    sb_replica_destroy(d->replica);
    sb_grid_destroy(d->grid);
    free(d);
}

static sb_status ddp_init(struct sb_strategy *s)
{
    struct ddp *d = calloc(1, sizeof *d);
    if (!d) return sb_error(SB_ERR_NOMEM, "ddp: out of memory");
    s->impl = d;
    const struct sb_config *cfg = s->env->cfg;
    /* Before the replica: on cuda it selects this rank's GPU for the thread. */
    struct sb_comm *world = NULL;
    SB_TRY(sb_comm_world_create(cfg, s->env->job, s->env->placement->device[0], &world));
    SB_TRY(sb_grid_adopt(world, &d->grid));
    d->comm = d->grid->dp_comm;
    SB_TRY(sb_replica_create(s->env, 1, &d->replica));
    s->replica = d->replica;
    s->comms[s->n_comms++] = d->comm;
    s->world = d->comm;
    /* On GPUs the host clocks see issue times (the nccl wait does not
     * block the host), so comm is the compute stream's span from the end of
     * backward to the optimizer, timed by events (replica.h). */
    d->replica->device_comm = sb_replica_on_device(d->replica);
    struct sb_model *m = d->replica->model;
    long steps = (long)cfg->epochs * (s->env->data->train.n / sb_config_global_batch(cfg));
    if (cfg->max_steps && cfg->max_steps < steps) steps = cfg->max_steps;
    struct sb_dp_sync_cfg sc = {
        .bucket_mb = opts(cfg)->bucket_mb,
        .overlap = opts(cfg)->overlap,
        .device_comm = d->replica->device_comm,
        .run = cfg,
        .host_memory = s->env->be->host_memory,
        .last_step = steps - 1,
    };
    SB_TRY(sb_dp_sync_create(d->comm, m, sb_grad_range_whole(m), &sc, &d->sync));
    return sb_comm_broadcast(d->comm, m->params, m->n_params, 0);
}

static sb_status ddp_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                          struct sb_step_result *out)
{
    struct ddp *d = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    const int32_t *mine = global_idx + (size_t)d->comm->rank * cfg->batch;
    /* Local SGD: this replica's own mean gradient and its own step. */
    int local = sb_dp_sync_begin(d->sync, step) == SB_DP_SYNC_LOCAL;
    SB_TRY(sb_replica_gradients(d->replica, mine, cfg->batch,
                                local ? cfg->batch : sb_config_global_batch(cfg),
                                sb_dp_sync_ready_fn(d->sync), d->sync, out));
    SB_TRY(sb_dp_sync_finish(d->sync, out));
    SB_TRY(sb_replica_update(d->replica, d->replica->model->grads, out));
    return sb_dp_sync_after_local_update(d->sync, out);
}

static sb_status ddp_evaluate(struct sb_strategy *s, double *accuracy)
{
    /* Replicas are identical: each rank scores a shard of the test set. */
    struct ddp *d = s->impl;
    int n = s->env->data->test.n, first, count;
    sb_split_range(n, d->comm->size, d->comm->rank, &first, &count);
    if (!sb_dp_sync_in_sync(d->sync)) {
        /* Local SGD between averagings: the replicas differ, so rank 0
         * scores its own model on the whole test set. */
        first = 0;
        count = d->comm->rank == 0 ? n : 0;
    }
    long correct = 0;
    SB_TRY(sb_replica_evaluate(d->replica, first, count, &correct));
    double total = (double)correct;
    SB_TRY(sb_comm_allreduce_f64(d->comm, &total, 1));
    *accuracy = total / n;
    return SB_OK;
}

/* The bucket plan, overlap, the hook's keys and the hidden comm
 * (sb_dp_sync_describe). */
static void ddp_describe(const struct sb_strategy *s, long measured_steps,
                         struct sb_strategy_details *det)
{
    const struct ddp *d = s->impl;
    sb_dp_sync_describe(d->sync, measured_steps, det);
}

/* ddp's buckets for the model: the run's plan as its describe stated it
 * (bucket_bytes, when all bucket_count are listed), else one bucket of the
 * whole buffer; stratbench predict's: the measured run's list, else M split
 * evenly into buckets of at most --bucket-mb's default (PyTorch's 25 MiB).
 * Returns the count (<= cap). */
static int model_buckets(const struct sb_comm_model_query *q, double *out, int cap)
{
    if (!q->cfg) {
        if (q->bucket_bytes && q->n_buckets > 0 && q->n_buckets <= cap) {
            for (int b = 0; b < q->n_buckets; b++) out[b] = q->bucket_bytes[b];
            return q->n_buckets;
        }
        int n = (int)ceil(q->bytes / (ddp_options[0].def * 1048576.0));
        if (n > cap) n = cap;
        if (n < 1) n = 1;
        for (int b = 0; b < n; b++) out[b] = q->bytes / n;
        return n;
    }
    const struct sb_strategy_details *d = q->details;
    int listed = -1, count = -1;
    for (int i = 0; d && i < d->n && i < SB_DETAILS_MAX; i++) {
        if (strcmp(d->item[i].key, "bucket_count") == 0 && d->item[i].count > 0)
            count = (int)d->item[i].values[0];
        if (strcmp(d->item[i].key, "bucket_bytes") == 0) listed = i;
    }
    if (listed >= 0 && d->item[listed].count == count && count <= cap && count > 0) {
        for (int b = 0; b < count; b++) out[b] = d->item[listed].values[b];
        return count;
    }
    out[0] = q->bytes;
    return 1;
}

/* One row of the model: the buckets all-reduced by `algo` as they become
 * ready, overlapping backward when `overlap`; a ring behind one in flight
 * joins it (sb_bucket_allreduce_cost). */
static void model_row(const struct sb_comm_model_query *q, enum sb_allreduce_algo algo,
                      const double *bytes, int nb, int overlap, struct sb_comm_model_row *row)
{
    double times[SB_DETAIL_VALUES_MAX];
    struct sb_bucket_cost c;
    sb_bucket_allreduce_cost(&q->link, algo, q->replicas, bytes, nb,
                               overlap ? q->backward_s : 0.0, times, &c);
    int ring = c.by_algo[SB_ALLREDUCE_RING], doubling = c.by_algo[SB_ALLREDUCE_RECURSIVE_DOUBLING];
    *row = (struct sb_comm_model_row){
        .variant = algo == SB_ALLREDUCE_LIBRARY ? "binomial"
                   : ring && doubling           ? "ring+doubling"
                   : ring                       ? "ring"
                                                : "recursive-doubling",
        .formula_name = sb_cost_allreduce_formula_name(c.largest),
        .formula = sb_cost_allreduce_formula(c.largest),
        .comm_s = c.comm_s,
        .exposed_s = c.exposed_s,
    };
    snprintf(row->legend, sizeof row->legend,
             "ddp ring 2(n-1)(a + M/(nB)) (2a + 2(n-1)M/(nB) behind one in flight), "
             "recursive doubling lg n (a + M/B), binomial "
             "2 ceil(lg n)(a + M/B), %d bucket%s, %s;", nb, nb == 1 ? "" : "s",
             overlap ? "overlap bound" : "no overlap");
}

/* The comm key wire_bytes_per_step that the run's describe stated
 * (strategies/shared/grad_sync.h), or 0. */
static double wire_bytes_stated(const struct sb_strategy_details *d)
{
    for (int i = 0; d && i < d->n_comm && i < SB_DETAILS_MAX; i++)
        if (strcmp(d->comm[i].key, "wire_bytes_per_step") == 0 && isfinite(d->comm[i].value))
            return d->comm[i].value;
    return 0.0;
}

/* The run: its buckets, each by --allreduce's algorithm (auto: by size;
 * mpi: Open MPI's binomial reduce + broadcast). predict: --allreduce auto
 * and mpi. Both bounded by the overlap with backward (sb_bucket_exposed_s).
 * The run's row uses the wire bytes of --grad-compression (fp16/bf16: half
 * of each bucket; powersgd: the stated wire bytes per step as three
 * all-reduces), which run after backward, and local SGD's one all-reduce
 * of the parameters every H steps (per step: 1/H of it). */
static int ddp_comm_model(const struct sb_comm_model_query *q, struct sb_comm_model_row *rows,
                          int cap)
{
    double bytes[SB_DETAIL_VALUES_MAX];
    int nb = model_buckets(q, bytes, SB_DETAIL_VALUES_MAX);
    if (q->cfg) {
        enum sb_allreduce_algo a = SB_ALLREDUCE_AUTO;
        if (q->cfg->allreduce[0]) sb_allreduce_algo_parse(q->cfg->allreduce, &a);
        /* The hierarchical all-reduce's time needs the hosts' two links,
         * which one probed link does not give: no row (comm.model null). */
        if (cap < 1 || a == SB_ALLREDUCE_HIERARCHICAL) return 0;
        int overlap = opts(q->cfg)->overlap, local_h = q->cfg->local_sgd;
        double wire = wire_bytes_stated(q->details);
        if (sb_config_grad_wire16(q->cfg, NULL)) { /* compression, or --precision bf16|fp16 */
            for (int b = 0; b < nb; b++) bytes[b] /= 2; /* the 16-bit wire */
            overlap = 0;
        } else if (strcmp(q->cfg->grad_compression, "powersgd") == 0 && wire > 0) {
            /* Three all-reduces (uncompressed tensors, P, Q) of the wire's bytes,
             * modelled as equal thirds, after backward. */
            nb = 3;
            for (int b = 0; b < nb; b++) bytes[b] = wire / 3;
            overlap = 0;
        }
        model_row(q, a, bytes, nb, local_h > 0 ? 0 : overlap, &rows[0]);
        for (int b = 0; b < nb; b++) rows[0].wire_bytes += bytes[b];
        if (local_h > 0) { /* one all-reduce of the parameters every H steps */
            rows[0].comm_s /= local_h;
            rows[0].exposed_s /= local_h;
        }
        return 1;
    }
    const enum sb_allreduce_algo algos[] = {SB_ALLREDUCE_AUTO, SB_ALLREDUCE_LIBRARY};
    int k = 0;
    for (int i = 0; i < 2 && k < cap; i++)
        model_row(q, algos[i], bytes, nb, q->overlap, &rows[k++]);
    return k;
}

/* One replica per rank; none to compare after a local SGD step that did
 * not average (the replicas differ by design until the next averaging). */
static float *ddp_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct ddp *d = s->impl;
    *n = sb_dp_sync_in_sync(d->sync) ? 1 : 0;
    if (*n == 0) return NULL;
    return i == 0 ? d->replica->model->params : NULL;
}

/* The strategy's own counters beside its communicators': the hook's
 * logical bytes (strategies/shared/grad_sync.h), zeroed at the end of warm-up. */
static void ddp_reset_counters(struct sb_strategy *s)
{
    struct ddp *d = s->impl;
    sb_dp_sync_reset_counters(d->sync);
}

/* ddp's ops; the registry's "hierarchical" is the same strategy with the
 * hierarchical all-reduce (src/comm/mpi_hier.c), without a comm_model:
 * the α–β model of that all-reduce needs two links (comm.model null, and
 * no rows in stratbench predict, which would repeat ddp's). */
#define DDP_OPS                                 \
    .uses_mpi = 1,                              \
    .options = ddp_options,                     \
    .options_size = sizeof(struct ddp_opts),    \
    .init = ddp_init,                           \
    .step = ddp_step,                           \
    .evaluate = ddp_evaluate,                   \
    .describe = ddp_describe,                   \
    .destroy = ddp_destroy,                     \
    .replica_params = ddp_replica_params,       \
    .comm_keys = sb_grad_sync_comm_keys,        \
    .reset_counters = ddp_reset_counters,       \
    .grad_sync = 1, /* 16-bit: the --allreduce algorithm's (mpi_allreduce16.h) */ \
    .predict_methods = 1

const struct sb_strategy_ops sb_strategy_ddp = {
    .name = "ddp",
    .summary = "one MPI rank per replica, bucketed all-reduce overlapping backward (PyTorch DDP)",
    .comm_model = ddp_comm_model,
    DDP_OPS,
};

const struct sb_strategy_ops sb_strategy_hierarchical = {
    .name = "hierarchical",
    .summary = "ddp with --allreduce hierarchical: within each host, then across hosts (Horovod)",
    .allreduce = SB_ALLREDUCE_HIERARCHICAL,
    DDP_OPS,
};
