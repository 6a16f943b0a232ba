/* Sharded data-parallel synchronisation (ZeRO, Rajbhandari et al., SC
 * 2020; PyTorch FSDP) as a piece: over a communicator the caller chooses
 * (the dp communicator of a process grid: comm/grid.h) and a range of a
 * model's flat buffers (the whole model, or a part's range), the piece
 * owns the units, the shards, the stage-3 gathers and the optimizer over
 * the shard. zero.c is its user over a 1-deep grid, whose dp communicator
 * is the world (sb_grid_adopt); a pipeline or tensor-parallel strategy
 * would use it over its grid's dp communicator.
 *
 * The range's buffers are cut into units, and every unit into n blocks,
 * one per rank of the communicator (sb_split_range); a rank's shard is its
 * block of every unit, stored contiguously (the shard's optimizer state,
 * and its gradients and parameters where the stage shards them).
 *   stage 1: units = buckets (cfg bucket_mb, strategies/shared/
 *     buckets.h); after backward every unit is reduce-scattered into the
 *     gradient shard, the rank steps its blocks of the parameters with its
 *     shard of the optimizer state, and the blocks are all-gathered.
 *   stage 2: the same, each unit's reduce-scatter started as soon as
 *     backward has made it ready (overlap) and its full gradients freed once
 *     it completes: the rank keeps only its gradient shard.
 *   stage 3: units = layers; the rank keeps only its shard of the
 *     parameters; the model's layer hook (workloads/workload.h) gathers each
 *     layer before its forward and again before its backward, prefetching
 *     the next layer's gather, frees each gathered layer after use, and
 *     backward reduce-scatters each layer's gradients as they become ready.
 * Derivation of the bytes and the memory: docs/zero.md. "Freed" is the
 * backend's discard (cpu: pages back to the kernel); the flat buffers keep
 * their virtual size.
 *
 * A step, with sync = the piece and r the replica (or part) of the model:
 *     sb_zero_sync_begin(sync);
 *     sb_replica_gradients(r, idx, n, global, sb_zero_sync_ready_fn(sync), sync, out);
 *     sb_zero_sync_finish(sync, out);  (gradient shard = its blocks of the sum)
 *     sb_zero_sync_update(sync, out);  (optimizer on the shard; stages 1-2 all-gather) */
#ifndef SB_ZERO_SYNC_H
#define SB_ZERO_SYNC_H

#include <stddef.h>

#include "core/half.h"
#include "strategies/shared/grad_range.h"
#include "strategies/shared/precision.h"
#include "strategies/strategy.h"

/* What the piece does. */
struct sb_zero_sync_cfg {
    int stage;                    /* 1, 2 or 3 */
    double bucket_mb;             /* stages 1-2: unit cap, MiB (sb_bucket_plan_create) */
    int overlap;                  /* stage 2: reduce-scatter during backward (stage 3 always) */
    int half;                     /* 1: 16-bit reduce-scatter wire in fmt (every addition fp32) */
    enum sb_half_format fmt;
    /* 1: the parameters are 16-bit values in param_fmt (--precision
     * bf16|fp16): their all-gathers (stage 3's, stages 1-2's after the
     * step) move 2 bytes a value, exactly, where the communicator has a
     * 16-bit all-gather (sb_comm_allgather16; else fp32). 0: fp32. */
    int param_half;
    enum sb_half_format param_fmt;
    const struct sb_config *run;  /* the optimizer (sb_optimizer_init) */
};

struct sb_zero_sync;

/* The piece over communicator `comm` (kept, not owned; its ranks must
 * already hold the same parameters in the range) for `range` of model m
 * on backend be (kept, not owned). Plans the units over the range's
 * tensors (stage 3: a unit per layer), allocates the shard buffers and the
 * shard's optimizer state, makes a duplicate of comm for traffic that is
 * no training step's (evaluation's and --save-params' gathers, uncounted
 * by the report: collective over comm), and in stage 3 keeps its blocks of
 * the parameters, frees the range's parameters and gradients, and installs
 * its layer hook on m. Errors: those of sb_grad_range_plan, sb_comm_split,
 * the backend's alloc, sb_optimizer_init; SB_ERR_USAGE for a unit of more
 * than 2^31 floats; SB_ERR_NOMEM. */
sb_status sb_zero_sync_create(struct sb_comm *comm, struct sb_model *m,
                              const struct sb_backend_ops *be, struct sb_grad_range range,
                              const struct sb_zero_sync_cfg *cfg, struct sb_zero_sync **out);

/* Starts a training step: resets the units' readiness and the step's
 * clocks; the stage-3 gathers go over comm. */
void sb_zero_sync_begin(struct sb_zero_sync *z);

/* The ready callback to hand backward: sb_zero_sync_ready in stage 3, and
 * in stage 2 with overlap; else NULL. Pass the piece as its context. */
sb_grad_ready_fn sb_zero_sync_ready_fn(const struct sb_zero_sync *z);

