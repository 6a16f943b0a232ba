/* Strategy "zero": sharded data parallelism (ZeRO, Rajbhandari et al., SC
 * 2020; PyTorch FSDP), one MPI rank per replica, launched like ddp.
 *
 * The sharding is strategies/shared/zero_sync.h over the dp communicator
 * of a 1-deep grid (comm/grid.h: sb_grid_adopt, the world itself) and the
 * whole model: stage 1 shards the optimizer state, stage 2 also the
 * gradients (reduce-scatters overlapping backward), stage 3 also the
 * parameters (layers gathered by the layer hook).
 * Communication per rank per step: 2Ψ(n-1)/n floats (stages 1-2: one
 * reduce-scatter and one all-gather of Ψ), 3Ψ(n-1)/n (stage 3: two
 * all-gathers). Derivation and the memory formula: docs/zero.md.
 * CPU only for now (zero_validate): staged has no reduce-scatter or
 * all-gather, and nccl's take blocks of one size while the shards differ
 * by one float (docs/zero.md). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/cost_model.h"
#include "comm/grid.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/precision.h"
#include "strategies/shared/replica.h"
#include "strategies/shared/zero_sync.h"

/* zero's own flags (cfg->strategy_opts). */
struct zero_opts {
    int stage;        /* --zero-stage 1 | 2 | 3 */
    double bucket_mb; /* --bucket-mb: stages 1-2 bucket size in MiB */
    int overlap;      /* stage 2: reduce-scatter during backward (--no-overlap: 0) */
};
_Static_assert(sizeof(struct zero_opts) <= SB_STRATEGY_OPTS_BYTES, "zero options");

static const struct zero_opts *opts(const struct sb_config *cfg)
{
    return (const struct zero_opts *)(const void *)cfg->strategy_opts;
}

static const struct sb_strategy_option zero_options[] = {
    {"zero-stage", "S", SB_OPTION_INT, offsetof(struct zero_opts, stage), 1, 3, 3, 0,
     "zero_stage", 0, "shard optimizer state (1), + gradients (2), + parameters (3)", NULL},
    {"bucket-mb", "X", SB_OPTION_NUMBER, offsetof(struct zero_opts, bucket_mb), 1e-6, 1e6, 25.0,
     0, "bucket_mb", 0, "gradient bucket size in MiB", NULL},
    {"no-overlap", NULL, SB_OPTION_SWITCH, offsetof(struct zero_opts, overlap), 0, 0, 1, 0,
     "overlap", 1, "all-reduce after backward instead of during it", NULL},
    {0},
};

static const char *const zero_comm_keys[] = {"sent_bytes_per_rank_per_step",
                                             "formula_sent_bytes_per_rank_per_step", NULL};

struct zero {
    struct sb_replica *replica;
    struct sb_grid *grid;       /* 1-deep: dp = the world (sb_grid_adopt) */
    struct sb_comm *comm;       /* grid->dp_comm (the grid's), counted */
    struct sb_zero_sync *sync;  /* units, shards and gathers over comm */
    int stage, size, rank;
    int half;                   /* --grad-compression fp16|bf16: 16-bit reduce-scatters */
    int param_half;             /* --precision bf16|fp16: 16-bit parameter all-gathers */
};

/* Whether the run reduce-scatters over a 16-bit wire (--grad-compression
 * fp16 or bf16, or --precision bf16|fp16: sb_config_grad_wire16). */
static int half_wire(const struct sb_config *cfg) { return sb_config_grad_wire16(cfg, NULL); }

/* The 16-bit wire's format (meaningful where half_wire). */
static enum sb_half_format wire_fmt(const struct sb_config *cfg)
{
    int fmt = SB_HALF_FP16;
    sb_config_grad_wire16(cfg, &fmt);
    return (enum sb_half_format)fmt;
}

/* --grad-compression fp16|bf16 compresses the reduce-scatter; PowerSGD
 * and local SGD have no reduce-scatter to compress (refused). */
