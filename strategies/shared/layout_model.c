/* The layout model; formulas and sources in layout_model.h and
 * docs/layouts.md. */
#include "strategies/shared/layout_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strategies/shared/layout_memory.h"
#include "strategies/shared/pipeline_plan.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/strategy.h"

#define MAX_ROWS 8

/* Virtual stage k of n_virtual over n layers starts at layer *first and
 * holds *count (the first n % n_virtual virtual stages one more). */
static void cut(int n, int n_virtual, int k, int *first, int *count)
{
    int base = n / n_virtual, extra = n % n_virtual;
    *first = k * base + (k < extra ? k : extra);
    *count = base + (k < extra);
}

/* The layers of rank-stage s (all its chunks): for a non-interleaved
 * pipeline one range; for interleaved the chunks c s.t. virtual stage c p +
 * s. Adds f(layer) over them. */
static double stage_sum(const struct sb_layout *l, const struct sb_layout_inputs *in, int s,
                        double (*f)(const struct sb_layout_inputs *, int, int), int tp)
{
    double sum = 0.0;
    for (int c = 0; c < l->chunks; c++) {
        int first, count;
        cut(in->n_layers, l->pp * l->chunks, c * l->pp + s, &first, &count);
        for (int i = first; i < first + count; i++) sum += f(in, i, tp);
    }
    return sum;
}

/* Per-layer quantities of a tp rank (tp = the layout's tp). */
static double layer_flops(const struct sb_layout_inputs *in, int i, int tp)
{
    const struct sb_layer_summary *y = &in->layers[i];
    double split = y->params > 0 ? y->split_params / y->params : 0.0;
    return y->flops * ((1.0 - split) + split / tp);
}

static double layer_params(const struct sb_layout_inputs *in, int i, int tp)
{
    const struct sb_layer_summary *y = &in->layers[i];
    return y->params - y->split_params + y->split_params / tp;
}

/* Activation floats per sample a layer keeps: its output (a column-parallel
 * layer's output is its shard's), the first layer also its input. */
static double layer_act(const struct sb_layout_inputs *in, int i, int tp)
{
    const struct sb_layer_summary *y = &in->layers[i];
    return (y->tp_column && !y->tp_row ? y->out_floats / tp : y->out_floats) +
           (i == 0 ? y->in_floats : 0.0);
}

static double total(const struct sb_layout_inputs *in,
                    double (*f)(const struct sb_layout_inputs *, int, int))
{
    double sum = 0.0;
    for (int i = 0; i < in->n_layers; i++) sum += f(in, i, 1);
    return sum;
}

void sb_layout_tp_bytes(const struct sb_layout_inputs *in, int first, int end, double b,
                        double *forward_bytes, double *backward_bytes)
{
    *forward_bytes = *backward_bytes = 0.0;
    for (int i = first; i < end && i < in->n_layers; i++) {
        *forward_bytes += in->layers[i].tp_row * 4.0 * b * in->layers[i].out_floats;
        *backward_bytes += in->layers[i].tp_column * 4.0 * b * in->layers[i].in_floats;
    }
}

void sb_layout_name(const struct sb_layout *l, char *buf, size_t size)
{
    char v[16] = "";
    if (l->schedule == SB_PP_INTERLEAVED) snprintf(v, sizeof v, "-v%d", l->chunks);
    snprintf(buf, size, "dp%d-tp%d-pp%d-m%d-%s%s-z%d-%s", l->dp, l->tp, l->pp, l->microbatches,
             l->pp > 1 ? sb_pp_kind_name(l->schedule) : "none", v, l->zero_stage,
             sb_rank_order_name(l->order));
}

