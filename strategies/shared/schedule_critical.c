/* The exact bubble of a schedule with equal stages (schedule_critical.h):
 * a longest-path computation over the action lists by relaxation. */
#include "strategies/shared/schedule_critical.h"

#include <math.h>
#include <stdlib.h>

static int is_send(enum sb_pp_op op) { return op == SB_PP_SEND_ACT || op == SB_PP_SEND_GRAD; }
static int is_recv(enum sb_pp_op op) { return op == SB_PP_RECV_ACT || op == SB_PP_RECV_GRAD; }

/* The cost of action a, seconds, with every stage's times t and V chunks. */
static double cost(const struct sb_pp_action *a, const struct sb_pp_stage_times *t, int v)
{
    switch (a->op) {
    case SB_PP_FORWARD: return t->forward_s / v;
    case SB_PP_BACKWARD: return t->backward_s / v;
    case SB_PP_BACKWARD_INPUT: return t->backward_s / v;
    case SB_PP_BACKWARD_WEIGHT: return t->weight_s / v;
    default: return 0; /* sends and receives: no transfer time */
    }
}

/* Relaxes end[] (each action's end, from 0) until no action's end moves:
 * an action starts at its predecessor's end on its rank, a receive no
 * earlier than its send. The graph is acyclic for a checked schedule, so
 * this ends within as many passes as actions; more is a hang. */
static sb_status critical_path(const struct sb_pp_schedule *sch, const struct sb_pp_stage_times *t,
                               const int *send_of, double *end, double *step_s)
{
    int p = sch->shape.stages, n = sch->offset[p];
    for (int pass = 0; pass <= n + 1; pass++) {
        int moved = 0;
        for (int r = 0; r < p; r++)
            for (int i = 0; i < sb_pp_rank_count(sch, r); i++) {
                const struct sb_pp_action *a = &sb_pp_rank_actions(sch, r)[i];
                int g = sch->offset[r] + i;
                double start = i > 0 ? end[g - 1] : 0;
                if (is_recv(a->op)) {
                    int k = send_of[sb_pp_message_id(&sch->shape, a)];
                    if (k < 0) return sb_error(SB_ERR_INTERNAL, "bubble: a receive without its send");
                    start = fmax(start, end[k]);
                }
                double e = start + cost(a, t, sch->shape.chunks);
                if (e > end[g]) {
                    end[g] = e;
                    moved = 1;
                }
            }
        if (!moved) {
            double step = 0;
            for (int g = 0; g < n; g++) step = fmax(step, end[g]);
            *step_s = step;
            return SB_OK;
        }
    }
    return sb_error(SB_ERR_INTERNAL, "bubble: the %s lists hang (run sb_pp_check)",
                    sb_pp_kind_name(sch->shape.kind));
}

sb_status sb_pp_bubble_exact_s(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t,
                               double *bubble_s)
{
    double x[3] = {t->forward_s, t->backward_s, t->weight_s};
    for (int i = 0; i < 3; i++)
        if (!isfinite(x[i]) || x[i] < 0)
            return sb_error(SB_ERR_INTERNAL, "bubble: a stage time is %g s", x[i]);
    struct sb_pp_schedule sch;
    SB_TRY(sb_pp_schedule_build(s, &sch));
    int n = sch.offset[s->stages], n_msg = sb_pp_message_count(s);
    double *end = calloc((size_t)n + 1, sizeof *end);
    int *send_of = malloc(((size_t)n_msg + 1) * sizeof *send_of);
    sb_status st = SB_OK;
    if (!end || !send_of) st = sb_error(SB_ERR_NOMEM, "bubble: out of memory");
    for (int k = 0; !st && k < n_msg; k++) send_of[k] = -1;
    for (int g = 0; !st && g < n; g++)
        if (is_send(sch.actions[g].op)) send_of[sb_pp_message_id(s, &sch.actions[g])] = g;
    double step = 0;
    if (!st) st = critical_path(&sch, t, send_of, end, &step);
    if (!st) {
        double idle = step - sb_pp_ideal_s(s, t);
        *bubble_s = idle > 0 ? idle : 0; /* rounding of a zero bubble */
    }
    free(end);
    free(send_of);
    sb_pp_schedule_free(&sch);
    return st;
}

sb_status sb_pp_bubble_fraction_exact(const struct sb_pp_shape *s,
                                      const struct sb_pp_stage_times *t, double *fraction)
{
    double bubble = 0;
    SB_TRY(sb_pp_bubble_exact_s(s, t, &bubble));
    double total = bubble + sb_pp_ideal_s(s, t);
    *fraction = total > 0 ? bubble / total : 0;
    return SB_OK;
}