static sb_status zero_validate(const struct sb_config *cfg)
{
    if (!cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--strategy zero: runs on --device cpu only (its GPU "
                        "path is not written yet; nccl has the reduce-scatter and all-gather)");
    if (strcmp(cfg->grad_compression, "powersgd") == 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression powersgd: not with --strategy zero "
                        "(PowerSGD all-reduces its low-rank factors P and Q, which no rank's "
                        "shard of a reduce-scatter can carry; use fp16 or bf16)");
    if (cfg->local_sgd > 0)
        return sb_error(SB_ERR_USAGE, "--local-sgd: not with --strategy zero (local SGD has no "
                        "per-step gradient sync, and each rank holds only its shard of the "
                        "optimizer state to step with)");
    return SB_OK;
}

static void zero_destroy(struct sb_strategy *s)
{
    struct zero *z = s->impl;
    if (!z) return;
    sb_zero_sync_destroy(z->sync);
    sb_replica_destroy(z->replica);
    sb_grid_destroy(z->grid);
    free(z);
}

static sb_status zero_init(struct sb_strategy *s)
{
    struct zero *z = calloc(1, sizeof *z);
    if (!z) return sb_error(SB_ERR_NOMEM, "zero: out of memory");
    s->impl = z;
    const struct sb_config *cfg = s->env->cfg;
    z->stage = opts(cfg)->stage;
    z->half = half_wire(cfg);
    struct sb_comm *world = NULL;
    SB_TRY(sb_comm_world_create(cfg, s->env->job, s->env->placement->device[0], &world));
    SB_TRY(sb_grid_adopt(world, &z->grid));
    z->comm = z->grid->dp_comm;
    z->size = z->comm->size;
    z->rank = z->comm->rank;
    SB_TRY(sb_replica_create(s->env, 0, &z->replica));
    s->replica = z->replica;
    s->comms[s->n_comms++] = z->comm; /* the piece's quiet duplicate is uncounted by design */
    s->world = z->comm;
    struct sb_model *m = z->replica->model;
    SB_TRY(sb_comm_broadcast(z->comm, m->params, m->n_params, 0));
    int param_fmt = SB_HALF_BF16;
    z->param_half = sb_precision_half(cfg, &param_fmt) && z->comm->ops->allgather16;
    struct sb_zero_sync_cfg zc = {
        .stage = z->stage,
        .bucket_mb = opts(cfg)->bucket_mb,
        .overlap = opts(cfg)->overlap,
        .half = z->half,
        .fmt = wire_fmt(cfg),
        .param_half = z->param_half,
        .param_fmt = (enum sb_half_format)param_fmt,
        .run = cfg,
    };
    return sb_zero_sync_create(z->comm, m, s->env->be, sb_grad_range_whole(m), &zc, &z->sync);
}

static sb_status zero_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                           struct sb_step_result *out)
{
    (void)step;
    struct zero *z = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    sb_zero_sync_begin(z->sync);
    SB_TRY(sb_replica_gradients(z->replica, global_idx + (size_t)z->rank * cfg->batch,
                                cfg->batch, sb_config_global_batch(cfg),
                                sb_zero_sync_ready_fn(z->sync), z->sync, out));
    SB_TRY(sb_zero_sync_finish(z->sync, out));
    int skip = 0; /* fp16: every rank skips the same step */
    SB_TRY(sb_zero_sync_unscale(z->sync, &z->replica->scaler, &skip));
    return skip ? SB_OK : sb_zero_sync_update(z->sync, out);
}

/* Replicas agree (stages 1-2 hold all parameters): each rank scores a
 * slice of the test set, in the same number of forward passes on every
 * rank (stage 3's hook gathers layers in each, over the piece's quiet
 * communicator, so every rank must run as many). */
