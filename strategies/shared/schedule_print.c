/* `stratbench schedule`'s output (sb_strategy_print_schedule, strategy.h):
 * a schedule's grid in unit slots, its bubble beside the formula, and per
 * stage the activations alive at once and the messages per step. */
#include <limits.h>
#include <stdio.h>

#include "strategies/shared/schedule.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/shared/schedule_sim.h"
#include "strategies/strategy.h"

/* The lines under the grid: the bubble in slots beside its formula, then a
 * table per stage (nccl-tests style: '#' before every non-data line). */
static void print_summary(const struct sb_pp_schedule *s, const struct sb_pp_timeline *tl,
                          FILE *out)
{
    const struct sb_pp_shape *sh = &s->shape;
    int zb = sh->kind == SB_PP_ZBH1, v = sh->chunks;
    /* Unit slots as stage times: forward v (v chunks of 1), backward 2v;
     * zb-h1: forward 1, B 1, W 1. */
    struct sb_pp_stage_times t = {v, zb ? 1 : 2.0 * v, zb ? 1 : 0};
    fprintf(out, "# step %g slots; bubble per stage: simulated %g, formula %g slots = %.4f of the "
            "step, %.4f of ideal compute\n", tl->step_s, tl->bubble_s[0], sb_pp_bubble_s(sh, &t),
            sb_pp_bubble_fraction_of_step(sh, &t), sb_pp_bubble_over_ideal(sh, &t));
    fprintf(out, "# stage  live_activations  p2p_messages_to_next  bubble_slots\n");
    for (int r = 0; r < sh->stages; r++)
        fprintf(out, "%7d  %16d  %20ld  %12g\n", r, sb_pp_live_activations(sh, r),
                sb_pp_p2p_messages(sh, r), tl->bubble_s[r]);
    fprintf(out, "# live_activations: micro-batch slots alive at once%s; p2p_messages_to_next: "
            "activations and gradients per step between the stage and the next%s\n",
            v > 1 ? " (one chunk's)" : "", v > 1 ? " (the last: back to stage 0)" : "");
}

sb_status sb_strategy_print_schedule(const char *schedule, int stages, int microbatches,
                                     int chunks, FILE *out)
{
    struct sb_pp_shape shape;
    struct sb_pp_schedule s;
    struct sb_pp_timeline tl;
    enum sb_pp_kind kind = sb_pp_kind_parse(schedule);
    if (kind == SB_PP_KIND_COUNT)
        return sb_error(SB_ERR_USAGE, "--schedule: '%s' is not gpipe, 1f1b, interleaved or zb-h1",
                        schedule ? schedule : "");
    /* No model here: any number of layers; every workload splits its backward. */
    SB_TRY(sb_pp_validate(kind, stages, microbatches, chunks, INT_MAX, 1, &shape));
    SB_TRY(sb_pp_schedule_build(&shape, &s));
    sb_status st = sb_pp_check(&s);
    if (!st) st = sb_pp_print_grid(&s, out);
    if (!st) st = sb_pp_simulate_units(&s, &tl);
    if (!st) {
        print_summary(&s, &tl, out);
        sb_pp_timeline_free(&tl);
        if (ferror(out)) st = sb_error(SB_ERR_IO, "schedule: could not write the output");
    }
    sb_pp_schedule_free(&s);
    return st;
}
