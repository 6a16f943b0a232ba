/* Strategy "tensor": tensor parallelism in the style of Megatron-LM
 * (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter
 * Language Models Using Model Parallelism", section 3).
 *
 * --tp T ranks hold one model between them: each holds its shard of the
 * column- and row-parallel tensors of the workload's layer table (the mlp's
 * hidden layers in column/row pairs, workloads/dense.h) and all of the
 * replicated ones, and the workload calls the tp hook (strategies/shared/
 * tp_ops.h, Megatron-LM's conjugate operators f and g) where the shards'
 * partial sums must be summed. Every tp rank of a group sees the same
 * micro-batch, so the replicated tensors receive equal inputs and equal
 * gradients by construction (docs/tensor.md); the consistency check
 * compares the shards of one tp rank across dp groups, and evaluation
 * checks the replicated tensors equal across the tp group.
 *
 * --replicas D: D x T ranks laid out by the grid (src/comm/grid.h, tp
 * innermost: a tp group is T consecutive ranks, one host under the usual
 * by-slot mapping); the gradients of each shard are all-reduced over its dp
 * communicator (strategies/shared/dp_sync.h). The tp collectives are
 * counted on the tp communicator, the gradients' on the dp one (the
 * report's comm.by_role); evaluation and --save-params use uncounted
 * communicators. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce_algo.h"
#include "comm/comm_create.h"
#include "comm/cost_model.h"
#include "comm/grid.h"
#include "core/clock.h"
#include "core/nvtx.h"
#include "data/mnist.h"
#include "strategies/shared/dp_sync.h"
#include "strategies/shared/replica.h"
#include "strategies/shared/tp_ops.h"
#include "strategies/shared/tp_shards.h"

#define TENSOR "tensor"

/* tensor's own flags (cfg->strategy_opts). */
struct tensor_opts {
    int tp;                /* --tp: ranks per tensor-parallel group */
    int sequence_parallel; /* --sequence-parallel */
    int rank_order;        /* --rank-order: enum sb_rank_order */
};
_Static_assert(sizeof(struct tensor_opts) <= SB_STRATEGY_OPTS_BYTES, "tensor options");

static const struct tensor_opts *opts(const struct sb_config *cfg)
{
    return (const struct tensor_opts *)(const void *)cfg->strategy_opts;
}

static const char *const rank_order_names[] = {"tp-dp-pp", "tp-pp-dp", NULL};
_Static_assert(SB_RANK_ORDER_TP_DP_PP == 0 && SB_RANK_ORDER_TP_PP_DP == 1,
               "rank_order_names follows enum sb_rank_order");

static const struct sb_strategy_option tensor_options[] = {
    {"tp", "T", SB_OPTION_INT, offsetof(struct tensor_opts, tp), 1, 64, 2, 0, NULL, 0,
     "ranks per tensor-parallel group (Megatron-LM)", NULL},
    {"sequence-parallel", NULL, SB_OPTION_SWITCH,
     offsetof(struct tensor_opts, sequence_parallel), 0, 0, 0, 1, NULL, 0,
     "shard the residual stream along the sequence (Korthikanti 2022)", NULL},
    {"rank-order", "O", SB_OPTION_CHOICE, offsetof(struct tensor_opts, rank_order), 0, 0, 0, 0,
     NULL, 0, "tp-dp-pp (Megatron-LM's) | tp-pp-dp: the grid's rank order (comm/grid.h)",
     rank_order_names},
    {0},
};

struct tensor {
    struct sb_comm *world;   /* every rank (not counted: metrics, evaluation's sums) */
    struct sb_grid *grid;    /* D x T x 1: tp_comm and dp_comm (counted) */
    struct sb_comm *eval_tp; /* the tp group again, uncounted: evaluation's hook */
    struct sb_comm *gather;  /* the world again, uncounted by the report: --save-params */
    struct sb_replica *replica; /* this rank's shard (a part of every layer) */
    struct sb_model *whole;  /* the whole model's tables and a place to assemble it (1 sample) */
    int *whole_tensor;       /* (part's n_tensors) the matching tensor of `whole` */
    struct sb_tp_ops tp;     /* the hook */
    struct sb_dp_sync *sync; /* the shard's gradients over dp_comm (NULL for D = 1) */
    double *loss_scratch;    /* the loss of tp ranks > 0 (tp rank 0 reports the group's) */
    int T, D, tp_rank, dp_rank;
};