static sb_status zero_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct zero *z = s->impl;
    int n = s->env->data->test.n, first, count, most_first, most;
    int eb = s->env->cfg->eval_batch;
    sb_split_range(n, z->size, z->rank, &first, &count);
    sb_split_range(n, z->size, 0, &most_first, &most);
    int passes = (most + eb - 1) / eb;
    long correct = 0;
    sb_status st = SB_OK;
    sb_zero_sync_quiet(z->sync, 1);
    for (int p = 0; p < passes && !st; p++) {
        int pf, pc;
        long c = 0;
        sb_split_range(count, passes, p, &pf, &pc);
        st = sb_replica_evaluate(z->replica, first + pf, pc, &c);
        sb_status rel = sb_zero_sync_release(z->sync);
        if (!st) st = rel;
        correct += c;
    }
    sb_zero_sync_quiet(z->sync, 0);
    SB_TRY(st);
    double total = (double)correct;
    SB_TRY(sb_comm_allreduce_f64(z->comm, &total, 1));
    *accuracy = total / n;
    return SB_OK;
}

/* Stage 3: gathers every unit into m->params over the quiet
 * communicator (collective), copies them out on rank 0, and frees them. */
static sb_status zero_read_params(struct sb_strategy *s, float *host)
{
    struct zero *z = s->impl;
    struct sb_model *m = z->replica->model;
    SB_TRY(sb_zero_sync_gather_all(z->sync));
    sb_status st = s->env->be->download(host, m->params, m->n_params * sizeof(float));
    sb_status rel = sb_zero_sync_release(z->sync);
    return st ? st : rel;
}

/* Stages 1-2: every rank holds all parameters, identical after the
 * all-gather; stage 3: none holds them all (nothing to compare). */
static float *zero_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct zero *z = s->impl;
    *n = z->stage == 3 ? 0 : 1;
    return i < *n ? z->replica->model->params : NULL;
}

/* ZeRO's accounting (docs/zero.md, docs/precision.md): parameters bΨ,
 * gradients bΨ (b = 4 fp32, 2 bf16/fp16), optimizer state KΨ with K = 4s
 * (s: sb_optimizer_state_floats, the master weights included); stage 1 divides the optimizer state by n,
 * stage 2 also the gradients, stage 3 also the parameters. */
static void zero_model_state_formula(const struct sb_config *cfg, double n_params, int server,
                                     struct sb_model_state *out)
{
    (void)server;
    int stage = opts(cfg)->stage;
    double n = cfg->replicas, p = sb_precision_value_bytes(cfg) * n_params;
    out->param_bytes = stage >= 3 ? p / n : p;
    out->grad_bytes = stage >= 2 ? p / n : p;
    out->optimizer_bytes = 4.0 * sb_optimizer_state_floats(cfg) * n_params / n;
}

/* Bytes per rank per step that the formula says the collectives send:
 * (stage 3 ? 3 : 2) Ψ (n-1)/n floats (docs/zero.md), the reduce-scatter's
 * Ψ at 2 bytes a value under --grad-compression fp16|bf16 or --precision
 * bf16|fp16, the all-gathers' at 2 under --precision bf16|fp16. */
static double formula_sent_bytes(const struct zero *z, double n_params)
{
    double n = z->size, gathers = z->stage == 3 ? 2.0 : 1.0;
    return ((z->half ? 2.0 : 4.0) + gathers * (z->param_half ? 2.0 : 4.0)) * n_params *
           (n - 1.0) / n;
}

/* What it allocated: stage 1 full parameters and gradients plus the
 * reduce-scatter's shard; stage 2 full parameters and the gradient shard;
 * stage 3 the shards only. Communication buffers: stage 1 the
 * reduce-scatter's receive shard; stage 2 the largest bucket's full
 * gradients (resident until its reduce-scatter completes); stage 3 the
 * two largest gathered layers (current and prefetched) and one layer's
 * full gradients. The workload's flat buffers are larger in address
 * space only (freed pages are not resident). */
