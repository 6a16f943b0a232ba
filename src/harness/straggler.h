/* Stragglers: the run's slowest rank named and costed on rank 0 (the
 * definition is sb_rank_timings_straggler's, harness/rank_stats.h), and the
 * test-only hook that makes one rank slow on purpose, the ground truth of
 * tests/integration/test_stragglers.py. */
#ifndef SB_STRAGGLER_H
#define SB_STRAGGLER_H

#include <stddef.h>

#include "core/status.h"
#include "harness/rank_stats.h"
#include "report/report.h"

/* Fraction of rank 0's median step a straggler must cost the others, and
 * share of the steps in which it must be the slowest, for the line. */
#define SB_STRAGGLER_LINE 0.05
#define SB_STRAGGLER_STEADY 0.75

/* Whether g (sb_rank_timings_straggler's result) is reported as a straggler
 * by the line: it costs the others more than SB_STRAGGLER_LINE of
 * step_median_ms (ms) and was the slowest in at least SB_STRAGGLER_STEADY
 * of the steps. 0 with no ranks or a step median that is not positive. */
int sb_straggler_line_due(const struct sb_straggler *g, double step_median_ms);

/* Rank 0, after the cross-rank gather (and sb_rank_timings_fill_wait): the
 * straggler of `all` into *out with each rank's host (the watchdog's host
 * table), and one line on stdout naming it when it costs the others more
 * than SB_STRAGGLER_LINE of the median of step_ms[n] (rank 0's measured
 * steps, ms) and was the slowest in at least SB_STRAGGLER_STEADY of the
 * steps: a rank that is slowest by chance (4 equal ranks on 2 shared cores:
 * 60-70% of the steps, 1-3 ms of an 11-12 ms step) is scheduling noise, not
 * a straggler. When `oversubscribed` (more compute threads than cores on
 * this host: the run's warning says so), the line adds that the rank may be
 * slow from sharing a core rather than from its own work. Free *out with
 * sb_straggler_free. Errors: SB_ERR_NOMEM. */
sb_status sb_stragglers(const struct sb_rank_timings *all, const double *step_ms, size_t n,
                        int oversubscribed, struct sb_straggler *out);

/* The test-only hook STRATBENCH_TEST_SLOW_RANK=R:MS: rank R computes MS ms
 * longer every step (a delay at the start of its step that the harness
 * counts in its data phase: a slow data loader, the classic straggler).
 * Sets *slow_ms to MS on rank R (of a job of `size` ranks), else 0.
 * Errors: SB_ERR_USAGE naming the variable when it is not R:MS with R in
 * 0..size-1 and 0 <= MS <= 60000. */
sb_status sb_slow_rank_hook(int rank, int size, double *slow_ms);

/* Waits until ms milliseconds after t0_s (sb_now_s scale): sleeps to 2 ms
 * before the deadline, then yields until it (a sleep alone woke 2-4 ms
 * late on a loaded machine, which the straggler's cost would include). */
void sb_slow_rank_delay(double t0_s, double ms);

#endif