/* The tp ranks a world of `world` ranks holds per replica. */
static int tensor_world_size(const struct sb_config *cfg) { return cfg->replicas * opts(cfg)->tp; }

static int tensor_replicas_of_world(const struct sb_config *cfg, int world)
{
    int t = opts(cfg)->tp;
    return t > 0 && world % t == 0 ? world / t : 0;
}

/* Checks the flags against the model: a workload with part ops, T
 * dividing every split dimension (the last tp rank's shard is 1/T of each
 * split tensor), no sequence parallelism where the workload has no
 * sequence, the host path. Builds the whole model and the last tp rank's
 * shard once (1 sample each). */
static sb_status tensor_validate(const struct sb_config *cfg)
{
    const struct tensor_opts *o = opts(cfg);
    const struct sb_workload_ops *w = sb_workload_find(cfg->workload);
    if (!w) return sb_error(SB_ERR_USAGE, "--workload: unknown '%s'", cfg->workload);
    if (!w->create_part || !w->forward_part || !w->backward_part)
        return sb_error(SB_ERR_USAGE, "--workload: %s has no tensor-parallel parts, so "
                        "--strategy tensor cannot shard it", w->name);
    if (!cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--strategy tensor: runs on --device cpu only (the "
                        "replica's device path has no split passes yet)");
    if (cfg->grad_compression[0] && strcmp(cfg->grad_compression, "none") != 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression: not with --strategy tensor");
    if (cfg->local_sgd > 0) return sb_error(SB_ERR_USAGE, "--local-sgd: not with --strategy tensor");
    struct sb_model *whole = NULL, *shard = NULL;
    SB_TRY(w->create(cfg, cfg->backend, 1, &whole));
    struct sb_part part = {0, whole->n_layers, o->tp - 1, o->tp, 1, 0, 0, 0};
    sb_status st = SB_OK;
    int split = 0;
    if (o->tp > 1 && (st = w->create_part(cfg, cfg->backend, 1, &part, &shard))) {
        /* A shard the workload cannot cut (e.g. heads not divisible). */
        whole->ops->destroy(whole);
        return st;
    }
    if (shard) st = sb_tp_shard_check_even(shard, whole, o->tp, &split);
    if (!st && o->tp > 1 && split == 0)
        st = sb_error(SB_ERR_USAGE, "--tp: the %s model has no column/row-parallel layer to "
                      "split", w->name);
    if (!st && o->sequence_parallel) {
        /* A sequence: a layer whose activations are (tokens, width). */
        int tokens = 0;
        for (int l = 0; l < whole->n_layers && !tokens; l++)
            if (whole->layers[l].in_shape[1] > 1) tokens = whole->layers[l].in_shape[0];
        if (!tokens)
            st = sb_error(SB_ERR_USAGE, "--sequence-parallel: the %s model has no sequence to "
                          "shard (only a transformer's tokens)", w->name);
        else if (tokens % o->tp)
            st = sb_error(SB_ERR_USAGE, "--sequence-parallel: the sequence of %d tokens (the "
                          "class token included) does not divide by --tp %d", tokens, o->tp);
    }
    if (shard) shard->ops->destroy(shard);
    whole->ops->destroy(whole);
    return st;
}

static void tensor_destroy(struct sb_strategy *s)
{
    struct tensor *t = s->impl;
    if (!t) return;
    sb_dp_sync_destroy(t->sync);
    sb_replica_destroy(t->replica);
    if (t->whole) t->whole->ops->destroy(t->whole);
    free(t->whole_tensor);
    if (t->loss_scratch) s->env->be->free(t->loss_scratch);
    sb_comm_destroy(t->eval_tp);
    sb_comm_destroy(t->gather);
    sb_grid_destroy(t->grid);
    sb_comm_destroy(t->world);
    free(t);
}

static sb_status tensor_init(struct sb_strategy *s)
{
    struct tensor *t = calloc(1, sizeof *t);
    if (!t) return sb_error(SB_ERR_NOMEM, TENSOR ": out of memory");
    s->impl = t;
    const struct sb_config *cfg = s->env->cfg;
    const struct sb_backend_ops *be = s->env->be;
    t->T = opts(cfg)->tp;
    t->D = cfg->replicas;
    SB_TRY(sb_comm_world_create(cfg, s->env->job, s->env->placement->device[0], &t->world));
    SB_TRY(sb_grid_create(t->world, t->D, t->T, 1, (enum sb_rank_order)opts(cfg)->rank_order,
                          &t->grid));
    t->tp_rank = t->grid->me.tp_rank;
    t->dp_rank = t->grid->me.dp_rank;
    SB_TRY(sb_comm_split(t->world, t->dp_rank, t->tp_rank, &t->eval_tp));
    SB_TRY(sb_comm_split(t->world, 0, t->world->rank, &t->gather));
    SB_TRY(s->env->workload->create(cfg, be, 1, &t->whole));
    struct sb_part part = {0, t->whole->n_layers, t->tp_rank, t->T, 1,
                           opts(cfg)->sequence_parallel, 0, 0};
    int max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    SB_TRY(sb_replica_create_part(s->env, 1, &part, max_batch, &t->replica));
    struct sb_model *m = t->replica->model;
    t->whole_tensor = malloc((size_t)m->n_tensors * sizeof *t->whole_tensor);
    if (!t->whole_tensor) return sb_error(SB_ERR_NOMEM, TENSOR ": out of memory");
    SB_TRY(sb_tp_shard_match(m, t->whole, t->whole_tensor));
    SB_TRY(be->alloc((void **)&t->loss_scratch, sizeof *t->loss_scratch));
    sb_tp_ops_install(&t->tp, m, t->grid->tp_comm);
    s->replica = t->replica;
    s->comms[s->n_comms++] = t->grid->tp_comm;
    s->comms[s->n_comms++] = t->grid->dp_comm;
    s->world = t->world;
    if (t->D > 1) {
        struct sb_dp_sync_cfg sc = {.bucket_mb = 25.0, .overlap = 1,
                                    .host_memory = be->host_memory};
        SB_TRY(sb_dp_sync_create(t->grid->dp_comm, m, sb_grad_range_whole(m), &sc, &t->sync));
        /* Every shard starts from its dp group's first replica's values
         * (equal already: the workload initialises shards from the seed). */
        SB_TRY(sb_comm_broadcast(t->grid->dp_comm, m->params, m->n_params, 0));
    }
    return SB_OK;
}

/* Seconds of collectives on the tp communicator so far (its counters). */
static double tp_seconds(const struct tensor *t)
{
    const struct sb_comm_counter *c = t->grid->tp_comm->counters;
    return c[SB_COMM_ALLREDUCE].seconds + c[SB_COMM_ALLGATHER].seconds +
           c[SB_COMM_REDUCE_SCATTER].seconds;
}

static sb_status tensor_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                             struct sb_step_result *out)
{
    struct tensor *t = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    struct sb_replica *r = t->replica;
    struct sb_model *m = r->model;
    int b = cfg->batch;
    /* Every tp rank of dp group d takes the global batch's slice d. */
    const int32_t *mine = global_idx + (size_t)t->dp_rank * b;
    SB_TRY(sb_replica_data(r, 0, mine, b, out));
    struct sb_replica_slot *sl = &r->slot[0];

    double tp0 = tp_seconds(t), t0 = sb_now_s();
    sb_nvtx_push_phase("forward", SB_NVTX_FORWARD);
    /* fp16: the loss scaled by S (1 otherwise) */
    sb_status st = m->ops->forward_part(m, 0, sl->x, sl->y, b,
                                        sb_loss_scaler_factor(&r->scaler) /
                                            (float)sb_config_global_batch(cfg),
                                        t->tp_rank == 0 ? r->loss_acc : t->loss_scratch);
    if (!st) st = sb_tp_ops_take_error(&t->tp);
    if (!st) st = s->env->be->check();
    sb_nvtx_pop();
    if (st) return st;
    double tp1 = tp_seconds(t), t1 = sb_now_s();
    /* The tp all-reduces are communication, not forward compute. */
    out->phase_ms[SB_PHASE_FORWARD] += 1e3 * ((t1 - t0) - (tp1 - tp0));
    out->phase_ms[SB_PHASE_COMM] += 1e3 * (tp1 - tp0);
    if (t->tp_rank == 0) out->samples += b; /* the group's samples, counted once */

    sb_grad_ready_fn ready = NULL;
    if (t->sync) {
        sb_dp_sync_begin(t->sync, step);
        ready = sb_dp_sync_ready_fn(t->sync);
    }
    sb_nvtx_push_phase("backward", SB_NVTX_BACKWARD);
    st = m->ops->backward_part(m, 0, NULL, NULL, 0, ready, t->sync);
    if (!st) st = sb_tp_ops_take_error(&t->tp);
    sb_nvtx_pop();
    if (st) return st;
    double tp2 = tp_seconds(t), t2 = sb_now_s();
    out->phase_ms[SB_PHASE_BACKWARD] += 1e3 * ((t2 - t1) - (tp2 - tp1));
    out->phase_ms[SB_PHASE_COMM] += 1e3 * (tp2 - tp1);
    if (t->sync) SB_TRY(sb_dp_sync_finish(t->sync, out));
    /* inf-grad:N on world rank 0 only, after the dp sync: the other ranks
     * skip by the decision alone. */
    if (t->world->rank == 0) sb_replica_test_inject_inf(r);
    SB_TRY(sb_replica_count_step(r, out));
    /* fp16: a tp rank's shards are its own, so an inf in one rank's skips
     * the step on every rank. */
    int found = 0;
    SB_TRY(sb_replica_unscale(r, m->grads, &found));
    SB_TRY(sb_loss_scaler_agree(&r->scaler, t->world, &found));
    return sb_replica_update_decided(r, m->grads, found, out);
}

static sb_status tensor_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct tensor *t = s->impl;
    struct sb_model *m = t->replica->model;
    const struct sb_mnist *data = s->env->data;
    SB_TRY(sb_tp_check_replicated(m, t->eval_tp));
    /* dp group d scores test shard d; the tp ranks of a group compute the
     * same logits, so only tp rank 0 counts them. The hook runs over the
     * uncounted copy of the tp group. */
    /* In training batches: a transformer keeps activations for that many. */
    int n = data->test.n, first, count, chunk = s->env->cfg->batch;
    sb_split_range(n, t->D, t->dp_rank, &first, &count);
    t->tp.comm = t->eval_tp;
    sb_status st = SB_OK;
    long correct = 0;
    struct sb_replica_slot *sl = &t->replica->slot[0];
    for (int o = first; o < first + count && !st; o += chunk) {
        int k = first + count - o < chunk ? first + count - o : chunk;
        for (int i = 0; i < k; i++) t->replica->eval_idx[i] = o + i;
        sb_mnist_gather(&data->test, t->replica->eval_idx, k, sl->x, sl->y);
        st = m->ops->forward_part(m, 0, sl->x, sl->y, k, 1.0f, t->loss_scratch);
        if (!st) st = sb_tp_ops_take_error(&t->tp);
        long hits = 0;
        if (!st) s->env->be->count_correct(m->ops->part_output(m, 0), sl->y, k, m->n_classes,
                                           &hits);
        if (t->tp_rank == 0) correct += hits;
    }
    t->tp.comm = t->grid->tp_comm;
    sl->n = 0; /* the next step gathers its own batch */
    SB_TRY(st);
    double total = (double)correct;
    SB_TRY(sb_comm_allreduce_f64(t->world, &total, 1));
    *accuracy = total / n;
    return SB_OK;
}

