/* Closed forms of pipeline schedules (schedule_formula.h; derived in
 * docs/pipeline.md). */
#include "strategies/shared/schedule_formula.h"

static int min_int(int a, int b) { return a < b ? a : b; }

double sb_pp_bubble_s(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t)
{
    double fill = (s->stages - 1) * (t->forward_s + t->backward_s);
    switch (s->kind) {
    case SB_PP_INTERLEAVED: return fill / s->chunks;
    case SB_PP_ZBH1: {
        /* Each of the first min(m, p) - 1 micro-batches' W fills min(t_w, t_f)
         * of the fill-and-drain idle (docs/pipeline.md). */
        int filled = (s->microbatches < s->stages ? s->microbatches : s->stages) - 1;
        double w = t->weight_s < t->forward_s ? t->weight_s : t->forward_s;
        return fill - filled * w;
    }
    default: return fill;
    }
}

double sb_pp_ideal_s(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t)
{
    return s->microbatches * (t->forward_s + t->backward_s + t->weight_s);
}

double sb_pp_bubble_fraction_of_step(const struct sb_pp_shape *s,
                                     const struct sb_pp_stage_times *t)
{
    double bubble = sb_pp_bubble_s(s, t), total = bubble + sb_pp_ideal_s(s, t);
    return total > 0 ? bubble / total : 0;
}

double sb_pp_bubble_over_ideal(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t)
{
    double ideal = sb_pp_ideal_s(s, t);
    return ideal > 0 ? sb_pp_bubble_s(s, t) / ideal : 0;
}

int sb_pp_live_activations(const struct sb_pp_shape *s, int rank)
{
    int p = s->stages, m = s->microbatches, v = s->chunks;
    if (rank < 0 || rank >= p) return -1;
    switch (s->kind) {
    case SB_PP_GPIPE: return m;
    case SB_PP_1F1B: return min_int(p - rank, m);
    case SB_PP_INTERLEAVED: return min_int(2 * (p - 1 - rank) + (v - 1) * p + 1, v * m);
    case SB_PP_ZBH1: return min_int(p, m);
    default: return -1;
    }
}

long sb_pp_p2p_messages(const struct sb_pp_shape *s, int rank)
{
    int p = s->stages;
    long m = s->microbatches, v = s->chunks;
    if (rank < 0 || rank >= p) return -1;
    if (rank < p - 1) return 2 * m * v;
    return 2 * m * (v - 1); /* the link from the last rank to the first: interleaved only */
}
