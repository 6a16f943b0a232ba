/* Strategy "pipeline": pipeline parallelism. The model's layers are cut
 * into P stages (--stages), one MPI rank each (interleaved: V chunks per
 * rank, --chunks), and each step's batch into M micro-batches
 * (--microbatches) that stream through the stages in the order of a
 * schedule (--schedule gpipe | 1f1b | interleaved): each rank walks its
 * list of actions from strategies/shared/schedule.h, running the
 * workload's part ops on activation slots and sending activations forward
 * and their gradients backward over the grid's pp communicator. With
 * --replicas D the pipeline is replicated D times (D*P ranks, Megatron-LM's
 * rank order: comm/grid.h) and each stage's gradients are all-reduced over
 * the grid's dp communicator with strategies/shared/dp_sync.h.
 *
 * Every stage accumulates its micro-batches' gradients in micro-batch
 * order (every schedule here runs a chunk's backwards in that order), so
 * with D = 1 the parameters equal `single --microbatches M` byte for byte.
 *
 * Timing (docs/pipeline.md): a blocking receive's wait is split at the
 * moment its sender posted the message (the sender's clock, aligned to rank
 * 0's): before it the stage idled for another stage's compute, the bubble
 * phase; after it, the transfer, point-to-point wait (the comm phase, with
 * issuing sends and completing them at the end of the step). The
 * strategy owns its wait (strategy.h owns_wait): its stages idle for each
 * other by design, which is its bubble, not a straggler's wait. The
 * exchange of the senders' post times and the stages' timings runs after
 * each step (after_step), outside its time: measurement, not training
 * (stats_collectives_ms says how long it took). The same exchange says
 * where the job's step ended (the last rank's end); a rank that ended
 * before it waited that long at the step's end, its wait phase, and its
 * step lasts until then. zb-h1 runs each backward
 * as its input half B and, later, its weight half W (the workload's
 * backward_input_part and backward_weight_part); a workload without them
 * is refused (--schedule). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/cost_model.h"
#include "comm/grid.h"
#include "core/clock.h"
#include "job/gather.h"
#include "strategies/shared/dp_sync.h"
#include "strategies/shared/pipeline_exec.h"
#include "strategies/shared/pipeline_plan.h"
#include "strategies/shared/pipeline_stats.h"
#include "strategies/shared/replica.h"
#include "strategies/shared/schedule.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/shared/schedule_sim.h"
#include "strategies/shared/tp_shards.h"

enum { PARTITION_UNIFORM, PARTITION_PARAMS };

/* pipeline's own flags (cfg->strategy_opts). */
struct pipeline_opts {
    int stages;         /* --stages P */
    int microbatches;   /* --microbatches M */
    int schedule;       /* --schedule: enum sb_pp_kind */
    int chunks;         /* --chunks V; 0: not given */
    int partition;      /* --partition uniform | params */
    int print_schedule; /* --print-schedule */
    int tp;             /* --tp T: each stage's layers split over T ranks (Megatron-LM) */
    int rank_order;     /* --rank-order: enum sb_rank_order */
    int zero_stage;     /* --zero-stage: 0 only (see check_shape) */
    int sequence_parallel; /* --sequence-parallel: each stage's tp shard keeps the residual
                            * stream sharded along the sequence (Korthikanti et al. 2022) */
};
_Static_assert(sizeof(struct pipeline_opts) <= SB_STRATEGY_OPTS_BYTES, "pipeline options");

static const struct pipeline_opts *opts(const struct sb_config *cfg)
{
    return (const struct pipeline_opts *)(const void *)cfg->strategy_opts;
}

static const char *const schedule_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", NULL};
static const char *const partition_names[] = {"uniform", "params", NULL};
static const char *const rank_order_names[] = {"tp-dp-pp", "tp-pp-dp", NULL};
_Static_assert(SB_RANK_ORDER_TP_DP_PP == 0 && SB_RANK_ORDER_TP_PP_DP == 1,
               "rank_order_names follows enum sb_rank_order");
_Static_assert(SB_PP_GPIPE == 0 && SB_PP_1F1B == 1 && SB_PP_INTERLEAVED == 2 && SB_PP_ZBH1 == 3,
               "schedule_names follows enum sb_pp_kind");