static int zero_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    const struct zero *z = s->impl;
    if (cap < 1) return 0;
    const struct sb_model *m = z->replica->model;
    sb_memory_entry_of_replica(s, z->replica, z->rank, out);
    double shard = (double)sb_zero_sync_shard_floats(z->sync) * sizeof(float);
    double big[2] = {0, 0};
    for (int i = 0; i < sb_zero_sync_units(z->sync); i++) {
        double b = (double)sb_zero_sync_unit_floats(z->sync, i) * sizeof(float);
        if (b > big[0]) {
            big[1] = big[0];
            big[0] = b;
        } else if (b > big[1]) {
            big[1] = b;
        }
    }
    out->held.param_bytes = z->stage >= 3 ? shard : (double)m->n_params * sizeof(float);
    out->held.grad_bytes = z->stage >= 2 ? shard : (double)m->n_params * sizeof(float);
    out->held.optimizer_bytes = (double)sb_zero_sync_optimizer_bytes(z->sync);
    out->comm_bytes = z->stage == 1 ? shard : z->stage == 2 ? big[0] : big[0] + big[1] + big[0];
    return 1;
}

/* The stage, units, and the bytes per rank per step: sent as counted
 * (every reduce-scatter and all-gather call counts its whole buffer, as
 * nccl-tests does; a rank sends (n-1)/n of it) beside the formula's. */
static void zero_describe(const struct sb_strategy *s, long measured_steps,
                          struct sb_strategy_details *d)
{
    const struct zero *z = s->impl;
    const struct sb_comm_counter *k = z->comm->counters;
    double n = z->size;
    double counted = k[SB_COMM_REDUCE_SCATTER].bytes + k[SB_COMM_ALLGATHER].bytes;
    sb_details_set_value(d, 1, "sent_bytes_per_rank_per_step",
                         measured_steps > 0 ? counted * (n - 1.0) / n / (double)measured_steps
                                            : NAN,
                         0);
    sb_details_set_value(d, 1, "formula_sent_bytes_per_rank_per_step",
                         formula_sent_bytes(z, (double)z->replica->model->n_params), 0);
    double v = z->stage;
    sb_details_add(d, "zero_stage", 0, &v, 1);
    v = sb_zero_sync_units(z->sync);
    sb_details_add(d, "units", 0, &v, 1);
    v = (double)sb_zero_sync_shard_floats(z->sync);
    sb_details_add(d, "shard_params", 0, &v, 1);
}

/* One row of the α–β model: `stage`'s collectives as the mpi communicator
 * runs them (src/comm/cost_model.h): a reduce-scatter and one all-gather
 * (stages 1-2) or two (stage 3), each stratbench's ring of n-1 steps over
 * M in u units in flight together (stage 3 prefetches the next layer's
 * gather and reduce-scatters each layer as backward makes it; stages 1-2
 * start every unit's all-gather at once): α for each ring step and once
 * more for each unit after the first, every byte once
 * (sb_cost_reduce_scatter_s): (1 + g)((n-2+u)α + (n-1)M/(nB)), g the
 * gathers. A run with --grad-compression fp16/bf16 (q->cfg)
 * reduce-scatters 2-byte words: its reduce-scatter moves M/2 (the
 * conversions are the compress phase, not comm); the gathers stay fp32,
 * except under --precision bf16|fp16, where they gather the 16-bit
 * parameters: M/2 each too (formula row 2).
 * Overlap (stage 2's reduce-scatters during
 * backward, stage 3's prefetch behind compute) is not modelled: exposed =
 * comm (NaN). The report compares comm_s with the measured comm phase
 * (measured_comm_ms): the union of the step's reduce-scatter and
 * all-gather spans, stage 3's gathers in forward and backward included
 * (zero_sync.c, step_phases). */
