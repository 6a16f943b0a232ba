/* The replica consistency check (as nccl-tests checks every result it
 * times): after training, and every --check-every N steps, all replicas'
 * parameters are compared. Every process hashes each replica it holds
 * (FNV-1a over the float bits), the hashes are all-gathered, and only when
 * some differ is the reference (replica 0: the first replica of the lowest
 * rank holding one) broadcast, so each process measures the largest
 * |difference| of its differing replicas from it; the largest over the job
 * and its replica are all-reduced. Synchronous strategies keep replicas
 * bitwise identical (every replica applies the same summed gradient), so
 * anything above float summation order (sb_consistency_tolerance) fails the
 * run, naming the replica. */
#ifndef SB_CONSISTENCY_H
#define SB_CONSISTENCY_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "job/job.h"
#include "report/report.h"
#include "strategies/strategy.h"

/* What the checks found so far: struct sb_consistency (report/report.h). */

/* The environment variable of the test-only corruption hook: when set to a
 * replica index r, sb_consistency_check first adds 1.0 to replica r's first
 * parameter (for the tests that prove the check fails a run; never set it
 * otherwise). */
#define SB_TEST_CORRUPT_ENV "STRATBENCH_TEST_CORRUPT_REPLICA"

/* FNV-1a 64-bit hash of the bytes of x[0..n). */
uint64_t sb_params_hash(const float *x, size_t n);

/* max_i |x[i] - ref[i]| over n floats (NaN anywhere gives +inf). */
double sb_params_max_abs_diff(const float *x, const float *ref, size_t n);

/* The divergence that float summation order can explain, for reference
 * parameters whose largest magnitude is max_abs_ref: 1e-4 x max(1,
 * max_abs_ref). Replicas that apply one summed gradient in the same order
 * agree bitwise; ones whose sums differ in order drift by a few ulps per
 * step (~1e-7 relative), far below this after thousands of steps. */
double sb_consistency_tolerance(double max_abs_ref);

/* Runs one check of every replica of strategy `s` across `job` after step
 * `step` (collective: every process calls it at the same step) and folds
 * the result into *acc. Uses s->ops->replica_params; a strategy without it
 * (or with no replicas to compare, e.g. central --async) is recorded as not
 * checked. Errors: SB_ERR_INTERNAL "replica R (rank Q) diverged ..." when
 * the largest difference exceeds the tolerance (on every process);
 * SB_ERR_NOMEM, SB_ERR_COMM, the backend's copy errors. */
sb_status sb_consistency_check(struct sb_strategy *s, const struct sb_job *job, long step,
                               struct sb_consistency *acc);

#endif
