/* A pipeline's measurements per stage beside its formulas; see
 * pipeline_stats.h. */
#include "strategies/shared/pipeline_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/shared/schedule_critical.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/shared/schedule_sim.h"

sb_status sb_pp_stats_init(struct sb_pp_stats *st, const struct sb_pp_shape *shape, int stage,
                           int mb, const size_t *boundary, int world_size, int world_rank)
{
    memset(st, 0, sizeof *st);
    st->shape = *shape;
    st->stage = stage;
    st->mb = mb;
    st->world_size = world_size;
    st->world_rank = world_rank;
    size_t n = (size_t)shape->stages * SB_PP_STAT_COUNT;
    int nb = shape->stages * shape->chunks - 1;
    st->sum = calloc(n, sizeof *st->sum);
    st->scratch = calloc(n + (size_t)world_size, sizeof *st->scratch);
    st->boundary = calloc((size_t)(nb > 0 ? nb : 1), sizeof *st->boundary);
    if (!st->sum || !st->scratch || !st->boundary)
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    if (nb > 0) memcpy(st->boundary, boundary, (size_t)nb * sizeof *boundary);
    return SB_OK;
}

void sb_pp_stats_free(struct sb_pp_stats *st)
{
    free(st->sum);
    free(st->scratch);
    free(st->boundary);
    memset(st, 0, sizeof *st);
}

void sb_pp_stats_add(struct sb_pp_stats *st, enum sb_pp_stat what, double seconds)
{
    st->mine[what] += seconds;
}

void sb_pp_stats_bytes(struct sb_pp_stats *st, double bytes) { st->mine[SB_PP_STAT_BYTES] += bytes; }

void sb_pp_stats_live(struct sb_pp_stats *st, int delta)
{
    st->live += delta;
    if (st->live > st->mine[SB_PP_STAT_PEAK]) st->mine[SB_PP_STAT_PEAK] = st->live;
}

sb_status sb_pp_stats_end_step(struct sb_pp_stats *st, struct sb_comm *world, int replicas,
                               double step_s, double end_s, double *last_end_s)
{
    int P = st->shape.stages, K = SB_PP_STAT_COUNT;
    size_t n = (size_t)P * K + (size_t)st->world_size;
    st->mine[SB_PP_STAT_STEP] = step_s;
    memset(st->scratch, 0, n * sizeof *st->scratch);
    for (int k = 0; k < K; k++) st->scratch[st->stage * K + k] = st->mine[k] / replicas;
    /* a slot per world rank, the others' zero: the sum is every rank's end */
    st->scratch[(size_t)P * K + (size_t)st->world_rank] = end_s;
    memset(st->mine, 0, sizeof st->mine);
    st->live = 0;
    SB_TRY(sb_comm_allreduce_f64(world, st->scratch, n));
    for (int i = 0; i < P * K; i++) st->sum[i] += st->scratch[i];
    *last_end_s = end_s;
    for (int r = 0; r < st->world_size; r++)
        if (st->scratch[(size_t)P * K + (size_t)r] > *last_end_s)
            *last_end_s = st->scratch[(size_t)P * K + (size_t)r];
    st->steps++;
    return SB_OK;
}

void sb_pp_stats_reset(struct sb_pp_stats *st)
{
    memset(st->sum, 0, (size_t)st->shape.stages * SB_PP_STAT_COUNT * sizeof *st->sum);
    st->steps = 0;
}

/* Counted p2p bytes of stage r per step by the formula: each of its
 * virtual stages receives its input and sends its input gradient (not the
 * first), sends its output and receives its output gradient (not the
 * last): M micro-batches of mb samples, 4-byte floats. */