static const struct sb_strategy_option pipeline_options[] = {
    {"stages", "P", SB_OPTION_INT, offsetof(struct pipeline_opts, stages), 1, 1024, 2, 0,
     "stages", 0, "pipeline stages, one rank each (D*P ranks)", NULL},
    {"microbatches", "M", SB_OPTION_INT, offsetof(struct pipeline_opts, microbatches), 1, 4096,
     1, 0, "microbatches", 0, "micro-batches per step (the batch is cut into M)", NULL},
    {"schedule", "S", SB_OPTION_CHOICE, offsetof(struct pipeline_opts, schedule), 0, 0, 1, 0,
     NULL, 0, "gpipe | 1f1b | interleaved | zb-h1 (docs/pipeline.md)", schedule_names},
    {"chunks", "V", SB_OPTION_INT, offsetof(struct pipeline_opts, chunks), 1, 64, 0, 0,
     "chunks", 0, "model chunks per stage (interleaved only; default 2)", NULL},
    {"partition", "H", SB_OPTION_CHOICE, offsetof(struct pipeline_opts, partition), 0, 0, 0, 0,
     NULL, 0, "uniform (layers) | params (balance parameters)", partition_names},
    {"print-schedule", NULL, SB_OPTION_SWITCH, offsetof(struct pipeline_opts, print_schedule),
     0, 0, 0, 1, NULL, 0, "print the rank x slot grid before the run", NULL},
    {"tp", "T", SB_OPTION_INT, offsetof(struct pipeline_opts, tp), 1, 64, 1, 0, NULL, 0,
     "ranks per tp group (Megatron-LM; D*T*P ranks); default: pipeline 1, tensor 2", NULL},
    {"rank-order", "O", SB_OPTION_CHOICE, offsetof(struct pipeline_opts, rank_order), 0, 0, 0,
     0, NULL, 0, "tp-dp-pp (Megatron-LM's) | tp-pp-dp: the grid's rank order (comm/grid.h)",
     rank_order_names},
    {"zero-stage", "S", SB_OPTION_INT, offsetof(struct pipeline_opts, zero_stage), 0, 3, 0, 0,
     NULL, 0, "0: ddp's all-reduce over dp; 1: ZeRO stage 1 (2-3 refused, docs/layouts.md)",
     NULL},
    {"sequence-parallel", NULL, SB_OPTION_SWITCH,
     offsetof(struct pipeline_opts, sequence_parallel), 0, 0, 0, 1, NULL, 0,
     "shard the residual stream along the sequence (Korthikanti 2022)", NULL},
    {0},
};

/* first[0..n] for n virtual stages of `whole`: sb_pp_partition's cuts, and
 * with --tp > 1 every cut that falls on a row-parallel layer (inside a
 * column/row pair, whose hidden activations are split over the tp ranks;
 * not a transformer block, which holds its pairs) moved to the layer after it, so that every stage boundary carries a
 * whole activation. Errors: SB_ERR_USAGE when a moved cut leaves a stage
 * without layers. */
static sb_status plan_cuts(const struct sb_config *cfg, const struct sb_model *whole, int n,
                           int *first)
{
    sb_pp_partition(whole, n, opts(cfg)->partition == PARTITION_PARAMS, first);
    if (opts(cfg)->tp <= 1) return SB_OK;
    for (int b = 1; b < n; b++) {
        /* a layer with row-parallel tensors and no column-parallel one takes a
         * split input (the mlp's fc2); a transformer block holds its pairs
         * whole (column then row inside it) and takes the whole stream */
        const struct sb_layer_desc *L = &whole->layers[first[b]];
        int row = 0, column = 0;
        for (int i = L->first_tensor; i < L->first_tensor + L->n_tensors; i++) {
            row |= whole->tensors[i].tp_split == SB_TP_ROW;
            column |= whole->tensors[i].tp_split == SB_TP_COLUMN;
        }
        if (row && !column) first[b]++;
        if (first[b] <= first[b - 1] || first[b] >= first[n])
            return sb_error(SB_ERR_USAGE, "--stages: %d stages of %d layers with --tp %d leave a "
                            "stage without layers (a stage may not cut a column/row-parallel "
                            "pair); use fewer stages", n, first[n], opts(cfg)->tp);
    }
    return SB_OK;
}

/* Checks that the workload can build every one of the n virtual stages of
 * `whole` as the run will cut them (a run of layers in 2 slots: a workload
 * whose parts are whole models only refuses here, on every rank alike,
 * before any work), and with --tp that each stage's shard (the last tp
 * rank's, 1 sample) holds 1/T of every split tensor, and some layer is
 * split. Errors: SB_ERR_USAGE naming --tp or --stages; the workload's
 * (e.g. a part it cannot cut). */