/* The whole model to world rank 0: the first dp group's shards placed in
 * the whole model's layout, every other rank contributing zeros, summed
 * over the uncounted gather communicator (x + 0 = x: exact). */
static sb_status tensor_read_params(struct sb_strategy *s, float *host)
{
    struct tensor *t = s->impl;
    const struct sb_model *m = t->replica->model;
    size_t n = t->whole->n_params;
    float *whole = calloc(n, sizeof *whole), *mine = malloc(m->n_params * sizeof *mine);
    sb_status st = whole && mine ? SB_OK : sb_error(SB_ERR_NOMEM, TENSOR ": out of memory");
    if (!st) st = s->env->be->download(mine, m->params, m->n_params * sizeof *mine);
    if (!st && t->dp_rank == 0)
        sb_tp_shard_place(m, t->whole, t->whole_tensor, t->tp_rank, mine, whole);
    if (!st) st = sb_comm_allreduce(t->gather, whole, n);
    if (!st && t->world->rank == 0) memcpy(host, whole, n * sizeof *host);
    free(whole);
    free(mine);
    return st;
}

static size_t tensor_model_n_params(const struct sb_strategy *s)
{
    const struct tensor *t = s->impl;
    return t->whole->n_params;
}

static float *tensor_replica_params(struct sb_strategy *s, int i, int *n)
{
    *n = 1;
    return i == 0 ? s->replica->model->params : NULL;
}