sb_status sb_layout_check(const struct sb_layout *l, const struct sb_layout_inputs *in,
                          int world_size)
{
    if (l->dp < 1 || l->tp < 1 || l->pp < 1 || l->microbatches < 1)
        return sb_error(SB_ERR_USAGE, "layout: dp, tp, pp and micro-batches must be >= 1");
    if (l->dp * l->tp * l->pp != world_size)
        return sb_error(SB_ERR_USAGE, "layout: dp %d x tp %d x pp %d is not the %d ranks", l->dp,
                        l->tp, l->pp, world_size);
    if (l->pp > SB_LAYOUT_MAX_STAGES)
        return sb_error(SB_ERR_USAGE, "layout: pp %d: at most %d stages", l->pp,
                        SB_LAYOUT_MAX_STAGES);
    if (l->zero_stage < 0 || l->zero_stage > 3)
        return sb_error(SB_ERR_USAGE, "layout: zero stage %d: expected 0..3", l->zero_stage);
    if (l->zero_stage >= 2 && l->pp > 1)
        return sb_error(SB_ERR_USAGE, "layout: zero stage %d with pp %d: refused (a stage would "
                        "reduce-scatter its gradients once per micro-batch; docs/layouts.md)",
                        l->zero_stage, l->pp);
    if ((unsigned)l->order >= SB_RANK_ORDER_COUNT)
        return sb_error(SB_ERR_USAGE, "layout: unknown rank order");
    if (in->global_batch % l->dp != 0 || (in->global_batch / l->dp) % l->microbatches != 0)
        return sb_error(SB_ERR_USAGE, "layout: the global batch %d is not dp %d x m %d x a "
                        "micro-batch", in->global_batch, l->dp, l->microbatches);
    if (l->pp == 1 && (l->microbatches != 1 || l->schedule != SB_PP_GPIPE || l->chunks != 1))
        return sb_error(SB_ERR_USAGE, "layout: micro-batches and schedules need pp > 1");
    if (l->pp > 1) {
        struct sb_pp_shape shape;
        SB_TRY(sb_pp_validate(l->schedule, l->pp, l->microbatches,
                              l->schedule == SB_PP_INTERLEAVED ? l->chunks : 0, in->n_layers, 1,
                              &shape));
        if (shape.chunks != l->chunks)
            return sb_error(SB_ERR_USAGE, "layout: chunks %d for %s", l->chunks,
                            sb_pp_kind_name(l->schedule));
    }
    if (l->tp == 1) return SB_OK;
    int any = 0;
    for (int i = 0; i < in->n_layers; i++) {
        const struct sb_layer_summary *y = &in->layers[i];
        if (y->split_width <= 0) continue;
        any = 1;
        if (y->split_width % l->tp != 0)
            return sb_error(SB_ERR_USAGE, "layout: tp %d does not divide %s's width %d", l->tp,
                            y->name, y->split_width);
    }
    if (!any) return sb_error(SB_ERR_USAGE, "layout: tp %d: the model has no layer to split",
                              l->tp);
    for (int k = 0; k < l->pp * l->chunks; k++) {
        int first, count;
        cut(in->n_layers, l->pp * l->chunks, k, &first, &count);
        /* a block holding its column/row pairs (tp_column and tp_row: the vit's)
         * may start or end a stage */
        if ((in->layers[first].tp_row && !in->layers[first].tp_column) ||
            (in->layers[first + count - 1].tp_column && !in->layers[first + count - 1].tp_row))
            return sb_error(SB_ERR_USAGE, "layout: pp %d (x%d chunks) cuts a column-/row-"
                            "parallel pair apart at layer %s", l->pp, l->chunks,
                            in->layers[in->layers[first].tp_row && !in->layers[first].tp_column
                                           ? first
                                           : first + count - 1]
                                .name);
    }
    return SB_OK;
}

/* cfg for the dp sync strategy ops at zero stage `stage` over dp replicas
 * (its "-stage" option set, as predict's rows set it). */
static void sync_config(const struct sb_strategy_ops *ops, const struct sb_layout *l,
                        const struct sb_layout_inputs *in, struct sb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->replicas = l->dp;
    cfg->optimizer = in->optimizer;
    sb_strategy_options_defaults(ops, cfg);
    for (const struct sb_strategy_option *op = ops->options; op && op->flag; op++) {
        size_t len = strlen(op->flag);
        int v = l->zero_stage;
        if (len >= 6 && strcmp(op->flag + len - 6, "-stage") == 0 && op->kind == SB_OPTION_INT)
            memcpy(cfg->strategy_opts + op->offset, &v, sizeof v);
    }
}

/* dp's gradient sync of `bytes` (the stage's part) over dp ranks on link:
 * the ddp row (--allreduce auto, the first) or zero's row of the stage. */
static sb_status dp_sync(const struct sb_layout *l, const struct sb_layout_inputs *in,
                         const struct sb_link *link, double bytes, double whole_bytes,
                         double backward_s, int layers, double *comm_s, double *exposed_s)
{
    const struct sb_strategy_ops *ops = in->dp_sync[l->zero_stage > 0];
    *comm_s = *exposed_s = 0.0;
    if (l->dp == 1) return SB_OK;
    if (!ops || !ops->comm_model)
        return sb_error(SB_ERR_INPUT, "layout: no cost model for zero stage %d", l->zero_stage);
    int whole = fabs(bytes - whole_bytes) <= 0.5;
    struct sb_comm_model_query q = {
        .link = *link, .replicas = l->dp, .bytes = bytes, .backward_s = backward_s,
        .bucket_bytes = whole && in->n_buckets ? in->bucket_bytes : NULL,
        .n_buckets = whole ? in->n_buckets : 0, .overlap = in->overlap, .layers = layers};
    struct sb_comm_model_row rows[MAX_ROWS];
    int n = ops->comm_model(&q, rows, MAX_ROWS);
    int k = l->zero_stage > 0 ? l->zero_stage - 1 : 0;
    if (n <= k) return sb_error(SB_ERR_INPUT, "layout: %s gives no row for zero stage %d",
                                ops->name, l->zero_stage);
    *comm_s = rows[k].comm_s;
    *exposed_s = isnan(rows[k].exposed_s) ? rows[k].comm_s : rows[k].exposed_s;
    return SB_OK;
}

