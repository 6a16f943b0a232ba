/* Closed forms of a pipeline schedule: its bubble, the activations each
 * stage keeps alive at once, and the point-to-point messages per stage
 * boundary. docs/pipeline.md derives each one; the unit tests compare them
 * with the action lists (counted) and with sb_pp_simulate (timed). */
#ifndef SB_SCHEDULE_FORMULA_H
#define SB_SCHEDULE_FORMULA_H

#include "strategies/shared/schedule.h"

/* Per-stage times of one micro-batch, seconds, the same on every stage
 * (the papers' assumption): forward_s and backward_s of the whole stage
 * (interleaved: all V chunks together); for zb-h1 backward_s is B, the
 * input-gradient half, and weight_s is W, the weight-gradient half; for
 * the other schedules weight_s is 0 and backward_s the whole backward. */
struct sb_pp_stage_times {
    double forward_s, backward_s, weight_s;
};

/* Idle time of a stage in one step, seconds:
 *   gpipe, 1f1b:  (p-1)(t_f + t_b)   (Huang et al., GPipe, 2019: the bubble
 *                 overhead O((K-1)/(M+K-1)); Narayanan et al. 2021: PipeDream-
 *                 Flush keeps GPipe's bubble)
 *   interleaved:  (p-1)(t_f + t_b) / v   (Narayanan et al. SC 2021,
 *                 section 2.2: the bubble shrinks by the number of chunks)
 *   zb-h1:        (p-1)(t_f + t_b) - (min(m, p) - 1) min(t_w, t_f), with
 *                 t_b = B and t_w = W; for m >= p and t_w <= t_f this is
 *                 (p-1)(t_f + t_b - t_w), Qi et al. ICLR 2024, section 2.1
 *                 (a third of 1f1b's when t_f = t_b = t_w). The general form
 *                 is ours (docs/pipeline.md): it equals sb_pp_simulate's
 *                 bubble for schedule.c's zb-h1 lists when t_b >= t_f, and
 *                 understates it when t_b < t_f (P = 2, M = 2, F 2, B 0.5,
 *                 W 1: 1.5 against 2); sb_pp_bubble_exact_s
 *                 (schedule_critical.h) is exact for every case.
 * gpipe, 1f1b and interleaved equal sb_pp_bubble_exact_s for every F, B >= 0
 * (the unit tests). */
double sb_pp_bubble_s(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t);

/* Ideal compute of a stage in one step: m (t_f + t_b + t_w), seconds. */
double sb_pp_ideal_s(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t);

/* The bubble as a fraction of the step: bubble / (ideal + bubble); for
 * gpipe and 1f1b (p-1)/(m+p-1) whatever the times (Huang et al. 2019). */
double sb_pp_bubble_fraction_of_step(const struct sb_pp_shape *s,
                                     const struct sb_pp_stage_times *t);

/* The bubble against ideal compute: bubble / ideal; gpipe and 1f1b
 * (p-1)/m, interleaved (p-1)/(v m) (Narayanan et al. SC 2021, section
 * 2.2), zb-h1 sb_pp_bubble_s / (m (t_f + t_b + t_w)). */
double sb_pp_bubble_over_ideal(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t);

/* Activations alive at once on stage `rank` (0-based), in micro-batch
 * slots of one chunk (a chunk is the whole stage unless interleaved): an
 * activation lives from its forward to its backward (zb-h1: to its W).
 *   gpipe:        m                         (every forward before any backward)
 *   1f1b:         min(p - i, m)             (Narayanan et al. 2021: at most p in flight)
 *   interleaved:  min(2(p-1-i) + (v-1)p + 1, v m)   chunk slots: the warm-up
 *                 forwards of Megatron-LM's schedule plus the steady state's one
 *                 (derived in docs/pipeline.md from Narayanan et al. SC 2021's
 *                 warm-up count, section 2.2, as Megatron-LM runs it)
 *   zb-h1:        min(p, m) on every stage  (Qi et al. 2024, section 2.1: W on
 *                 stage i runs i micro-batches late, so all hold 1f1b's first
 *                 stage's count); a slot lives to W, and with part.split_backward
 *                 its bytes include what B keeps for W (workload.h)
 * Returns -1 for a rank outside [0, p). */
int sb_pp_live_activations(const struct sb_pp_shape *s, int rank);

/* Point-to-point messages per step over the link between rank `rank` and
 * rank (rank+1) mod p, both directions: 2m for each virtual-stage boundary
 * it carries (m activations forward, m gradients backward): non-interleaved
 * 2m for rank < p-1 and 0 for the last; interleaved 2mv for rank < p-1 and
 * 2m(v-1) for the link from the last rank back to the first. Bytes are
 * these counts times the boundary's activation size. -1 for a bad rank. */
long sb_pp_p2p_messages(const struct sb_pp_shape *s, int rank);

#endif
