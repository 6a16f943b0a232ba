/* The exact bubble of a schedule with equal stages: the critical path of
 * the schedule's own dependency graph (each rank's list in order, each
 * receive after its matching send) with the same per-stage costs on every
 * stage and no transfer time. It is what "the formula evaluated with the
 * run's own F, B, W" means for every schedule and every F, B, W >= 0;
 * schedule_formula.h's closed forms agree with it for gpipe, 1f1b and
 * interleaved, and for zb-h1 when B >= F (docs/pipeline.md: where Qi et
 * al.'s (p-1)(T_F + T_B - T_W) fails). */
#ifndef SB_SCHEDULE_CRITICAL_H
#define SB_SCHEDULE_CRITICAL_H

#include "core/status.h"
#include "strategies/shared/schedule.h"
#include "strategies/shared/schedule_formula.h"

/* Sets *bubble_s to the idle seconds of a stage in one step of shape s
 * (validated: sb_pp_validate) when every stage takes t per micro-batch
 * (t as in schedule_formula.h: interleaved's forward and backward are of
 * all V chunks together, a chunk's action takes 1/V of them; zb-h1's
 * backward_s is B and weight_s W): the step's critical path minus a
 * stage's compute m (t_f + t_b + t_w). With equal stages every stage has
 * the same compute, so the same idle. Errors: SB_ERR_INTERNAL for a time
 * negative or not finite or lists that hang, SB_ERR_NOMEM. */
sb_status sb_pp_bubble_exact_s(const struct sb_pp_shape *s, const struct sb_pp_stage_times *t,
                               double *bubble_s);

/* The same as a fraction of the step: bubble / (m (t_f + t_b + t_w) +
 * bubble), 0 when the step is 0. Same errors. */
sb_status sb_pp_bubble_fraction_exact(const struct sb_pp_shape *s,
                                      const struct sb_pp_stage_times *t, double *fraction);

#endif