/* Layer count of stage s (all chunks). */
static double one(const struct sb_layout_inputs *in, int i, int tp)
{
    (void)in, (void)i, (void)tp;
    return 1.0;
}

sb_status sb_layout_predict(const struct sb_layout *l, const struct sb_layout_inputs *in,
                            int world_size, struct sb_layout_prediction *out)
{
    SB_TRY(sb_layout_check(l, in, world_size));
    memset(out, 0, sizeof *out);
    const struct sb_link *tp_link, *pp_link, *dp_link;
    out->tp_cross = sb_grid_axis_crosses_hosts(l->dp, l->tp, l->pp, l->order, SB_COMM_ROLE_TP,
                                               in->ranks_per_host) == 1;
    out->pp_cross = sb_grid_axis_crosses_hosts(l->dp, l->tp, l->pp, l->order, SB_COMM_ROLE_PP,
                                               in->ranks_per_host) == 1;
    out->dp_cross = sb_grid_axis_crosses_hosts(l->dp, l->tp, l->pp, l->order, SB_COMM_ROLE_DP,
                                               in->ranks_per_host) == 1;
    tp_link = sb_link_crossed(&in->links, out->tp_cross);
    pp_link = sb_link_crossed(&in->links, out->pp_cross);
    dp_link = sb_link_crossed(&in->links, out->dp_cross);
    struct sb_pp_shape shape = {l->pp > 1 ? l->schedule : SB_PP_GPIPE, l->pp, l->microbatches,
                                l->chunks};
    double per_replica = (double)in->global_batch / l->dp, b = per_replica / l->microbatches;
    double flops = total(in, layer_flops), params = total(in, layer_params);
    double act = total(in, layer_act);
    double act_per_sample = in->activation_bytes_per_sample > 0
                                ? in->activation_bytes_per_sample : 8.0 * act;
    double worst_f = 0, worst_b = 0, worst_compute = 0, worst_mem = 0, worst_state = 0, worst_act = 0;
    double worst_opt = 0, worst_dp = 0, worst_exposed = 0, worst_tp = 0, worst_pp = 0;
    double tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;
    struct sb_pp_schedule sched = {0};
    if (l->pp > 1 && in->workload && sb_pp_schedule_build(&shape, &sched) != SB_OK)
        sb_pp_schedule_free(&sched); /* the scaled estimate then */
    for (int s = 0; s < l->pp; s++) {
        double share = flops > 0 ? stage_sum(l, in, s, layer_flops, l->tp) / flops : 1.0 / l->pp;
        double t_f = in->forward_s_per_sample * b * share;
        double t_b = in->backward_s_per_sample * b * share;
        if (t_f + t_b > worst_compute) worst_compute = t_f + t_b;
        /* tp collectives of the stage's layers, one micro-batch */
        double fwd = 0, bwd = 0, tp_s = 0;
        for (int c = 0; c < l->chunks && l->tp > 1; c++) {
            int first, count;
            double f1, b1;
            cut(in->n_layers, l->pp * l->chunks, c * l->pp + s, &first, &count);
            for (int i = first; i < first + count; i++) {
                const struct sb_layer_summary *y = &in->layers[i];
                sb_layout_tp_bytes(in, i, i + 1, b, &f1, &b1);
                /* tp_row all-reduces of out_floats forward, tp_column of in_floats back */
                double tf = y->tp_row * sb_cost_ring_allreduce_s(tp_link, l->tp,
                                                                 4.0 * b * y->out_floats);
                double tb = y->tp_column * sb_cost_ring_allreduce_s(tp_link, l->tp,
                                                                    4.0 * b * y->in_floats);
                t_f += tf;
                t_b += tb;
                tp_s += l->microbatches * (tf + tb);
                fwd += f1;
                bwd += b1;
            }
        }
        /* pp: one message per chunk boundary each way per micro-batch */
        double pp_s = 0, pp_b = 0;
        for (int c = 0; c < l->chunks && l->pp > 1; c++) {
            int first, count;
            cut(in->n_layers, l->pp * l->chunks, c * l->pp + s, &first, &count);
            int last_virtual = c * l->pp + s == l->pp * l->chunks - 1;
            double send = last_virtual ? 0.0 : 4.0 * b * in->layers[first + count - 1].out_floats;
            double recv_grad = send;
            double msg_f = send > 0 ? sb_cost_message_s(pp_link, send) : 0.0;
            double msg_b = recv_grad > 0 ? sb_cost_message_s(pp_link, recv_grad) : 0.0;
            t_f += msg_f;
            t_b += msg_b;
            pp_s += l->microbatches * (msg_f + msg_b);
            pp_b += l->microbatches * send; /* activations sent forward; gradients come back */
        }
        /* the stage's parameters and the dp sync of them */
        double stage_params = stage_sum(l, in, s, layer_params, l->tp);
        double dp_comm = 0, dp_exposed = 0;
        sb_status st = dp_sync(l, in, dp_link, 4.0 * stage_params, 4.0 * params, t_b,
                               (int)stage_sum(l, in, s, one, 1), &dp_comm, &dp_exposed);
        if (st) {
            sb_pp_schedule_free(&sched);
            return st;
        }
        double updated = l->zero_stage > 0 ? stage_params / l->dp : stage_params;
        double opt = in->optimizer_s_per_param * updated;
        /* memory: the ledger's entry where the workload states its sizes
         * (layout_memory.h); else the ZeRO accounting of the part + the live
         * activation slots of the scaled estimate */
        struct sb_memory_entry e;
        double state = 0.0, act_bytes = 0.0;
        if (sb_layout_memory(l, in, &sched, s, &e)) {
            state = sb_model_state_bytes(&e.held);
            act_bytes = sb_memory_entry_total_bytes(&e) - state;
        } else {
            struct sb_config cfg;
            const struct sb_strategy_ops *ops = in->dp_sync[l->zero_stage > 0];
            if (ops) {
                sync_config(ops, l, in, &cfg);
                state = sb_strategy_model_state_bytes(ops, &cfg, stage_params);
            }
            double slot_share =
                act > 0 ? stage_sum(l, in, s, layer_act, l->tp) / act / l->chunks : 0;
            int slots = l->pp > 1 ? sb_pp_live_activations(&shape, s) : 1;
            act_bytes = slots * act_per_sample * b * slot_share;
        }
        if (t_f > worst_f) worst_f = t_f;
        if (t_b > worst_b) worst_b = t_b;
        if (state + act_bytes > worst_mem) {
            worst_mem = state + act_bytes;
            worst_state = state;
            worst_act = act_bytes;
            out->ledger = e;
        }
        if (opt > worst_opt) worst_opt = opt;
        if (dp_exposed > worst_exposed) worst_exposed = dp_exposed;
        if (dp_comm > worst_dp) worst_dp = dp_comm;
        if (tp_s > worst_tp) worst_tp = tp_s;
        if (pp_s > worst_pp) worst_pp = pp_s;
        if (l->microbatches * (fwd + bwd) > tp_bytes) tp_bytes = l->microbatches * (fwd + bwd);
        if (pp_b > pp_bytes) pp_bytes = pp_b;
        if (l->dp > 1 && 4.0 * stage_params > dp_bytes) dp_bytes = 4.0 * stage_params;
    }
    sb_pp_schedule_free(&sched);
    /* zb-h1 splits backward into its input-gradient half B and its
     * weight-gradient half W, taken as equal (Qi et al. 2024's t_b = t_w). */
    struct sb_pp_stage_times t = {worst_f, worst_b, 0.0};
    if (shape.kind == SB_PP_ZBH1) t.backward_s = t.weight_s = worst_b / 2;
    out->data_s = in->data_s_per_sample * per_replica;
    out->compute_s = l->microbatches * worst_compute;
    double ideal = sb_pp_ideal_s(&shape, &t);
    out->bubble_s = l->pp > 1 ? sb_pp_bubble_s(&shape, &t) : 0.0;
    out->bubble_share = l->pp > 1 ? sb_pp_bubble_fraction_of_step(&shape, &t) : 0.0;
    out->optimizer_s = worst_opt;
    out->tp_comm_s = worst_tp;
    out->pp_comm_s = worst_pp;
    out->dp_comm_s = worst_dp;
    out->dp_exposed_s = worst_exposed;
    out->tp_bytes = tp_bytes;
    out->pp_bytes = pp_bytes;
    out->dp_bytes = dp_bytes;
    out->model_state_bytes = worst_state;
    out->activation_bytes = worst_act;
    out->memory_bytes = worst_mem;
    out->step_s = out->data_s + ideal + out->bubble_s + worst_exposed + worst_opt;
    for (int k = 0; k <= l->pp && k < 64; k++) {
        int first = in->n_layers, count = 0;
        if (k < l->pp) cut(in->n_layers, l->pp * l->chunks, k, &first, &count);
        out->first_layer[k] = first;
    }
    return SB_OK;
}