static sb_status check_parts(const struct sb_config *cfg, const struct sb_model *whole, int n)
{
    int T = opts(cfg)->tp, split = 0, first[64 * 64 + 1];
    if (n > 64 * 64) return SB_OK; /* sb_pp_validate refuses it */
    SB_TRY(plan_cuts(cfg, whole, n, first));
    for (int v = 0; v < n; v++) {
        struct sb_part part = {first[v], first[v + 1] - first[v], T - 1, T, 2,
                               opts(cfg)->sequence_parallel, opts(cfg)->schedule == SB_PP_ZBH1, 0};
        struct sb_model *shard = NULL;
        SB_TRY(sb_workload_find(cfg->workload)->create_part(cfg, cfg->backend, 1, &part, &shard));
        sb_status st = T > 1 ? sb_tp_shard_check_even(shard, whole, T, &split) : SB_OK;
        shard->ops->destroy(shard);
        SB_TRY(st);
    }
    if (T > 1 && split == 0)
        return sb_error(SB_ERR_USAGE, "--tp: the %s model has no column/row-parallel layer to "
                        "split", cfg->workload);
    return SB_OK;
}

/* --sequence-parallel, as tensor checks it: the whole model `whole` has a
 * sequence (a layer of (tokens, width) activations) whose tokens divide by
 * T. Errors: SB_ERR_USAGE naming --sequence-parallel. */
static sb_status check_sequence(const struct sb_model *whole, const char *name, int T)
{
    int tokens = 0;
    for (int l = 0; l < whole->n_layers && !tokens; l++)
        if (whole->layers[l].in_shape[1] > 1) tokens = whole->layers[l].in_shape[0];
    if (!tokens)
        return sb_error(SB_ERR_USAGE, "--sequence-parallel: the %s model has no sequence to "
                        "shard (only a transformer's tokens)", name);
    if (tokens % T)
        return sb_error(SB_ERR_USAGE, "--sequence-parallel: the sequence of %d tokens (the "
                        "class token included) does not divide by --tp %d", tokens, T);
    return SB_OK;
}

/* Validates the flags against the model (its layers, whether it has part
 * ops) and fills *shape. Builds the whole model once to learn its layers. */
