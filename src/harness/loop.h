/* The training loop's state and its pieces, internal to src/harness:
 * the step loop (step_loop.c: epochs, timed steps, evaluation), the
 * cross-rank accounting (cross_rank.c: the derived wait, stragglers, noise
 * and memory gathered to rank 0), the outputs (run_outputs.c: report,
 * --save-params, --mllog, --trace) and the driver that runs them in order
 * (harness.c, sb_harness_train). */
#ifndef SB_HARNESS_LOOP_H
#define SB_HARNESS_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/phase.h"
#include "core/status.h"
#include "data/mnist.h"
#include "harness/run_noise.h"
#include "job/job.h"
#include "report/mllog.h"
#include "report/report.h"
#include "strategies/strategy.h"

/* Per-step timings kept for the report (rank 0's view). */
struct sb_loop_timings {
    double *step_ms;
    double *phase_ms[SB_PHASE_COUNT];
    size_t n, cap;
    double compute_wall_s, compute_cpu_s; /* the kept steps' sums of sb_step_result's */
};

/* One run of the loop: what sb_harness_train hands its pieces. */
struct sb_loop {
    const struct sb_config *cfg;
    const struct sb_mnist *data;
    struct sb_job *job;
    struct sb_strategy *s;
    struct sb_run_record *rec;
    struct sb_loop_timings t;
    int32_t *perm;
    double *loss_sums;   /* (2 + world size): loss sum, samples, per rank first bad step + 1 */
    int wrote_params;    /* this run wrote --save-params (removed if a later output fails) */
    int wrote_report;    /* this run wrote --report (likewise) */
    int wrote_mllog;     /* this run wrote --mllog (likewise) */
    struct sb_noise_sample noise_start, noise_end;
    struct sb_mllog *ml;  /* --mllog events (rank 0; a no-op otherwise) */
    double slow_ms;       /* STRATBENCH_TEST_SLOW_RANK: extra compute of this rank per step */
};

/* Allocates room for `cap` measured steps (zeroed count). Errors:
 * SB_ERR_NOMEM (free what was allocated with sb_loop_timings_free). */
sb_status sb_loop_timings_alloc(struct sb_loop_timings *t, size_t cap);
/* Frees the timings; safe after a failed alloc. */
void sb_loop_timings_free(struct sb_loop_timings *t);

/* Runs every epoch, filling rec->epochs and the timings. */
sb_status sb_loop_train_epochs(struct sb_loop *L);

/* Every rank's per-step timings to rank 0 (collective): derives the wait
 * phase (rank_stats.h) unless the strategy owns its wait and bubble
 * (sb_strategy_ops.owns_wait), writes rank 0's back into its own timings,
 * the spread across ranks and the stragglers into the record; then every
 * rank's noise and memory ledger to rank 0. Errors: SB_ERR_NOMEM,
 * SB_ERR_COMM. */
sb_status sb_loop_cross_rank_stats(struct sb_loop *L);

/* The compute threads on this machine: the job's processes on its kernel
 * (MPI: job->machine_size, by boot_id, which counts the cluster fixture's
 * hosts that share one machine) or replica threads (mirrored, single),
 * times the compute threads of each: the count the "oversubscribed" warning
 * and the straggler rule compare with the cores, as --wait auto does. */
long sb_loop_compute_threads(const struct sb_loop *L, const struct sb_job *job);

/* --save-params: every rank reads the parameters (collective), rank 0
 * writes them. */
sb_status sb_loop_save_params(struct sb_loop *L);

/* A run that fails leaves none of its outputs: removes what this run
 * already wrote (the writers are atomic, so a failed one left nothing). */
void sb_loop_remove_outputs(const struct sb_loop *L);

/* Rank 0's outputs after training: the run's warnings, the report, --mllog
 * and the final line. */
sb_status sb_loop_rank0_outputs(struct sb_loop *L);

/* --trace: every rank's spans to rank 0's file, after the strategy is
 * destroyed (its replica threads have joined, their spans are final). */
sb_status sb_loop_write_trace(struct sb_loop *L);

#endif