/* The ranks that hold the same shard: one tp rank of every dp group. */
static int tensor_consistency_group(const struct sb_strategy *s)
{
    const struct tensor *t = s->impl;
    return t->tp_rank;
}

static void tensor_reset_counters(struct sb_strategy *s)
{
    struct tensor *t = s->impl;
    if (t->sync) sb_dp_sync_reset_counters(t->sync);
}

/* The value of `key` that describe stated, or NAN. */
static double stated(const struct sb_strategy_details *d, const char *key)
{
    for (int i = 0; d && i < d->n && i < SB_DETAILS_MAX; i++)
        if (strcmp(d->item[i].key, key) == 0 && d->item[i].count > 0)
            return d->item[i].values[0];
    return NAN;
}

/* Adds the number `v` under `key`. */
static void add_num(struct sb_strategy_details *d, const char *key, double v)
{
    sb_details_add(d, key, 0, &v, 1);
}

/* The layout (tp, dp, sequence_parallel), the tp traffic per step by its
 * formula (tp_ops.h, from the shard's layer table: the counters in
 * comm.by_role.tp must equal it), the ledger of the shard beside its
 * formulas (the split tensors' floats whole and held: exactly 1/T; the
 * activation bytes and one block's, allocated and by the workload's
 * part_size, docs/tensor.md) and dp_sync's keys. */
