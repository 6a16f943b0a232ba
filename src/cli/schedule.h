/* `stratbench schedule`: print a pipeline schedule's rank x slot grid and
 * its formulas, without training (strategies/shared/schedule*.h). */
#ifndef SB_CLI_SCHEDULE_H
#define SB_CLI_SCHEDULE_H

/* `stratbench schedule [--stages P] [--microbatches M] [--schedule S]
 * [--chunks V]` (argv[0] is "schedule"): builds the schedule, checks that
 * every send has its receive, and prints to stdout its grid in unit slots
 * (sb_pp_print_grid), the bubble in slots with its formula, and per stage
 * the activations alive at once and the point-to-point messages per step.
 * Returns the exit status: 0, 2 with one line on stderr naming the flag for
 * bad input, 1 when the schedule fails its check (a bug). */
int sb_schedule_main(int argc, char **argv);

#endif
