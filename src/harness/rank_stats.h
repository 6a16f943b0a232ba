/* Per-step timings of every rank, gathered to rank 0: the derived "wait"
 * phase (idle at the step's synchronisation point) and how step and phase
 * times spread across ranks (struct sb_rank_spread in the report).
 *
 * Only MPI strategies have ranks: mirrored's replicas are threads of one
 * process that report replica 0's phases, so for single and mirrored the
 * spread is over one rank and wait is what the strategy measured (0). */
#ifndef SB_RANK_STATS_H
#define SB_RANK_STATS_H

#include <stddef.h>

#include "core/phase.h"
#include "core/status.h"
#include "job/job.h"
#include "report/report.h"

/* Fields per rank and step: step_ms, then the SB_PHASE_COUNT phases. */
#define SB_RANK_FIELDS (1 + SB_PHASE_COUNT)
#define SB_RANK_FIELD_STEP 0
#define SB_RANK_FIELD_PHASE(p) (1 + (p))

/* ms[(r * SB_RANK_FIELDS + f) * n_steps + s]: rank r's field f at measured
 * step s, in milliseconds. */
struct sb_rank_timings {
    int n_ranks;
    size_t n_steps; /* measured steps kept per rank (the fewest of any rank) */
    double *ms;
};

/* Rank r's field f: n_steps values. */
static inline double *sb_rank_timings_at(const struct sb_rank_timings *t, int r, int f)
{
    return t->ms + ((size_t)r * SB_RANK_FIELDS + (size_t)f) * t->n_steps;
}

/* Collects this process's n measured steps (step_ms[n], phase_ms[p][n]; a
 * NULL phase reads as zeros) from every rank of the job into *out on rank
 * 0; other ranks get an empty *out. Without MPI (or a NULL job) or with one
 * rank, *out holds this process alone.
 * Collective; a rank that fails locally makes every rank return an error
 * (no rank is left waiting). Errors: SB_ERR_NOMEM, SB_ERR_COMM. */
sb_status sb_rank_timings_gather(const struct sb_job *job, const double *step_ms, double *const phase_ms[SB_PHASE_COUNT],
                                 size_t n, struct sb_rank_timings *out);

/* Fills every rank's "wait" phase from the compute times:
 *   compute_r(s) = data + h2d + forward + backward of rank r at step s,
 *   wait_r(s)    = max over ranks q of compute_q(s) - compute_r(s),
 * the time rank r idles at step s's synchronisation point (all-reduce,
 * push) waiting for the slowest rank to get there (sb_phase_compute_ms,
 * sb_phase_wait_ms). Replaces what the strategy reported; the harness
 * does not call it for a strategy that owns its wait (owns_wait). No-op
 * with one rank. Errors: SB_ERR_NOMEM. */
sb_status sb_rank_timings_fill_wait(struct sb_rank_timings *t);

/* The spread across ranks of each rank's median step_ms and phase times
 * (see struct sb_rank_spread). Errors: SB_ERR_NOMEM. */
sb_status sb_rank_timings_spread(const struct sb_rank_timings *t, struct sb_rank_spread *step,
                                 struct sb_rank_spread phases[SB_PHASE_COUNT]);

/* The straggler of t (after sb_rank_timings_fill_wait): per rank its
 * compute and wait per step (struct sb_rank_load), the slowest rank (largest
 * median compute) and its cost (struct sb_straggler in report/report.h),
 * into *out; out->hosts is left NULL for the caller. One rank or no steps:
 * out->ranks = 0. The cost is the time the other ranks wait for k per step,
 * averaged over them (HTA's straggler view: the other ranks' idle time
 * before the collective; DeepSpeed's comms logger measures a collective's
 * "straggler effect" likewise as each rank's time in it above the fastest
 * rank's): compute_k - mean over q != k of compute_q in a step where k is
 * the slowest, 0 in a step where it is not; the median over steps keeps a
 * rank that is slowest only by chance, in half of the steps or fewer, near
 * 0. What removing k's extra compute would save is smaller at n > 2:
 * compute_ms - others_compute_ms. Ranks that compute nothing in any step
 * (central's servers) are not among the others: they wait for every
 * worker, straggler or not; with no other rank that computes, the cost,
 * slowest_fraction and others_compute_ms are 0. Errors: SB_ERR_NOMEM. */
sb_status sb_rank_timings_straggler(const struct sb_rank_timings *t, struct sb_straggler *out);

/* Frees what sb_rank_timings_straggler allocated; safe on a zeroed struct. */
void sb_straggler_free(struct sb_straggler *s);

/* Frees t->ms; safe on an empty struct. */
void sb_rank_timings_free(struct sb_rank_timings *t);

#endif