static sb_status check_shape(const struct sb_config *cfg, struct sb_pp_shape *shape,
                             int *n_layers)
{
    const struct pipeline_opts *o = opts(cfg);
    const struct sb_workload_ops *w = sb_workload_find(cfg->workload);
    if (!w) return sb_error(SB_ERR_USAGE, "--workload: unknown '%s'", cfg->workload);
    if (!w->create_part || !w->forward_part || !w->backward_part)
        return sb_error(SB_ERR_USAGE, "--workload: %s has no part ops, so --strategy pipeline "
                        "cannot cut it into stages", w->name);
    if (!cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--strategy pipeline: runs on --device cpu only (the "
                        "replica's device path has no split passes yet)");
    if (o->zero_stage >= 2)
        return sb_error(SB_ERR_USAGE, "--zero-stage: %d not with --strategy pipeline (stage %d "
                        "shards the %s over dp and would gather or reduce them once per "
                        "micro-batch: M times the traffic; docs/layouts.md)", o->zero_stage,
                        o->zero_stage, o->zero_stage == 2 ? "gradients" : "parameters");
    if (o->zero_stage == 1 && cfg->replicas < 2)
        return sb_error(SB_ERR_USAGE, "--zero-stage: 1 shards the optimizer state over "
                        "--replicas; with 1 replica there is nothing to shard");
    struct sb_model *m = NULL;
    SB_TRY(w->create(cfg, cfg->backend, 1, &m));
    *n_layers = m->n_layers;
    sb_status st = o->sequence_parallel ? check_sequence(m, w->name, o->tp) : SB_OK;
    if (!st) st = sb_pp_validate((enum sb_pp_kind)o->schedule, o->stages, o->microbatches,
                                  o->chunks, *n_layers,
                                  w->backward_input_part && w->backward_weight_part, shape);
    if (!st) st = check_parts(cfg, m, shape->stages * shape->chunks);
    m->ops->destroy(m);
    SB_TRY(st);
    if (cfg->batch % o->microbatches)
        return sb_error(SB_ERR_USAGE, "--microbatches: the batch of %d samples does not cut "
                        "into %d equal micro-batches", cfg->batch, o->microbatches);
    if (2L * o->microbatches * (o->stages * shape->chunks - 1) > 32768)
        return sb_error(SB_ERR_USAGE, "--microbatches: %d micro-batches over %d stages are "
                        "more messages per step than MPI's tags number", o->microbatches,
                        o->stages * shape->chunks);
    if (cfg->grad_compression[0] && strcmp(cfg->grad_compression, "none") != 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression: not with --strategy pipeline");
    if (cfg->local_sgd > 0)
        return sb_error(SB_ERR_USAGE, "--local-sgd: not with --strategy pipeline");
    return SB_OK;
}

static sb_status pipeline_validate(const struct sb_config *cfg)
{
    struct sb_pp_shape shape;
    int n_layers;
    return check_shape(cfg, &shape, &n_layers);
}

/* The widest of the n - 1 boundaries between the n virtual stages that
 * first[0..n] cut `whole` into: the out_floats per sample of the last
 * layer before each cut, the largest (0 for one stage). */
static size_t widest_boundary(const struct sb_model *whole, const int *first, int n)
{
    size_t widest = 0;
    for (int b = 1; b < n; b++)
        if (whole->layers[first[b] - 1].out_floats > widest)
            widest = whole->layers[first[b] - 1].out_floats;
    return widest;
}

/* The largest boundary message of cfg's run: mb x the widest boundary's
 * floats per sample x 4 bytes (mb = --batch / --microbatches; activations
 * forward and their gradients back are the same size), from the whole
 * model's layer table cut as pipeline_init cuts it. With
 * --sequence-parallel an upper bound (a shard's boundary may carry fewer
 * tokens). Builds the model on the host (as validate does). */
static sb_status pipeline_p2p_max_bytes(const struct sb_config *cfg, size_t *bytes)
{
    const struct pipeline_opts *o = opts(cfg);
    const struct sb_workload_ops *w = sb_workload_find(cfg->workload);
    *bytes = 0;
    if (!w) return sb_error(SB_ERR_USAGE, "--workload: unknown '%s'", cfg->workload);
    struct sb_model *m = NULL;
    SB_TRY(w->create(cfg, cfg->backend, 1, &m));
    struct sb_pp_shape shape;
    int first[64 * 64 + 1];
    sb_status st = sb_pp_validate((enum sb_pp_kind)o->schedule, o->stages, o->microbatches,
                                  o->chunks, m->n_layers,
                                  w->backward_input_part && w->backward_weight_part, &shape);
    int n = shape.stages * shape.chunks;
    if (!st && n > 64 * 64) st = sb_error(SB_ERR_USAGE, "--stages: at most %d virtual stages",
                                          64 * 64);
    if (!st) st = plan_cuts(cfg, m, n, first);
    if (!st)
        *bytes = (size_t)(cfg->batch / shape.microbatches) * widest_boundary(m, first, n) *
                 sizeof(float);
    m->ops->destroy(m);
    return st;
}

static int pipeline_world_size(const struct sb_config *cfg)
{
    return cfg->replicas * opts(cfg)->tp * opts(cfg)->stages;
}

static int pipeline_replicas_of_world(const struct sb_config *cfg, int world)
{
    int p = opts(cfg)->stages * opts(cfg)->tp;
    return p > 0 && world % p == 0 ? world / p : 0;
}

static void pipeline_destroy(struct sb_strategy *s)
{
    struct pipeline *p = s->impl;
    if (!p) return;
    const struct sb_backend_ops *be = s->env->be;
    for (int v = 0; p->chunk && v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        sb_dp_sync_destroy(c->sync);
        sb_zero_sync_destroy(c->zsync);
        be->free(c->act_in);
        be->free(c->grad_in);
        be->free(c->grad_out);
        free(c->slot_of);
        free(c->free_slot);
        free(c->send_act);
        free(c->send_grad);
        sb_replica_destroy(c->r);
    }
    free(p->chunk);
    free(p->layer_first);
    sb_replica_destroy(p->whole);
    if (p->chunk_whole) p->chunk_whole->ops->destroy(p->chunk_whole);
    if (p->loss_scratch) be->free(p->loss_scratch);
    sb_comm_destroy(p->gather_world);
    sb_pp_schedule_free(&p->sched);
    sb_pp_waits_free(&p->waits);
    sb_pp_stats_free(&p->stats);
    sb_comm_destroy(p->gather);
    sb_comm_destroy(p->grad);
    sb_comm_destroy(p->act);
    sb_grid_destroy(p->grid);
    sb_comm_destroy(p->world);
    free(p);
}

static sb_status pipeline_init(struct sb_strategy *s)
{
    struct pipeline *p = calloc(1, sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    s->impl = p;
    const struct sb_config *cfg = s->env->cfg;
    struct sb_pp_shape shape;
    int n_layers;
    SB_TRY(check_shape(cfg, &shape, &n_layers));
    p->P = shape.stages;
    p->M = shape.microbatches;
    p->V = shape.chunks;
    p->D = cfg->replicas;
    p->T = opts(cfg)->tp;
    p->sp = opts(cfg)->sequence_parallel;
    p->zero_stage = opts(cfg)->zero_stage;
    p->mb = cfg->batch / p->M;
    SB_TRY(sb_comm_world_create(cfg, s->env->job, s->env->placement->device[0], &p->world));
    p->world->role = SB_COMM_ROLE_WORLD;
    SB_TRY(sb_grid_create(p->world, p->D, p->T, p->P, (enum sb_rank_order)opts(cfg)->rank_order,
                          &p->grid));
    p->stage = p->grid->me.pp_rank;
    p->tp_rank = p->grid->me.tp_rank;
    if (p->T > 1) {
        SB_TRY(sb_comm_split(p->world, 0, p->world->rank, &p->gather_world)); /* not counted */
        SB_TRY(s->env->be->alloc((void **)&p->loss_scratch, sizeof *p->loss_scratch));
    }
    /* One communicator per direction of the pp axis, so that activations
     * and gradients between one pair of ranks never match each other. */
    SB_TRY(sb_comm_split(p->grid->pp_comm, 0, p->stage, &p->act));
    SB_TRY(sb_comm_split(p->grid->pp_comm, 0, p->stage, &p->grad));
    SB_TRY(sb_comm_split(p->grid->pp_comm, 0, p->stage, &p->gather)); /* not counted */
    p->act->role = p->grad->role = SB_COMM_ROLE_PP;
    SB_TRY(sb_pp_schedule_build(&shape, &p->sched));
    SB_TRY(sb_pp_check(&p->sched));
    /* Send and receive times compare across ranks (and hosts) on rank 0's
     * clock (Cristian's method, as the trace aligns its ranks). */
    double offset = 0, err;
    if (s->env->job) SB_TRY(sb_job_clock_offset(s->env->job, 8, &offset, &err));
    SB_TRY(sb_pp_test_delay_hook(p->stage, p->P, p->test_delay_ms));
    SB_TRY(sb_pp_waits_init(&p->waits, sb_pp_message_count(&shape), p->P, p->stage, offset));
    SB_TRY(sb_pp_check_message_order(&p->sched));
    if (opts(cfg)->print_schedule && p->world->rank == 0) SB_TRY(sb_pp_print_grid(&p->sched, stdout));
    /* The whole model (its layer table cuts the stages; world rank 0 keeps
     * it to evaluate and to gather the parameters into). */
    SB_TRY(sb_replica_create(s->env, 0, &p->whole));
    struct sb_model *whole = p->whole->model;
    if (!(p->layer_first = malloc((size_t)(p->P * p->V + 1) * sizeof *p->layer_first)))
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    p->whole_n_params = whole->n_params;
    SB_TRY(plan_cuts(cfg, whole, p->P * p->V, p->layer_first));
    if (p->T > 1) SB_TRY(s->env->workload->create(cfg, s->env->be, 1, &p->chunk_whole));
    /* Activation slots: each chunk's most micro-batches in flight in this
     * rank's list (a forward takes one, a backward frees it); all chunks
     * together, the schedule's live-activation formula. */
    int slots[64];
    if (p->V > 64) return sb_error(SB_ERR_USAGE, "--chunks: at most 64");
    sb_pp_chunk_slots(&p->sched, p->stage, slots);
    SB_TRY(sb_pp_make_chunks(s, p, slots));
    size_t boundary[64 * 64];
    if (p->P * p->V - 1 > (int)(sizeof boundary / sizeof boundary[0]))
        return sb_error(SB_ERR_USAGE, "--stages: at most %d virtual stages",
                        (int)(sizeof boundary / sizeof boundary[0]));
    for (int b = 0; b < p->P * p->V - 1; b++)
        boundary[b] = whole->layers[p->layer_first[b + 1] - 1].out_floats;
    SB_TRY(sb_pp_stats_init(&p->stats, &shape, p->stage, p->mb, boundary, p->world->size,
                            p->world->rank));
    if (p->world->rank != 0) { /* only rank 0 evaluates */
        sb_replica_destroy(p->whole);
        p->whole = NULL;
    }
    s->comms[s->n_comms++] = p->act;
    s->comms[s->n_comms++] = p->grad;
    s->comms[s->n_comms++] = p->grid->dp_comm;
    if (p->T > 1) s->comms[s->n_comms++] = p->grid->tp_comm;
    s->world = p->world;
    /* Every chunk starts from the whole model's initial values (the
     * workload's init, the same on every rank): nothing to broadcast. */
    return SB_OK;
}

static sb_status pipeline_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                               struct sb_step_result *out)
{
    struct pipeline *p = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    const int32_t *mine = global_idx + (size_t)p->grid->me.dp_rank * cfg->batch;
    double t_step = sb_now_s();
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        for (int k = 0; k < p->M; k++) c->slot_of[k] = -1;
        c->n_free = c->r->slots;
        for (int i = 0; i < c->n_free; i++) c->free_slot[i] = c->n_free - 1 - i;
        c->backwards = c->weights = 0;
        c->live = c->peak = 0;
        /* Always SB_DP_SYNC_BUCKETS: pipeline takes no --grad-compression or
         * --local-sgd (its ops leave grad_sync 0, so the CLI refuses them). */
        if (c->sync) (void)sb_dp_sync_begin(c->sync, step);
        if (c->zsync) sb_zero_sync_begin(c->zsync);
    }
    const struct sb_pp_action *a = sb_pp_rank_actions(&p->sched, p->stage);
    for (int i = 0; i < sb_pp_rank_count(&p->sched, p->stage); i++)
        SB_TRY(sb_pp_run_action(s, p, &a[i], mine, out));
    double t0 = sb_now_s();
    sb_pp_waits_span(&p->waits, t_step, t0); /* the drain: sb_pp_split_waits */
    for (int v = 0; v < p->V; v++) { /* the sends still in flight */
        struct chunk *c = &p->chunk[v];
        for (int k = 0; k < c->r->slots; k++) SB_TRY(sb_pp_finish_send(p->act, &c->send_act[k]));
        for (int k = 0; k < p->M; k++) SB_TRY(sb_pp_finish_send(p->grad, &c->send_grad[k]));
    }
    sb_pp_stats_add(&p->stats, SB_PP_STAT_P2P, sb_now_s() - t0);
    /* fp16: every chunk's gradients unscaled, then one decision for the
     * job: an inf or NaN in any stage's gradients (any shard's) skips the
     * step on every rank, so every scaler keeps the same S. */
    int found = 0;
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        int f = 0;
        if (c->zsync) SB_TRY(sb_zero_sync_finish(c->zsync, out));
        else if (c->sync) SB_TRY(sb_dp_sync_finish(c->sync, out));
        /* inf-grad:N lands on world rank 0's first chunk only, after its
         * dp sync: the other ranks skip by the decision alone. */
        if (v == 0 && p->world->rank == 0 && !c->zsync) sb_replica_test_inject_inf(c->r);
        SB_TRY(sb_replica_count_step(c->r, out));
        if (c->zsync) SB_TRY(sb_zero_sync_find_inf(c->zsync, &c->r->scaler, &f));
        else SB_TRY(sb_replica_unscale(c->r, c->r->model->grads, &f));
        found |= f;
    }
    SB_TRY(sb_loss_scaler_agree(&p->chunk[0].r->scaler, p->world, &found));
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        if (!c->zsync) {
            SB_TRY(sb_replica_update_decided(c->r, c->r->model->grads, found, out));
        } else if (!sb_loss_scaler_update(&c->r->scaler, found)) {
            SB_TRY(sb_zero_sync_update(c->zsync, out));
        }
    }
    /* The activation bytes: the ledger's, and per chunk the workload's
     * scratch plus its bytes per slot times the slots counted alive. */
    for (int v = 0; v < p->V; v++) {
        const struct chunk *c = &p->chunk[v];
        sb_pp_stats_add(&p->stats, SB_PP_STAT_ACT_LEDGER, (double)c->r->model->activation_bytes);
        sb_pp_stats_add(&p->stats, SB_PP_STAT_ACT_SLOTS, c->scratch + c->peak * c->per_slot);
    }
    p->step_end_s = sb_now_s();
    p->step_s = p->step_end_s - t_step;
    return SB_OK;
}