static void model_row(const struct sb_comm_model_query *q, int stage, int units,
                      struct sb_comm_model_row *row)
{
    static const char *const variants[] = {"", "stage-1", "stage-2", "stage-3"};
    static const char *const formulas[3][2] = {
        {"2((n-2+u) alpha + (n-1)M/(n B))", "3((n-2+u) alpha + (n-1)M/(n B))"},
        {"(n-2+u) alpha + (n-1)M/(2n B) + (n-2+u) alpha + (n-1)M/(n B)",
         "(n-2+u) alpha + (n-1)M/(2n B) + 2((n-2+u) alpha + (n-1)M/(n B))"},
        {"2((n-2+u) alpha + (n-1)M/(2n B))", "3((n-2+u) alpha + (n-1)M/(2n B))"}};
    int n = q->replicas, gathers = stage == 3 ? 2 : 1;
    int half = q->cfg && half_wire(q->cfg);
    if (half && sb_precision_half(q->cfg, NULL)) half = 2; /* the parameters are 16-bit too */
    double comm = sb_cost_reduce_scatter_s(&q->link, n, half ? q->bytes / 2 : q->bytes, units) +
                  gathers * sb_cost_allgather_s(&q->link, n, half == 2 ? q->bytes / 2 : q->bytes,
                                                units);
    *row = (struct sb_comm_model_row){
        .variant = variants[stage],
        .formula_name = gathers == 2 ? "zero-3" : "zero-2",
        .formula = formulas[half][gathers - 1],
        .comm_s = comm,
        .wire_bytes = half ? q->bytes / 2 : q->bytes, /* the reduce-scatter's M */
        .exposed_s = NAN,
    };
    snprintf(row->legend, sizeof row->legend,
             "zero reduce-scatter%s and all-gather (rings) (n-2+u)a + (n-1)M/(nB) each, "
             "the all-gather x2 in stage 3; u = %d unit%s in flight together; no overlap;",
             half == 2 ? " and all-gathers (16-bit: M/2)" : half ? " (16-bit: M/2)" : "", units, units == 1 ? "" : "s");
}

/* The run: its stage and units (describe's "units"); predict: stages 1
 * and 2 with the measured run's buckets (or M in 25 MiB buckets) as units,
 * stage 3 with the model's layers (q->layers, as the run's hook gathers
 * them; the buckets when predict could not build the model). */
static int zero_comm_model(const struct sb_comm_model_query *q, struct sb_comm_model_row *rows,
                           int cap)
{
    int units = 0;
    if (q->cfg) {
        for (int i = 0; q->details && i < q->details->n && i < SB_DETAILS_MAX; i++)
            if (strcmp(q->details->item[i].key, "units") == 0 && q->details->item[i].count > 0)
                units = (int)q->details->item[i].values[0];
        if (cap < 1) return 0;
        model_row(q, opts(q->cfg)->stage, units > 0 ? units : 1, &rows[0]);
        return 1;
    }
    units = q->bucket_bytes && q->n_buckets > 0
                ? q->n_buckets
                : (int)ceil(q->bytes / (zero_options[1].def * 1048576.0));
    if (units < 1) units = 1;
    int k = 0;
    for (int stage = 1; stage <= 3 && k < cap; stage++)
        model_row(q, stage, stage == 3 && q->layers > 0 ? q->layers : units, &rows[k++]);
    return k;
}

/* The layout: D x 1 x 1 at --zero-stage. */
static void zero_layout(const struct sb_config *cfg, struct sb_layout *out)
{
    out->zero_stage = opts(cfg)->stage;
}

const struct sb_strategy_ops sb_strategy_zero = {
    .name = "zero",
    .summary = "one MPI rank per replica, optimizer state (1), gradients (2) and parameters "
               "(3) sharded (ZeRO, FSDP)",
    .uses_mpi = 1,
    .options = zero_options,
    .options_size = sizeof(struct zero_opts),
    .comm_keys = zero_comm_keys,
    .grad_sync = 1, /* fp16/bf16 only (zero_validate): the reduce-scatter's wire */
    .validate = zero_validate,
    .init = zero_init,
    .step = zero_step,
    .evaluate = zero_evaluate,
    .read_params = zero_read_params,
    .describe = zero_describe,
    .comm_model = zero_comm_model,
    .replica_params = zero_replica_params,
    .model_state_formula = zero_model_state_formula,
    .memory = zero_memory,
    .destroy = zero_destroy,
    .layout = zero_layout,
};