static void tensor_describe(const struct sb_strategy *s, long measured_steps,
                            struct sb_strategy_details *d)
{
    const struct tensor *t = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    const struct sb_model *m = t->replica->model;
    add_num(d, "tp", t->T);
    add_num(d, "dp", t->D);
    sb_details_add_bool(d, "sequence_parallel", opts(cfg)->sequence_parallel);
    if (m->part.sequence_parallel) {
        /* The blocks: layers of (tokens, width) activations holding split tensors. */
        int blocks = 0;
        double tokens = 0, width = 0;
        sb_tp_sp_blocks(m, &blocks, &tokens, &width);
        struct sb_tp_sp_traffic sp = sb_tp_sp_block_traffic(blocks, cfg->batch, tokens, width, 1);
        add_num(d, "tp_allgather_calls_per_step", (double)sp.allgather_calls);
        add_num(d, "tp_reduce_scatter_calls_per_step", (double)sp.reduce_scatter_calls);
        add_num(d, "tp_allreduce_calls_per_step", (double)sp.allreduce_calls);
        add_num(d, "tp_allgather_bytes_per_step", 4.0 * sp.allgather_floats);
        add_num(d, "tp_reduce_scatter_bytes_per_step", 4.0 * sp.reduce_scatter_floats);
        add_num(d, "tp_allreduce_bytes_per_step", 4.0 * sp.allreduce_floats);
    } else {
        struct sb_tp_traffic tr = sb_tp_model_traffic(m, cfg->batch, 1);
        add_num(d, "tp_forward_calls_per_step", (double)tr.forward_calls);
        add_num(d, "tp_backward_calls_per_step", (double)tr.backward_calls);
        add_num(d, "tp_forward_bytes_per_step", 4.0 * tr.forward_floats);
        add_num(d, "tp_backward_bytes_per_step", 4.0 * tr.backward_floats);
    }
    double split_whole = 0.0, split_held = 0.0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].tp_split != SB_TP_REPLICATED) {
            split_held += (double)m->tensors[i].count;
            split_whole += (double)t->whole->tensors[t->whole_tensor[i]].count;
        }
    add_num(d, "shard_params", (double)m->n_params);
    add_num(d, "split_params_whole", split_whole);
    add_num(d, "split_params_held", split_held);
    add_num(d, "activation_bytes", (double)m->activation_bytes);
    if (m->block_activation_bytes) add_num(d, "block_activation_bytes",
                                           (double)m->block_activation_bytes);
    const struct sb_workload_ops *w = s->env->workload;
    if (w->part_size) {
        struct sb_model_size f = w->part_size(cfg, t->replica->max_batch, &m->part);
        add_num(d, "activation_bytes_formula", f.activation_bytes);
        if (f.block_activation_bytes > 0)
            add_num(d, "block_activation_bytes_formula", f.block_activation_bytes);
    }
    if (t->sync) sb_dp_sync_describe(t->sync, measured_steps, d);
}

/* The run's row: the tp all-reduces its describe stated (calls and bytes
 * per step, tp_ops.h's formula), each costed over the T ranks of a tp group
 * by --allreduce's algorithm, plus the dp all-reduce of the shard's
 * gradients over the D replicas (the probed link for both: a tp group
 * inside a host and dp across hosts would need two links). Nothing
 * overlaps the tp collectives: the next layer needs their sums; dp's
 * buckets may overlap backward, not modelled (exposed NaN: all of it).
 * stratbench predict's rows are the layout model's (predict --layouts). */