/* The receives' split and the stages' timings of the step just ended,
 * summed over the world, with every rank's step end (pipeline_after_step's
 * two collectives, outside the step's time: measurement, not training).
 * The job's step ended at the last rank's end: a rank that ended before it
 * waited for that rank, step time it reports as out->end_wait_ms
 * (strategy.h). */
static sb_status pipeline_after_step(struct sb_strategy *s, long step, struct sb_step_result *out)
{
    struct pipeline *p = s->impl;
    (void)step;
    double t0 = sb_now_s(), mine = p->step_end_s - p->waits.clock_offset_s, last = mine;
    SB_TRY(sb_pp_split_waits(p, out));
    /* a stage's figures: the mean over its D x T ranks */
    SB_TRY(sb_pp_stats_end_step(&p->stats, p->world, p->D * p->T, p->step_s, mine, &last));
    double lag = last - mine; /* >= 0: the latest end includes this rank's */
    out->end_wait_ms = 1e3 * lag; /* the harness adds it to the step and its wait */
    double exchange = sb_now_s() - t0 - lag;
    p->after_step_s += exchange > 0 ? exchange : 0.0;
    p->after_steps++;
    return SB_OK;
}

static sb_status pipeline_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct pipeline *p = s->impl;
    SB_TRY(sb_pp_gather_whole(s, p));
    *accuracy = 0.0;
    if (p->world->rank != 0) return SB_OK;
    sb_pp_stats_print(&p->stats, stdout);
    int n = s->env->data->test.n;
    long hits = 0;
    SB_TRY(sb_replica_evaluate(p->whole, 0, n, &hits));
    *accuracy = (double)hits / n;
    return SB_OK;
}

