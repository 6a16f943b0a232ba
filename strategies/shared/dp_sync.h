/* Data-parallel synchronisation by all-reduce, as a piece (ddp's, and that
 * of any strategy that replicates a model or a model part over a dp
 * communicator): the gradients of a range of a model's flat buffer are
 * summed over the ranks of a communicator the caller chooses (the dp
 * communicator of a process grid, comm/grid.h: ddp's 1-deep grid adopts
 * the world; pipeline's and tensor's are one dp group), in buckets (strategies/shared/
 * buckets.h) started as backward makes them ready (overlap), or through
 * the compression and local SGD hook (strategies/shared/grad_sync.h).
 *
 * The all-reduce algorithm is the communicator's (--allreduce: ring,
 * recursive doubling, the library's, or hierarchical once the
 * communicator's ranks are grouped into hosts, src/comm/mpi_hier.c).
 *
 * A step, with sync = the piece and r the replica (or part) of the model:
 *     enum sb_dp_sync_mode mode = sb_dp_sync_begin(sync, step);
 *     sb_replica_gradients(r, idx, n, mode == SB_DP_SYNC_LOCAL ? n : global,
 *                          sb_dp_sync_ready_fn(sync), sync, out);
 *     sb_dp_sync_finish(sync, out);        (waits; grads hold the sum)
 *     sb_replica_update(r, grads, out);
 *     if (mode == SB_DP_SYNC_LOCAL) sb_dp_sync_after_local_update(sync, out);
 * Timing definitions (comm total, exposed, hidden): docs/ddp.md. */
#ifndef SB_DP_SYNC_H
#define SB_DP_SYNC_H

#include <stddef.h>

#include "strategies/shared/buckets.h"
#include "strategies/shared/grad_range.h"
#include "strategies/strategy.h"

/* How the piece synchronises. */
struct sb_dp_sync_cfg {
    double bucket_mb; /* bucket cap, MiB (--bucket-mb; sb_bucket_plan_create) */
    int overlap;      /* start buckets during backward (--no-overlap: 0); honoured only
                       * where the communicator overlaps (sb_comm_overlaps) */
    int device_comm;  /* 1: the replica reports comm from device events (replica.h
                       * device_comm), so the piece adds no host-timed comm */
    /* The run's flags for the hook (--grad-compression, --local-sgd,
     * --check-every), or NULL for plain buckets only. The hook exists when
     * run is given and the buffers are host memory or a compression is
     * named; it covers the whole model, so it needs range = [0, n_params). */
    const struct sb_config *run;
    int host_memory;  /* the model's buffers are host memory (backend.h) */
    long last_step;   /* the run's last step, 0-based (grad_sync.h) */
};

/* How one step synchronises (sb_dp_sync_begin). */
enum sb_dp_sync_mode {
    SB_DP_SYNC_BUCKETS = 0, /* the buckets' all-reduces (overlapping backward where enabled) */
    SB_DP_SYNC_HOOKED,      /* after backward, through the compression hook */
    SB_DP_SYNC_LOCAL,       /* local SGD: no gradient sync; the replica steps alone (gradient
                             * scaled by 1/its own batch), then sb_dp_sync_after_local_update */
};

struct sb_dp_sync;

/* The piece over communicator `comm` (any: the world or a dp group; kept,
 * not owned) for the gradients in `range` of model m (kept, not owned).
 * Buckets are planned over the range's tensors (sb_grad_range_plan). Not
 * collective: nothing is sent (PowerSGD's initial factors agree through
 * the run's seed). The ranks of comm must start the same steps.
 * Errors: those of sb_grad_range_plan and sb_grad_sync_create;
 * SB_ERR_USAGE for a hook over a range that is not the whole model;
 * SB_ERR_NOMEM. */
sb_status sb_dp_sync_create(struct sb_comm *comm, struct sb_model *m, struct sb_grad_range range,
                            const struct sb_dp_sync_cfg *cfg, struct sb_dp_sync **out);

/* Starts step `step` (0-based): resets the buckets and says how the step
 * synchronises. */
enum sb_dp_sync_mode sb_dp_sync_begin(struct sb_dp_sync *d, long step);

/* The ready callback to hand backward this step: sb_dp_sync_ready when
 * the step's buckets start during backward (a bucket step with overlap on
 * a communicator that overlaps, not measuring the hook's error), else
 * NULL (every bucket starts in sb_dp_sync_finish). Pass the piece as its
 * context. */
sb_grad_ready_fn sb_dp_sync_ready_fn(const struct sb_dp_sync *d);

/* Backward's ready callback (ctx = the piece): grads[offset, offset +
 * count) are final. Starts, in plan order, every bucket whose gradients
 * are all ready (a later bucket never before an earlier one, so every rank
 * issues the same sequence of collectives), then polls the buckets in
 * flight: stratbench's ring and recursive-doubling schedules advance only
 * when their owner polls them (src/comm/mpi_allreduce.h), and Open MPI's
 * libnbc (--allreduce mpi) only inside MPI calls. Ranges outside the
 * piece's are ignored. The first error is kept for sb_dp_sync_finish. */
void sb_dp_sync_ready(void *ctx, size_t offset, size_t count);

/* After backward: synchronises the range of m->grads into the sum over
 * comm's ranks (local gradients scaled by 1/global batch make it the mean,
 * replica.h). Bucket steps start the buckets not yet started, wait for
 * all, and (host-timed) add comm (the union of the buckets' spans) and
 * comm_exposed (its part after backward ended, i.e. after this call's
 * entry) to out, keeping comm - comm_exposed for describe; hooked steps
 * run the hook (its own phases); local steps do nothing. Errors: the
 * ready callback's first error; those of the communicator and the hook. */
sb_status sb_dp_sync_finish(struct sb_dp_sync *d, struct sb_step_result *out);

/* After a local SGD step's update: the hook's periodic averaging of the
 * parameters (grad_sync.h). Errors: those of the communicator. */
sb_status sb_dp_sync_after_local_update(struct sb_dp_sync *d, struct sb_step_result *out);

/* Whether the ranks hold the same parameters after the last step (0 after
 * a local SGD step that did not average; 1 without the hook). */
int sb_dp_sync_in_sync(const struct sb_dp_sync *d);

/* Whether the buckets start during backward (cfg overlap, and the
 * communicator's all-reduce overlaps: a staged one completes at issue, so
 * started from backward its copies would be booked as backward). */
int sb_dp_sync_overlaps(const struct sb_dp_sync *d);

/* The bucket plan (launch order; offsets in the model's buffer). */
const struct sb_bucket_plan *sb_dp_sync_plan(const struct sb_dp_sync *d);

/* States bucket_count, bucket_bytes (launch order, the first
 * SB_DETAIL_VALUES_MAX), overlap (1/0), the hook's keys
 * (sb_grad_sync_describe) and, when steps were measured, the median and
 * mean over the last measured_steps steps of comm - comm_exposed in ms
 * (comm_hidden_ms_median, comm_hidden_ms_mean). */
void sb_dp_sync_describe(const struct sb_dp_sync *d, long measured_steps,
                         struct sb_strategy_details *det);

/* Zeroes the piece's own counters (the hook's logical bytes) at the end of
 * warm-up; the communicator's are the caller's. */
void sb_dp_sync_reset_counters(struct sb_dp_sync *d);

/* Frees the piece (not the communicator or the model); safe on NULL. */
void sb_dp_sync_destroy(struct sb_dp_sync *d);

#endif