static double bytes_formula(const struct sb_pp_stats *st, int r)
{
    const struct sb_pp_shape *sh = &st->shape;
    int n = sh->stages * sh->chunks;
    double b = 0;
    for (int v = 0; v < sh->chunks; v++) {
        int vs = v * sh->stages + r;
        if (vs > 0) b += 2.0 * sh->microbatches * st->mb * (double)st->boundary[vs - 1] * 4;
        if (vs < n - 1) b += 2.0 * sh->microbatches * st->mb * (double)st->boundary[vs] * 4;
    }
    return b;
}

void sb_pp_stats_describe(const struct sb_pp_stats *st, const struct sb_pp_schedule *sched,
                          struct sb_strategy_details *det)
{
    int P = st->shape.stages, K = SB_PP_STAT_COUNT, M = st->shape.microbatches;
    if (st->steps < 1 || P > SB_DETAIL_VALUES_MAX) return;
    double v[SB_PP_STAT_COUNT][SB_DETAIL_VALUES_MAX], x[SB_DETAIL_VALUES_MAX];
    for (int r = 0; r < P; r++)
        for (int k = 0; k < K; k++) v[k][r] = st->sum[r * K + k] / st->steps;
    static const char *const ms_keys[] = {"stage_forward_ms", "stage_backward_ms",
                                          "stage_bubble_ms", "stage_p2p_ms", "stage_step_ms"};
    for (int k = 0; k <= SB_PP_STAT_STEP; k++) {
        for (int r = 0; r < P; r++) x[r] = 1e3 * v[k][r];
        sb_details_add(det, ms_keys[k], 1, x, P);
    }
    if (st->shape.kind == SB_PP_ZBH1) { /* stage_backward_ms is then B's */
        for (int r = 0; r < P; r++) x[r] = 1e3 * v[SB_PP_STAT_WEIGHT][r];
        sb_details_add(det, "stage_weight_ms", 1, x, P);
    }
    sb_details_add(det, "stage_live_activations", 1, v[SB_PP_STAT_PEAK], P);
    for (int r = 0; r < P; r++) x[r] = sb_pp_live_activations(&st->shape, r);
    sb_details_add(det, "stage_live_activations_formula", 1, x, P);
    sb_details_add(det, "stage_activation_bytes", 1, v[SB_PP_STAT_ACT_LEDGER], P);
    sb_details_add(det, "stage_activation_bytes_from_slots", 1, v[SB_PP_STAT_ACT_SLOTS], P);
    sb_details_add(det, "stage_p2p_bytes", 1, v[SB_PP_STAT_BYTES], P);
    for (int r = 0; r < P; r++) x[r] = bytes_formula(st, r);
    sb_details_add(det, "stage_p2p_bytes_formula", 1, x, P);
    double f = 0, b = 0, w = 0, bub = 0;
    for (int r = 0; r < P; r++) {
        x[r] = v[SB_PP_STAT_STEP][r] > 0 ? v[SB_PP_STAT_BUBBLE][r] / v[SB_PP_STAT_STEP][r] : 0;
        f += v[SB_PP_STAT_FORWARD][r] / P;
        b += v[SB_PP_STAT_BACKWARD][r] / P;
        w += v[SB_PP_STAT_WEIGHT][r] / P;
        bub += v[SB_PP_STAT_BUBBLE][r] / P;
    }
    sb_details_add(det, "stage_bubble_fraction", 1, x, P);
    /* The formula's definition: every stage idle for another stage, in
     * receives and after its last action, over the pipeline's step. */
    double idle_all = 0, span_all = 0;
    for (int r = 0; r < P; r++) {
        x[r] = 1e3 * v[SB_PP_STAT_DRAIN][r];
        idle_all += v[SB_PP_STAT_BUBBLE][r] + v[SB_PP_STAT_DRAIN][r];
        span_all += v[SB_PP_STAT_SPAN][r];
    }
    sb_details_add(det, "stage_drain_ms", 1, x, P);
    for (int r = 0; r < P; r++) x[r] = 1e3 * v[SB_PP_STAT_SPAN][r];
    sb_details_add(det, "stage_pipeline_step_ms", 1, x, P);
    double measured = span_all > 0 ? idle_all / span_all : 0;
    sb_details_add(det, "bubble_fraction_measured", 0, &measured, 1);
    /* The formula with the run's own mean times per micro-batch (a stage's
     * forward of all its chunks over M; zb-h1: B and W apart, w 0 for the
     * others). */
    struct sb_pp_stage_times t = {f / M, b / M, w / M};
    double frac = 0, idle = 0, ideal = sb_pp_ideal_s(&st->shape, &t);
    double meas = f + b + w > 0 ? bub / (f + b + w) : 0; /* receive waits (its 1.12 meaning) */
    /* Exact for equal stages (the schedule's critical path); left out when
     * it cannot be computed (out of memory). */
    if (sb_pp_bubble_exact_s(&st->shape, &t, &idle) == SB_OK &&
        sb_pp_bubble_fraction_exact(&st->shape, &t, &frac) == SB_OK) {
        double over = ideal > 0 ? idle / ideal : 0;
        sb_details_add(det, "bubble_fraction_formula", 0, &frac, 1);
        sb_details_add(det, "bubble_over_ideal_formula", 0, &over, 1);
    }
    sb_details_add(det, "bubble_over_ideal_measured", 0, &meas, 1);
    /* Each stage's own times (per chunk) in the simulation. */
    double fs[SB_DETAIL_VALUES_MAX], bs[SB_DETAIL_VALUES_MAX], ws[SB_DETAIL_VALUES_MAX];
    double p2p[SB_DETAIL_VALUES_MAX];
    int per = M * st->shape.chunks;
    for (int r = 0; r < P; r++) {
        fs[r] = v[SB_PP_STAT_FORWARD][r] / per;
        bs[r] = v[SB_PP_STAT_BACKWARD][r] / per;
        ws[r] = v[SB_PP_STAT_WEIGHT][r] / per;
        p2p[r] = 0;
    }
    struct sb_pp_times times = {.forward_s = fs, .backward_s = bs, .backward_input_s = bs,
                                .backward_weight_s = ws, .p2p_s = p2p};
    struct sb_pp_timeline tl;
    if (sb_pp_simulate(sched, &times, &tl) == SB_OK) {
        for (int r = 0; r < P; r++) x[r] = 1e3 * tl.bubble_s[r];
        sb_details_add(det, "stage_bubble_simulated_ms", 1, x, P);
        sb_pp_timeline_free(&tl);
    }
}