static int tensor_comm_model(const struct sb_comm_model_query *q, struct sb_comm_model_row *rows,
                             int cap)
{
    if (!q->cfg || cap < 1) return 0;
    const struct sb_strategy_details *d = q->details;
    struct sb_tp_traffic tr = {
        (long)stated(d, "tp_forward_calls_per_step"), (long)stated(d, "tp_backward_calls_per_step"),
        stated(d, "tp_forward_bytes_per_step") / 4, stated(d, "tp_backward_bytes_per_step") / 4};
    double shard_bytes = 4.0 * stated(d, "shard_params");
    int sp = opts(q->cfg)->sequence_parallel;
    if (isnan(shard_bytes) || (!sp && isnan(tr.forward_floats))) return 0;
    enum sb_allreduce_algo a = SB_ALLREDUCE_AUTO;
    if (q->cfg->allreduce[0]) sb_allreduce_algo_parse(q->cfg->allreduce, &a);
    if (a == SB_ALLREDUCE_HIERARCHICAL) return 0; /* needs two links */
    int T = opts(q->cfg)->tp, D = q->replicas;
    double tp_s = 0.0;
    if (sp) { /* the ring's all-gathers and reduce-scatters, and the LayerNorms' all-reduces */
        double ag = stated(d, "tp_allgather_calls_per_step");
        double rs = stated(d, "tp_reduce_scatter_calls_per_step");
        struct sb_tp_traffic ln = {(long)stated(d, "tp_allreduce_calls_per_step"), 0,
                                   stated(d, "tp_allreduce_bytes_per_step") / 4, 0};
        if (isnan(ag) || isnan(rs) || isnan(ln.forward_floats)) return 0;
        if (ag > 0)
            tp_s += ag * sb_cost_allgather_s(&q->link, T,
                                             stated(d, "tp_allgather_bytes_per_step") / ag, 1);
        if (rs > 0)
            tp_s += rs * sb_cost_reduce_scatter_s(
                             &q->link, T, stated(d, "tp_reduce_scatter_bytes_per_step") / rs, 1);
        tp_s += sb_tp_traffic_seconds(&ln, &q->link, T, a);
    } else {
        tp_s = sb_tp_traffic_seconds(&tr, &q->link, T, a);
    }
    enum sb_allreduce_algo dp_a = a == SB_ALLREDUCE_AUTO ? sb_allreduce_choose((size_t)shard_bytes, D) : a;
    double dp_s = D > 1 ? sb_cost_allreduce_s(&q->link, dp_a, D, shard_bytes) : 0.0;
    rows[0] = (struct sb_comm_model_row){
        .variant = "tp+dp",
        .formula_name = "tensor",
        .formula = "(Ftp + Btp) allreduce_T(4 b s h) + allreduce_D(4 shard params)",
        .comm_s = tp_s + dp_s,
        .exposed_s = NAN,
    };
    snprintf(rows[0].legend, sizeof rows[0].legend,
             "tensor: %ld+%ld tp all-reduces per step over %d ranks, the shard's gradients "
             "over %d replicas;", tr.forward_calls, tr.backward_calls, T, D);
    return 1;
}

/* The layout: D x T x 1 in the rank order asked. */
static void tensor_layout(const struct sb_config *cfg, struct sb_layout *out)
{
    out->tp = opts(cfg)->tp;
    out->order = (enum sb_rank_order)opts(cfg)->rank_order;
}

const struct sb_strategy_ops sb_strategy_tensor = {
    .name = TENSOR,
    .summary = "tensor parallelism: each layer's weights split over --tp ranks (Megatron-LM), "
               "x --replicas",
    .uses_mpi = 1,
    .options = tensor_options,
    .options_size = sizeof(struct tensor_opts),
    .world_size = tensor_world_size,
    .replicas_of_world = tensor_replicas_of_world,
    .validate = tensor_validate,
    .init = tensor_init,
    .step = tensor_step,
    .evaluate = tensor_evaluate,
    .read_params = tensor_read_params,
    .describe = tensor_describe,
    .layout = tensor_layout,
    .comm_model = tensor_comm_model,
    .reset_counters = tensor_reset_counters,
    .replica_params = tensor_replica_params,
    .consistency_group = tensor_consistency_group,
    .model_n_params = tensor_model_n_params,
    .destroy = tensor_destroy,
};