static sb_status pipeline_read_params(struct sb_strategy *s, float *host)
{
    struct pipeline *p = s->impl;
    SB_TRY(sb_pp_gather_whole(s, p));
    if (p->world->rank != 0) return SB_OK;
    const struct sb_model *whole = p->whole->model;
    return s->env->be->download(host, whole->params, whole->n_params * sizeof(float));
}

/* The whole model's parameter count (every rank built the whole model
 * once at init; rank 0 keeps it). */
static size_t pipeline_model_n_params(const struct sb_strategy *s)
{
    const struct pipeline *p = s->impl;
    return p->whole_n_params;
}

/* This rank's replica buffers: chunk i's parameters (the consistency check
 * compares them within the stage's dp group). */
static float *pipeline_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct pipeline *p = s->impl;
    *n = 1;
    return i == 0 ? p->chunk[0].r->model->params : NULL;
}

/* The ranks that hold the same layers: one stage's tp rank (its shard). */
static int pipeline_consistency_group(const struct sb_strategy *s)
{
    const struct pipeline *p = s->impl;
    return p->stage * p->T + p->tp_rank;
}

/* This rank's ledger: one entry for its stage, every chunk's parameters,
 * gradients, optimizer state and activations, and its point-to-point
 * buffers as communication buffers; the formula is the fp32 accounting
 * for the stage's parameters. */