void sb_pp_stats_print(const struct sb_pp_stats *st, FILE *out)
{
    int P = st->shape.stages, K = SB_PP_STAT_COUNT, M = st->shape.microbatches;
    if (st->steps < 1) return;
    double f = 0, b = 0, w = 0, bub = 0, idle = 0, span = 0, lo = 1, hi = 0;
    for (int r = 0; r < P; r++) {
        const double *v = st->sum + (size_t)r * K;
        f += v[SB_PP_STAT_FORWARD] / P;
        b += v[SB_PP_STAT_BACKWARD] / P;
        w += v[SB_PP_STAT_WEIGHT] / P;
        bub += v[SB_PP_STAT_BUBBLE] / P;
        idle += (v[SB_PP_STAT_BUBBLE] + v[SB_PP_STAT_DRAIN]) / P;
        span += v[SB_PP_STAT_SPAN] / P;
        double frac = v[SB_PP_STAT_STEP] > 0 ? v[SB_PP_STAT_BUBBLE] / v[SB_PP_STAT_STEP] : 0;
        if (frac < lo) lo = frac;
        if (frac > hi) hi = frac;
    }
    struct sb_pp_stage_times t = {f / st->steps / M, b / st->steps / M, w / st->steps / M};
    double exact = 0, frac = 0, ideal = sb_pp_ideal_s(&st->shape, &t);
    if (sb_pp_bubble_exact_s(&st->shape, &t, &exact) != SB_OK ||
        sb_pp_bubble_fraction_exact(&st->shape, &t, &frac) != SB_OK)
        exact = frac = NAN; /* out of memory: printed as nan */
    fprintf(out, "pipeline %s: bubble %.1f%% of the pipeline's step measured (receive waits "
            "of the stages' own steps %.1f%% .. %.1f%%), formula %.1f%% with the run's times; "
            "bubble/ideal %.2f formula, %.2f measured\n",
            sb_pp_kind_name(st->shape.kind), span > 0 ? 100.0 * idle / span : 0.0, 100.0 * lo,
            100.0 * hi, 100.0 * frac, ideal > 0 ? exact / ideal : 0.0,
            f + b + w > 0 ? idle / (f + b + w) : 0.0);
    fflush(out);
}