/* Backward's ready callback (ctx = the piece): grads[off, off + count)
 * are final. Starts, in unit order, the reduce-scatter of every unit whose
 * gradients are all ready (every rank issues the same sequence) and polls
 * the units in flight. Its time on collectives is moved from backward to
 * comm_exposed by sb_zero_sync_finish. The first error is kept for finish. */
void sb_zero_sync_ready(void *ctx, size_t off, size_t count);

/* After backward: starts the reduce-scatters not yet started, waits for
 * all (the gradient shard holds this rank's blocks of the sum over comm's
 * ranks), frees the full gradients (stages 2-3) and stage 3's gathered
 * parameters, and adds the step's phases to out (the hooks' blocked seconds
 * moved from forward and backward to comm_exposed, the 16-bit conversions
 * to compress; comm the union of the step's collectives' spans; details
 * in zero_sync.c, step_phases). Errors: a hook's first error; those of
 * the communicator. */
sb_status sb_zero_sync_finish(struct sb_zero_sync *z, struct sb_step_result *out);

/* The optimizer over the shard (timed as the optimizer phase); stages 1-2
 * then all-gather every unit's blocks of the parameters (timed as comm and
 * comm_exposed). Errors: those of the communicator; SB_ERR_DEVICE (the
 * backend's check). */
sb_status sb_zero_sync_update(struct sb_zero_sync *z, struct sb_step_result *out);

/* Stage 3 outside training: the layer hook's gathers go over the quiet
 * duplicate (on = 1) or back over comm (0). Call before and after a
 * series of forward passes (evaluation), each followed by
 * sb_zero_sync_release. */
void sb_zero_sync_quiet(struct sb_zero_sync *z, int on);

/* After a forward pass outside training: frees every gathered layer
 * (waiting for a gather still in flight) and returns the hook's first
 * error since the last release (cleared). Errors: that error; those of the
 * communicator. */
sb_status sb_zero_sync_release(struct sb_zero_sync *z);

/* Stage 3: gathers every unit's parameters into the model's buffer over
 * the quiet duplicate (collective), for a read of the whole range; free
 * them with sb_zero_sync_release. Stages 1-2: nothing (every rank holds
 * them). Errors: those of the communicator. */
sb_status sb_zero_sync_gather_all(struct sb_zero_sync *z);

/* fp16's loss scaling on a sharded gradient (after sb_zero_sync_finish,
 * before sb_zero_sync_update): unscales this rank's gradient shard by 1/S,
 * agrees with every rank of the communicator on whether any shard held an
 * inf or NaN (a sum of one double, uncounted: a decision, not training
 * traffic), and updates the scaler ls alike on every rank; *skip = 1 when
 * the step must be skipped (then no rank calls sb_zero_sync_update: the
 * parameters stay as they are everywhere). Nothing (*skip = 0) when ls is
 * disabled. Errors: the communicator's, the backend's. */
sb_status sb_zero_sync_unscale(struct sb_zero_sync *z, struct sb_loss_scaler *ls, int *skip);

/* The first half of sb_zero_sync_unscale, for a strategy that agrees on
 * the decision over more ranks than z's communicator (a pipeline's
 * stages): unscales this rank's gradient shard by 1/S and sets *found_inf
 * to 1 when it holds an inf or NaN (else 0); nothing (0) when ls is
 * disabled. The caller sums it over every rank of the step and calls
 * sb_loss_scaler_update. Errors: the backend's. */
sb_status sb_zero_sync_find_inf(struct sb_zero_sync *z, const struct sb_loss_scaler *ls,
                                int *found_inf);

/* Floats of this rank's shard. */

size_t sb_zero_sync_shard_floats(const struct sb_zero_sync *z);

/* Number of units, and the floats of unit i (launch order: unit 0 ends the
 * range). */
int sb_zero_sync_units(const struct sb_zero_sync *z);
size_t sb_zero_sync_unit_floats(const struct sb_zero_sync *z, int i);

/* Which floats this rank owns of unit i: the model's [*offset, *offset +
 * *count) (its block, sb_split_range of the unit over the communicator's
 * ranks), stored at [*shard_offset, *shard_offset + *count) of the shard
 * buffers. */
void sb_zero_sync_block(const struct sb_zero_sync *z, int i, size_t *offset, size_t *count,
                        size_t *shard_offset);

/* The gradient shard (sb_zero_sync_shard_floats floats, backend memory):
 * after sb_zero_sync_finish, this rank's blocks of the summed gradients
 * (stages 1-2: overwritten by sb_zero_sync_update's all-gather send). */
const float *sb_zero_sync_grad_shard(const struct sb_zero_sync *z);

/* Bytes of the shard's optimizer state. */
size_t sb_zero_sync_optimizer_bytes(const struct sb_zero_sync *z);

/* Frees the piece (removes its layer hook from the model; not the
 * communicator, the model or the backend); safe on NULL. */
void sb_zero_sync_destroy(struct sb_zero_sync *z);

#endif
