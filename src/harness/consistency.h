/* The replica consistency check (as nccl-tests checks every result it
 * times): after training, and every --check-every N steps, the parameters
 * of replicas that hold the same part of the model are compared. The
 * strategy names each process's consistency group (its consistency_group
 * op: ranks that hold the same part, the dp group; by default the whole
 * world, every rank holding the whole model). Every process hashes each
 * replica it holds (FNV-1a over the float bits), the hashes are
 * all-gathered, and only when some differ from their group's first is that
 * group's reference (its first replica: the first of the lowest rank of the
 * group holding one) broadcast, so each process measures the largest
 * |difference| of its differing replicas from it; the replica furthest
 * beyond its group's tolerance over the job is all-reduced. Synchronous
 * strategies keep a group's replicas bitwise identical (every replica
 * applies the same summed gradient), so anything above float summation
 * order (sb_consistency_tolerance) fails the run, naming the replica.
 * Replicas of different groups are never compared. */
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
 * `step` (collective: every process calls it at the same step), each
 * against its group's first replica, and folds the result into *acc
 * (tolerance: that of the worst replica's group). Uses
 * s->ops->replica_params (replica i's buffer of
 * sb_strategy_local_n_params floats) and sb_strategy_consistency_group; a
 * strategy without replica_params (or with no replicas to compare, e.g.
 * central --async) is recorded as not checked. Errors: SB_ERR_INTERNAL
 * "replica R (rank Q) diverged from replica F ..." when a difference
 * exceeds its group's tolerance (on every process), or when two replicas
 * of one group hold different parameter counts; SB_ERR_NOMEM, SB_ERR_COMM,
 * the backend's copy errors. */
sb_status sb_consistency_check(struct sb_strategy *s, const struct sb_job *job, long step,
                               struct sb_consistency *acc);

#endif