sb_status sb_pp_waits_init(struct sb_pp_waits *w, int n, int stages, int stage,
                           double clock_offset_s)
{
    *w = (struct sb_pp_waits){.n = n, .stages = stages, .stage = stage,
                              .clock_offset_s = clock_offset_s};
    w->sent_at = calloc((size_t)n + 2 * (size_t)stages + 1, sizeof *w->sent_at);
    w->wait_begin = calloc((size_t)n + 1, sizeof *w->wait_begin);
    w->wait_end = calloc((size_t)n + 1, sizeof *w->wait_end);
    if (!w->sent_at || !w->wait_begin || !w->wait_end)
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    return SB_OK;
}

void sb_pp_waits_free(struct sb_pp_waits *w)
{
    free(w->sent_at);
    free(w->wait_begin);
    free(w->wait_end);
    memset(w, 0, sizeof *w);
}

void sb_pp_waits_sent(struct sb_pp_waits *w, int id, double t_s)
{
    if (id >= 0 && id < w->n) w->sent_at[id] = t_s - w->clock_offset_s;
}

void sb_pp_waits_span(struct sb_pp_waits *w, double start_s, double end_s)
{
    w->sent_at[w->n + w->stage] = start_s - w->clock_offset_s;
    w->sent_at[w->n + w->stages + w->stage] = end_s - w->clock_offset_s;
}

void sb_pp_waits_received(struct sb_pp_waits *w, int id, double t0, double t1)
{
    if (id < 0 || id >= w->n) return;
    w->wait_begin[id] = t0 - w->clock_offset_s;
    w->wait_end[id] = t1 - w->clock_offset_s;
}

sb_status sb_pp_waits_split(struct sb_pp_waits *w, struct sb_comm *comm, double *moved_s,
                            double *drain_s, double *span_s)
{
    size_t all = (size_t)w->n + 2 * (size_t)w->stages;
    SB_TRY(sb_comm_allreduce_f64(comm, w->sent_at, all));
    double moved = 0;
    for (int id = 0; id < w->n; id++) {
        double tb = w->wait_begin[id], te = w->wait_end[id], ts = w->sent_at[id];
        if (te <= 0) continue; /* not received here */
        double transfer = te - (ts > tb ? ts : tb);
        if (transfer < 0) transfer = 0; /* within the clocks' error */
        if (transfer > te - tb) transfer = te - tb;
        moved += transfer;
    }
    *moved_s = moved;
    /* The pipeline's last action anywhere, and this stage's part of it. */
    const double *start = w->sent_at + w->n, *end = start + w->stages;
    double last = end[0];
    for (int r = 1; r < w->stages; r++)
        if (end[r] > last) last = end[r];
    *drain_s = *span_s = 0;
    if (end[w->stage] != 0 && start[w->stage] != 0) {
        *drain_s = last - end[w->stage];
        *span_s = last - start[w->stage];
    }
    memset(w->sent_at, 0, all * sizeof *w->sent_at);
    memset(w->wait_begin, 0, (size_t)w->n * sizeof *w->wait_begin);
    memset(w->wait_end, 0, (size_t)w->n * sizeof *w->wait_end);
    return SB_OK;
}