static int pipeline_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    const struct pipeline *p = s->impl;
    if (cap < 1) return 0;
    sb_memory_entry_of_replica(s, p->chunk[0].r, p->grid->me.dp_rank, out);
    double n = 0, opt = 0, act = 0, shard = 0;
    for (int v = 0; v < p->V; v++) {
        const struct sb_replica *r = p->chunk[v].r;
        const struct sb_zero_sync *z = p->chunk[v].zsync;
        n += (double)r->model->n_params;
        /* zero stage 1: the shard's state, and its gradient shard as a
         * communication buffer (zero.c's ledger) */
        opt += z ? (double)sb_zero_sync_optimizer_bytes(z)
                 : (double)sb_optimizer_state_bytes(&r->opt);
        if (z) shard += (double)sb_zero_sync_shard_floats(z) * sizeof(float);
        act += (double)r->model->activation_bytes;
    }
    out->held.param_bytes = out->held.grad_bytes = n * sizeof(float);
    out->held.optimizer_bytes = opt;
    out->activation_bytes = act;
    out->comm_bytes = p->comm_bytes + shard;
    /* The formula for the stage's own parameters (the model-state formula
     * op takes the whole model's and divides it evenly); stage 1 divides
     * the optimizer state by the D replicas. */
    out->formula = (struct sb_model_state){
        4 * n, 4 * n,
        4.0 * sb_optimizer_state_floats(s->env->cfg) * n / (p->zero_stage == 1 ? p->D : 1)};
    return 1;
}

