/* The layout model; formulas and sources in layout_model.h and
 * docs/layouts.md. */
#include "strategies/shared/layout_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strategies/shared/buckets.h"
#include "strategies/shared/layout_links.h"
#include "strategies/shared/layout_memory.h"
#include "strategies/shared/pipeline_plan.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/shared/schedule_sim.h"
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
        /* the model's first layer computes no input gradient (nothing
         * upstream needs it: workloads/dense.c stops there), so no f */
        if (i > 0) *backward_bytes += in->layers[i].tp_column * 4.0 * b * in->layers[i].in_floats;
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
            return sb_error(SB_ERR_USAGE, "layout: tp %d does not divide %s's width %d (its split "
                            "tensors' widths and attention heads)", l->tp,
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

/* The bucket cap of ddp's --bucket-mb default (MiB; 25, PyTorch's), read
 * from its option table. */
static double default_bucket_mb(const struct sb_strategy_ops *ops)
{
    for (const struct sb_strategy_option *op = ops->options; op && op->flag; op++)
        if (strcmp(op->flag, "bucket-mb") == 0) return op->def;
    return 25.0;
}

/* ddp (zero stage 0) on the world communicator of `hosts` hosts of R ranks:
 * the buckets (the measured run's when the stage is the whole model, else
 * `bytes` split evenly by the default cap, as ddp's model splits them) each
 * all-reduced as --allreduce auto runs them there (sb_layout_world_allreduce_s:
 * hierarchical, its cross stage sharing each host's link), scheduled against
 * backward by sb_bucket_exposed_s (docs/layouts.md, "Flows that share a
 * host's link"). */
static void world_sync(const struct sb_layout_inputs *in, int hosts, double bytes, int whole,
                       double backward_s, double *comm_s, double *exposed_s)
{
    double b[SB_DETAIL_VALUES_MAX], t[SB_DETAIL_VALUES_MAX];
    int nb = 0;
    if (whole && in->bucket_bytes && in->n_buckets > 0 && in->n_buckets <= SB_DETAIL_VALUES_MAX) {
        for (nb = 0; nb < in->n_buckets; nb++) b[nb] = in->bucket_bytes[nb];
    } else {
        nb = (int)ceil(bytes / (default_bucket_mb(in->dp_sync[0]) * 1048576.0));
        if (nb < 1) nb = 1;
        if (nb > SB_DETAIL_VALUES_MAX) nb = SB_DETAIL_VALUES_MAX;
        for (int i = 0; i < nb; i++) b[i] = bytes / nb;
    }
    *comm_s = 0.0;
    for (int i = 0; i < nb; i++) {
        enum sb_allreduce_algo a;
        t[i] = sb_layout_world_allreduce_s(&in->links.intra, &in->links.inter, hosts,
                                           in->ranks_per_host, b[i], &a);
        *comm_s += t[i];
    }
    *exposed_s = sb_bucket_exposed_s(b, t, nb, in->overlap ? backward_s : 0.0);
}

/* dp's gradient sync of `bytes` (the stage's part) over dp ranks on link
 * (the cross-host link already divided by the stage's share of it): the
 * ddp row (--allreduce auto, the first) or zero's row of the stage; a
 * dp-only ddp layout over hosts of 2+ ranks by world_sync. */
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
    int hosts = sb_layout_world_hosts(l->dp, in->ranks_per_host);
    if (l->zero_stage == 0 && l->tp == 1 && l->pp == 1 && hosts) {
        world_sync(in, hosts, bytes, whole, backward_s, comm_s, exposed_s);
        return SB_OK;
    }
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

/* One tp all-reduce of `bytes` over tp ranks as the tp communicator runs
 * it: --allreduce auto's flat rule (sb_allreduce_choose: recursive doubling
 * below ~160 kB at tp 2, else the ring; a tp communicator is a split, never
 * grouped into hosts), as the tensor strategy's own model prices it
 * (sb_tp_traffic_seconds). */
static double tp_allreduce_s(const struct sb_link *link, int tp, double bytes)
{
    return sb_cost_allreduce_s(link, sb_allreduce_choose((size_t)bytes, tp), tp, bytes);
}

/* Each stage's share (layout_links.h) of the cross-host links its tp, pp
 * and dp flows cross, the flows weighed by what one group of the stage
 * sends per step: tp its collectives' bytes, pp its boundary activation,
 * dp its parameters' gradient. */
static void stage_shares(const struct sb_layout *l, const struct sb_layout_inputs *in,
                         double *tp_share, double *pp_share, double *dp_share)
{
    double tp_w[SB_LAYOUT_MAX_STAGES], pp_w[SB_LAYOUT_MAX_STAGES], dp_w[SB_LAYOUT_MAX_STAGES];
    for (int s = 0; s < l->pp; s++) {
        tp_w[s] = pp_w[s] = 0.0;
        for (int c = 0; c < l->chunks; c++) {
            int first, count;
            double f, b;
            cut(in->n_layers, l->pp * l->chunks, c * l->pp + s, &first, &count);
            sb_layout_tp_bytes(in, first, first + count, 1.0, &f, &b);
            tp_w[s] += f + b;
            if (c * l->pp + s < l->pp * l->chunks - 1)
                pp_w[s] += in->layers[first + count - 1].out_floats;
        }
        dp_w[s] = stage_sum(l, in, s, layer_params, l->tp);
    }
    enum sb_rank_order o = l->order;
    int r = in->ranks_per_host;
    if (sb_layout_link_share(l->dp, l->tp, l->pp, o, SB_COMM_ROLE_TP, r, tp_w, tp_share) ||
        sb_layout_link_share(l->dp, l->tp, l->pp, o, SB_COMM_ROLE_PP, r, pp_w, pp_share) ||
        sb_layout_link_share(l->dp, l->tp, l->pp, o, SB_COMM_ROLE_DP, r, dp_w, dp_share))
        for (int s = 0; s < l->pp; s++) tp_share[s] = pp_share[s] = dp_share[s] = 1.0;
}

/* One pass of a stage on a micro-batch of b samples, s, from the measured
 * pass at the run's batch B (per_sample s a sample): its fixed part phi
 * (the compute probe's fit: what does not grow with the batch, the
 * weights' traffic) by the stage's share of the parameters p_share, the
 * rest by its share of the work w_share and the samples:
 * per_sample B (phi p_share + (1 - phi) (b / B) w_share). Without a fit
 * (phi 0 or B unknown) per_sample b w_share. */
static double pass_s(double per_sample, double phi, int B, double b, double p_share,
                     double w_share)
{
    if (!(phi > 0 && phi < 1 && B > 0)) return per_sample * b * w_share;
    return per_sample * B * (phi * p_share + (1.0 - phi) * (b / B) * w_share);
}

/* The share of a core the measured run's compute had: measured
 * (probe_core_share, at most 1), else min(1, C / probe_ranks). */
static double probe_share(const struct sb_layout_inputs *in)
{
    double s = in->probe_core_share > 0 ? in->probe_core_share
                                        : (double)in->shared_cores / in->probe_ranks;
    return s < 1.0 ? s : 1.0;
}

/* The share of a core a layout's rank computes at when n ranks compute at
 * once on in->shared_cores cores C: the probe's share scaled by min(1, C/n)
 * over the min(1, C/N) its N ranks would have had computing all at once,
 * at most a whole core. Relative, so that a layout whose ranks compute
 * alike (dp and tp layouts of the probe's rank count) gets the share the
 * probe's ranks measured: they did not all compute at once (a 2 x 2 vit
 * probe's 4 ranks on 2 cores had 0.97 of a core each, an 8-rank one 0.65;
 * docs/layouts.md, "The probe's share, relative, and the cores as a
 * resource", 2026-11-29). Without a measured share this is min(1, C/n), as
 * before. */
static double layout_share(const struct sb_layout_inputs *in, double n)
{
    double c = in->shared_cores;
    double g_n = c / n < 1.0 ? c / n : 1.0;
    double g_probe = c / in->probe_ranks < 1.0 ? c / in->probe_ranks : 1.0;
    double s = probe_share(in) * g_n / g_probe;
    return s < 1.0 ? s : 1.0;
}

/* The factor the measured compute per sample takes in this layout when
 * every rank shares in->shared_cores cores C (0: none; 1): a rank computing
 * beside n - 1 others gets min(1, C / n) of a core (processor sharing, as
 * layout_links.h's links; ranks that wait yield their core, the cluster's
 * mpi_yield_when_idle). The measured run computed on all its ranks
 * (probe_ranks, data parallel) at its measured share (in->probe_core_share,
 * its compute's thread CPU time over wall), else min(1, C / probe_ranks);
 * a layout's ranks compute at once in proportion to their work,
 * n_eff = dp tp sum_s w_s / max_s w_s (w_s the stage's share of the work):
 * a pipeline whose last stage is light frees its cores for the others.
 * Factor: the probe's share / layout_share(n_eff). A pipeline's n_eff is
 * then refined over its span (pipeline_core_scale), from this one. */
static double core_share_scale(const struct sb_layout *l, const struct sb_layout_inputs *in,
                               double flops)
{
    if (in->shared_cores <= 0 || in->probe_ranks <= 0) return 1.0;
    double sum = 0.0, most = 0.0;
    for (int s = 0; s < l->pp; s++) {
        double w = flops > 0 ? stage_sum(l, in, s, layer_flops, l->tp) / flops : 1.0 / l->pp;
        sum += w;
        if (w > most) most = w;
    }
    double n_eff = most > 0 ? l->dp * l->tp * sum / most : l->dp * l->tp * l->pp;
    return probe_share(in) / layout_share(in, n_eff);
}

/* The host of stage s's first rank (dp 0, tp 0) on hosts of ranks_per_host
 * consecutive ranks: where the simulation puts the stage's messages (every
 * (dp, tp) pair of a stage sends at once, which the link's share prices). */
static int stage_host(const struct sb_layout *l, int s, int ranks_per_host)
{
    struct sb_grid_coords c = {0, 0, s};
    return sb_grid_rank_of(l->dp, l->tp, l->pp, l->order, c) / ranks_per_host;
}

/* The pipeline's span, first forward to its last stage's dp sync's end, in
 * *span_s, and to its flush (the last backward, the syncs left out) in
 * *flush_s: one replica's schedule simulated (schedule_sim.h) with stage s taking f[s] and
 * b[s] per micro-batch (its compute and tp collectives, all its chunks;
 * zb-h1's backward in equal halves B = W, Qi et al. 2024's t_b = t_w) and
 * each boundary's message p2p[s] (s to s + 1, or interleaved's wrap), where
 * a boundary that crosses hosts (cross[s]) passes the sending host's one
 * link out and the receiving host's link in, each one message at a time in
 * the order they are sent: a middle stage's activations forward and
 * gradients back leave its host one after the other in 1f1b's steady
 * state, where each direction of a boundary was priced as a link of its
 * own before (docs/layouts.md, "A host's link carries both directions",
 * 2026-11-29). Stage s's dp sync, sync[s] (its exposed part), starts when
 * its last backward ends and, where dp crosses hosts, takes the stage's
 * host's links as a message does, ahead of the gradients the stage sends
 * after that backward (its buckets are ready during it): a later stage's
 * sync delays the drain's last gradients ("The dp sync on the drain's
 * link"), by sync_weight[s] (its flows per the boundary's on that link)
 * times the shorter of the sync's rest and the message. Without a
 * pipeline's links in the way that adds the slowest stage's sync after the
 * flush, as before. Where stage s's tp group spans hosts (tp_wire, NULL
 * where it does not), its forwards' and backwards' tp collectives,
 * tp_wire[s] and tp_wire[P + s] seconds a micro-batch, pass the stage's
 * host's links too and share them with the boundary's messages, tp_weight[s]
 * the tp flows per the boundary's there ("The tp collectives on the
 * boundary's link").
 * Errors: those of sb_pp_schedule_build and sb_pp_simulate. */
static sb_status pipeline_span(const struct sb_layout *l, const struct sb_layout_inputs *in,
                               const struct sb_pp_shape *shape, const double *f, const double *b,
                               const double *p2p, const int *cross, const double *sync,
                               const double *sync_weight, int dp_cross, const double *tp_wire,
                               const double *tp_weight, double *flush_s, double *span_s)
{
    int p = l->pp, v = l->chunks, r = in->ranks_per_host > 0 ? in->ranks_per_host : 1;
    double fs[SB_LAYOUT_MAX_STAGES], bs[SB_LAYOUT_MAX_STAGES], hs[SB_LAYOUT_MAX_STAGES];
    int act[2 * SB_LAYOUT_MAX_STAGES], grad[2 * SB_LAYOUT_MAX_STAGES], hosts = 1;
    int tail[2 * SB_LAYOUT_MAX_STAGES], tp_on[2 * SB_LAYOUT_MAX_STAGES];
    double tp_s[2 * SB_LAYOUT_MAX_STAGES];
    for (int s = 0; s < p; s++) {
        fs[s] = f[s] / v;
        bs[s] = b[s] / v;
        hs[s] = bs[s] / 2;
        int from = stage_host(l, s, r), to = stage_host(l, (s + 1) % p, r);
        if (from + 1 > hosts) hosts = from + 1;
        act[2 * s] = cross[s] ? 2 * from : -1;   /* the sender's way out */
        act[2 * s + 1] = cross[s] ? 2 * to + 1 : -1; /* the receiver's way in */
        grad[2 * s] = cross[s] ? 2 * to : -1;
        grad[2 * s + 1] = cross[s] ? 2 * from + 1 : -1;
        tail[2 * s] = dp_cross ? 2 * from : -1; /* the dp sync: the stage's host's links */
        tail[2 * s + 1] = dp_cross ? 2 * from + 1 : -1;
        /* the tp collectives across hosts: the stage's host's ring flows out and in */
        tp_on[2 * s] = tp_wire ? 2 * from : -1;
        tp_on[2 * s + 1] = tp_wire ? 2 * from + 1 : -1;
        tp_s[s] = tp_wire ? tp_wire[s] / v : 0.0;
        tp_s[p + s] = tp_wire ? tp_wire[p + s] / v : 0.0;
    }
    struct sb_pp_times t = {.forward_s = fs, .backward_s = bs, .backward_input_s = hs,
                            .backward_weight_s = hs, .p2p_s = p2p, .act_links = act,
                            .grad_links = grad, .n_links = 2 * hosts, .tail_s = sync,
                            .tail_links = tail, .tail_weight = sync_weight,
                            .compute_link_s = tp_wire ? tp_s : NULL,
                            .compute_links = tp_wire ? tp_on : NULL, .compute_weight = tp_weight};
    struct sb_pp_schedule sched;
    struct sb_pp_timeline tl;
    SB_TRY(sb_pp_schedule_build(shape, &sched));
    sb_status st = sb_pp_simulate(&sched, &t, &tl);
    if (!st) {
        *span_s = tl.step_s;
        sb_pp_timeline_free(&tl);
        t.tail_s = NULL; /* the flush alone */
        st = sb_pp_simulate(&sched, &t, &tl);
    }
    sb_pp_schedule_free(&sched);
    SB_TRY(st);
    *flush_s = tl.step_s;
    sb_pp_timeline_free(&tl);
    return SB_OK;
}

/* The prediction of layout l with the compute per sample scaled by
 * core_scale (core_share_scale's factor); *busy_s gets the sum over the
 * stages of one replica of their time on a core in the step: their
 * compute (m (t_f + t_b)) and, where the tp groups are within a host, their
 * tp all-reduces (shared memory: copies and sums on the ranks' cores; a
 * cross-host one leaves the CPU to the network), which pipeline_core_scale
 * turns into the ranks computing at once. */
static sb_status predict_at(const struct sb_layout *l, const struct sb_layout_inputs *in,
                            double core_scale, struct sb_layout_prediction *out, double *busy_s)
{
    memset(out, 0, sizeof *out);
    *busy_s = 0.0;
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
    /* each stage's share of the host links its axes' flows cross */
    double tp_share[SB_LAYOUT_MAX_STAGES], pp_share[SB_LAYOUT_MAX_STAGES],
        dp_share[SB_LAYOUT_MAX_STAGES];
    stage_shares(l, in, tp_share, pp_share, dp_share);
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
    double stage_f[SB_LAYOUT_MAX_STAGES], stage_b[SB_LAYOUT_MAX_STAGES];
    double p2p[SB_LAYOUT_MAX_STAGES], sync[SB_LAYOUT_MAX_STAGES];
    double sync_weight[SB_LAYOUT_MAX_STAGES], tp_weight[SB_LAYOUT_MAX_STAGES];
    double tp_wire[2 * SB_LAYOUT_MAX_STAGES];
    int cross[SB_LAYOUT_MAX_STAGES];
    for (int s = 0; s < l->pp; s++) {
        struct sb_link tp_s_link = sb_link_shared(tp_link, out->tp_cross ? tp_share[s] : 1.0);
        struct sb_link pp_s_link = sb_link_shared(pp_link, out->pp_cross ? pp_share[s] : 1.0);
        struct sb_link dp_s_link = sb_link_shared(dp_link, out->dp_cross ? dp_share[s] : 1.0);
        double share = flops > 0 ? stage_sum(l, in, s, layer_flops, l->tp) / flops : 1.0 / l->pp;
        double p_share = params > 0 ? stage_sum(l, in, s, layer_params, l->tp) / params : share;
        double t_f = pass_s(in->forward_s_per_sample, in->forward_fixed_fraction,
                            in->probe_batch, b, p_share, share) * core_scale;
        double t_b = pass_s(in->backward_s_per_sample, in->backward_fixed_fraction,
                            in->probe_batch, b, p_share, share) * core_scale;
        if (t_f + t_b > worst_compute) worst_compute = t_f + t_b;
        *busy_s += l->microbatches * (t_f + t_b);
        /* tp collectives of the stage's layers, one micro-batch */
        double fwd = 0, bwd = 0, tp_s = 0;
        tp_wire[s] = tp_wire[l->pp + s] = 0.0;
        for (int c = 0; c < l->chunks && l->tp > 1; c++) {
            int first, count;
            double f1, b1;
            cut(in->n_layers, l->pp * l->chunks, c * l->pp + s, &first, &count);
            for (int i = first; i < first + count; i++) {
                const struct sb_layer_summary *y = &in->layers[i];
                sb_layout_tp_bytes(in, i, i + 1, b, &f1, &b1);
                /* tp_row all-reduces of out_floats forward, tp_column of in_floats back */
                double tf = y->tp_row * tp_allreduce_s(&tp_s_link, l->tp,
                                                       4.0 * b * y->out_floats);
                double tb = (i > 0) * y->tp_column * tp_allreduce_s(&tp_s_link, l->tp,
                                                          4.0 * b * y->in_floats);
                t_f += tf;
                t_b += tb;
                tp_wire[s] += tf;
                tp_wire[l->pp + s] += tb;
                tp_s += l->microbatches * (tf + tb);
                fwd += f1;
                bwd += b1;
            }
        }
        /* pp: one message per chunk boundary each way per micro-batch, on
         * the link that boundary crosses: the within-host link where every
         * (dp, tp) pair of the two stages shares a host, else the cross-host
         * link at the stage's share of it (a pipeline of 4 stages on 2 hosts
         * of 2 crosses hosts between stages 1 and 2 only; pricing every
         * boundary there put 3 cross-host messages a micro-batch where 1
         * runs: docs/layouts.md, "The pipeline's boundaries, one by one") */
        double pp_s = 0, pp_b = 0;
        int sends = 0;
        p2p[s] = 0.0;
        cross[s] = l->pp > 1 && sb_grid_stages_cross_hosts(l->dp, l->tp, l->pp, l->order, s,
                                                           (s + 1) % l->pp,
                                                           in->ranks_per_host) != 0;
        for (int c = 0; c < l->chunks && l->pp > 1; c++) {
            int first, count;
            cut(in->n_layers, l->pp * l->chunks, c * l->pp + s, &first, &count);
            int last_virtual = c * l->pp + s == l->pp * l->chunks - 1;
            double send = last_virtual ? 0.0 : 4.0 * b * in->layers[first + count - 1].out_floats;
            if (send <= 0) continue;
            double msg = sb_cost_message_s(cross[s] ? &pp_s_link : &in->links.intra, send);
            p2p[s] += msg;
            sends++;
            pp_s += l->microbatches * 2 * msg; /* activations forward, gradients back */
            pp_b += l->microbatches * send;
        }
        if (sends > 1) p2p[s] /= sends; /* the simulation's one message of the boundary */
        /* a within-host tp all-reduce is the CPU's work too (shared memory:
         * its ranks copy and add), so its ranks count as busy for the cores */
        if (!out->tp_cross) *busy_s += tp_s;
        /* the stage's parameters and the dp sync of them */
        double stage_params = stage_sum(l, in, s, layer_params, l->tp);
        double dp_comm = 0, dp_exposed = 0;
        sb_status st = dp_sync(l, in, &dp_s_link, 4.0 * stage_params, 4.0 * params, t_b,
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
        stage_f[s] = t_f;
        stage_b[s] = t_b;
        if (state + act_bytes > worst_mem) {
            worst_mem = state + act_bytes;
            worst_state = state;
            worst_act = act_bytes;
            out->ledger = e;
        }
        if (opt > worst_opt) worst_opt = opt;
        if (dp_exposed > worst_exposed) worst_exposed = dp_exposed;
        sync[s] = dp_exposed;
        /* its flows per the boundary's on the stage's host link (the axes'
         * shares of it): a message beside the sync gets 1 / (1 + that) of
         * the link it had */
        sync_weight[s] = out->pp_cross && pp_share[s] > 0 ? dp_share[s] / pp_share[s] : 1.0;
        tp_weight[s] = out->pp_cross && pp_share[s] > 0 ? tp_share[s] / pp_share[s] : 1.0;
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
    /* the span: the schedule simulated with every stage's own times and the
     * boundaries' messages on the hosts' links (pipeline_span); the bubble
     * is what it takes beyond the slowest stage's compute */
    double span = 0.0, flush = 0.0;
    if (l->pp > 1) {
        sb_status st = pipeline_span(l, in, &shape, stage_f, stage_b, p2p, cross, sync,
                                     sync_weight, out->dp_cross,
                                     out->tp_cross ? tp_wire : NULL, tp_weight, &flush,
                                     &span);
        if (st) return st;
        /* what the dp syncs add to the step: the slowest's exposed part,
         * or more where a sync delays the drain on its host's link */
        worst_exposed = span > flush ? span - flush : 0.0;
    }
    out->data_s = in->data_s_per_sample * per_replica;
    out->compute_s = l->microbatches * worst_compute;
    double ideal = sb_pp_ideal_s(&shape, &t);
    out->bubble_s = l->pp > 1 && flush > ideal ? flush - ideal : 0.0;
    out->bubble_share = l->pp > 1 ? out->bubble_s / (ideal + out->bubble_s) : 0.0;
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

/* A pipeline's ranks do not all compute at once: a stage idles in the
 * fill and the drain, and while its link is the bottleneck. The ranks
 * computing at once, averaged over the pipeline's span (its compute and
 * bubble), are n = dp tp busy / span, busy the replica's stages' compute
 * summed, with their within-host tp all-reduces (predict_at; processor
 * sharing of C cores between them: each gets
 * min(1, C / n) of a core). Balanced and compute-bound, span = (m + p - 1)
 * t and busy = p m t: n = dp tp p m / (m + p - 1), which the work-weighted
 * rule (core_share_scale) took as dp tp p. The share changes the times it
 * is computed from, so it is iterated from core_share_scale's (a fixed
 * point; 4 rounds move it by well under 1 %). Returns the factor as
 * core_share_scale's: the probe's share / layout_share(n). */
static double pipeline_core_scale(const struct sb_layout *l, const struct sb_layout_inputs *in,
                                  double scale, struct sb_layout_prediction *out,
                                  double *ranks)
{
    double probe = probe_share(in);
    for (int round = 0; round < 4; round++) {
        double busy = 0.0;
        if (predict_at(l, in, scale, out, &busy) != SB_OK) break;
        double span = out->step_s - out->data_s - out->dp_exposed_s - out->optimizer_s;
        if (!(span > 0 && busy > 0)) break;
        double n = l->dp * l->tp * busy / span;
        if (n < 1.0) n = 1.0;
        scale = probe / layout_share(in, n);
        *ranks = n;
    }
    return scale;
}

/* The machine's cores as a resource (shared cores C only): every rank's
 * compute of a step, at a whole core (busy / scale is the replica's compute
 * at the probe's share; times that share: at a whole core), summed over the
 * dp tp replicas of it (busy holds a stage's within-host tp all-reduces too:
 * their copies and sums run on the ranks' cores), over C cores:
 * out->cores_s. However the ranks take
 * turns, a step lasts at least data + cores_s + optimizer; the step is
 * raised to that where the critical path priced less (a probe whose ranks
 * computed one after another measured a share near 1 each while the cores
 * were busy the whole time; docs/layouts.md, "The probe's share, relative,
 * and the cores as a resource", 2026-11-29). A pipeline's compute all falls
 * in its span (ideal + bubble): every replica's pipeline runs between one
 * dp sync and the next, and that sync starts after the flush (the model
 * exposes it whole), so the span itself lasts at least cores_s and the dp
 * sync comes on top (docs/layouts.md, "A pipeline's span is at least the
 * cores' time", 2026-11-29). Communication's own CPU time is not in it. */
static void cores_floor(const struct sb_layout *l, const struct sb_layout_inputs *in,
                        double scale, double busy, struct sb_layout_prediction *out)
{
    out->cores_s = 0.0;
    if (in->shared_cores <= 0 || in->probe_ranks <= 0 || !(scale > 0)) return;
    out->cores_s = l->dp * l->tp * busy / scale * probe_share(in) / in->shared_cores;
    double floor_s = out->data_s + out->cores_s + out->optimizer_s;
    if (l->pp > 1) floor_s += out->dp_exposed_s;
    if (floor_s > out->step_s) out->step_s = floor_s;
}

sb_status sb_layout_predict(const struct sb_layout *l, const struct sb_layout_inputs *in,
                            int world_size, struct sb_layout_prediction *out)
{
    SB_TRY(sb_layout_check(l, in, world_size));
    double flops = total(in, layer_flops), busy = 0.0;
    double scale = core_share_scale(l, in, flops);
    double ranks = in->shared_cores > 0 && in->probe_ranks > 0 ? (double)l->dp * l->tp : 0.0;
    if (l->pp > 1 && ranks > 0) scale = pipeline_core_scale(l, in, scale, out, &ranks);
    SB_TRY(predict_at(l, in, scale, out, &busy));
    out->ranks_computing = ranks;
    cores_floor(l, in, scale, busy, out);
    return SB_OK;
}