static void pipeline_reset_counters(struct sb_strategy *s)
{
    struct pipeline *p = s->impl;
    sb_pp_stats_reset(&p->stats);
    p->after_step_s = 0.0;
    p->after_steps = 0;
    for (int v = 0; v < p->V; v++)
        if (p->chunk[v].sync) sb_dp_sync_reset_counters(p->chunk[v].sync);
}

static void pipeline_describe(const struct sb_strategy *s, long measured_steps,
                              struct sb_strategy_details *det)
{
    const struct pipeline *p = s->impl;
    (void)measured_steps;
    double first[64];
    int n = p->P * p->V + 1;
    for (int i = 0; i < n && i < 64; i++) first[i] = p->layer_first[i];
    sb_details_add(det, "pipeline_layer_first", 1, first, n < 64 ? n : 64);
    sb_pp_stats_describe(&p->stats, &p->sched, det);
    /* this rank's time a step in pipeline_after_step's collectives, less
     * its wait for a later rank's end: left out of the step's time */
    double after_ms = p->after_steps > 0 ? 1e3 * p->after_step_s / p->after_steps : 0.0;
    sb_details_add(det, "stats_collectives_ms", 0, &after_ms, 1);
    if (p->T > 1) sb_pp_describe_tp(s, p, det);
}

/* The model-state bytes of one stage's tp shard: the fp32 accounting
 * (parameters, gradients, optimizer state) of Ψ/(P T) parameters, the
 * stages and shards being cut evenly (Rajbhandari et al., SC 2020, section
 * 3.1, applied to a part; the replicated tensors of a shard make it a
 * lower bound with T > 1), the optimizer state divided by D with
 * --zero-stage 1. */
static void pipeline_model_state_formula(const struct sb_config *cfg, double n_params,
                                         int server, struct sb_model_state *out)
{
    (void)server;
    const struct pipeline_opts *o = opts(cfg);
    double parts = (o->stages > 0 ? o->stages : 1) * (o->tp > 0 ? o->tp : 1);
    double psi = n_params / parts, dp = o->zero_stage == 1 && cfg->replicas > 1 ? cfg->replicas : 1;
    *out = (struct sb_model_state){4 * psi, 4 * psi,
                                   4.0 * sb_optimizer_state_floats(cfg) * psi / dp};
}

/* The layout: D x T x P, the micro-batches, the schedule and its chunks
 * (interleaved's default 2 when --chunks is not given, else 1), the rank
 * order; zero stage 0 (ddp's all-reduce over dp). */
static void pipeline_layout(const struct sb_config *cfg, struct sb_layout *out)
{
    const struct pipeline_opts *o = opts(cfg);
    out->tp = o->tp;
    out->pp = o->stages;
    out->microbatches = o->microbatches;
    out->schedule = (enum sb_pp_kind)o->schedule;
    out->chunks = o->schedule == SB_PP_INTERLEAVED ? (o->chunks ? o->chunks : 2) : 1;
    out->order = (enum sb_rank_order)o->rank_order;
    out->zero_stage = o->zero_stage;
}

const struct sb_strategy_ops sb_strategy_pipeline = {
    .name = "pipeline",
    .summary = "layers cut into --stages ranks, --microbatches streamed by --schedule "
               "(GPipe, 1F1B, interleaved)",
    .uses_mpi = 1,
    .options = pipeline_options,
    .options_size = sizeof(struct pipeline_opts),
    .owns_wait = 1,
    .world_size = pipeline_world_size,
    .replicas_of_world = pipeline_replicas_of_world,
    .validate = pipeline_validate,
    .init = pipeline_init,
    .step = pipeline_step,
    .after_step = pipeline_after_step,
    .evaluate = pipeline_evaluate,
    .read_params = pipeline_read_params,
    .model_n_params = pipeline_model_n_params,
    .replica_params = pipeline_replica_params,
    .consistency_group = pipeline_consistency_group,
    .reset_counters = pipeline_reset_counters,
    .describe = pipeline_describe,
    .layout = pipeline_layout,
    .p2p_max_bytes = pipeline_p2p_max_bytes,
    .memory = pipeline_memory,
    .comm_model = sb_pp_predict_rows,
    .model_state_formula = pipeline_model_state_formula,
    .destroy = pipeline_destroy,
};
