/* One data-parallel replica: a model, its optimizer state and batch
 * buffers, and the step pieces every strategy composes (compute gradients,
 * apply them, evaluate). Timing of the data, forward, backward and optimizer
 * phases happens here, so all strategies time them the same way. */
#ifndef SB_REPLICA_H
#define SB_REPLICA_H

#include "strategies/shared/optimizer.h"
#include "strategies/strategy.h"

struct sb_replica_path;   /* how a step runs: host or device (replica_path.h) */
struct sb_replica_device; /* the device path's state (replica_device.c) */

struct sb_replica {
    const struct sb_strategy_env *env;
    struct sb_model *model;
    struct sb_optimizer opt; /* over all n_params; opt.m NULL without optimizer */
    float *x;          /* (max_batch, in_dim) batch images, backend memory */
    uint8_t *y;        /* (max_batch) batch labels, backend memory */
    int32_t *eval_idx; /* (eval_batch) scratch indices for evaluation */
    /* The step's path, chosen once at create from the backend's
     * host_memory: host clocks on host memory, the graph-ready device step
     * otherwise. */
    const struct sb_replica_path *path;
    /* Device path only (NULL on host memory): the data set in device
     * memory, the epoch's permutation, the phase timer, the --cuda-graph
     * step graph. */
    struct sb_replica_device *dev;
    /* Set by a strategy whose synchronisation runs on the device stream
     * (only where sb_replica_on_device): the span from the end of backward
     * to the start of the optimizer is reported as comm (total and
     * exposed), the synchronisation as the compute stream sees it. */
    int device_comm;
    /* The training loss, summed in backend memory by every forward (one
     * double: on a GPU it stays on the device) and read into the step
     * result once per epoch: on the epoch's last step, or on the step that
     * reaches --max-steps (sb_replica_gradients). */
    double *loss_acc;
    long steps;          /* steps that ran so far */
    int steps_per_epoch; /* of the global batch */
    int max_batch;
};

/* Creates a replica with the workload's initial parameters from cfg->seed.
 * with_optimizer = 0 omits the optimizer state (central's workers, zero,
 * which step a shard with their own sb_optimizer).
 * Errors: SB_ERR_NOMEM, or the workload's. */
sb_status sb_replica_create(const struct sb_strategy_env *env, int with_optimizer,
                            struct sb_replica **out);

/* Gathers training samples idx[0..n) (data phase), runs forward and
 * backward with gradient scale 1/global_batch, so that summing the grads of
 * all replicas gives the mean gradient over the global batch. Adds phase
 * times to res->phase_ms and n to res->samples. The loss sum is added to
 * res->loss_sum once per epoch, on the epoch's last step (or the
 * --max-steps step), covering every step since the previous read: a
 * strategy calls this once per step on each replica. `ready` (may be
 * NULL) is called as layers' gradients become final. Checks the backend's
 * recorded errors after forward (be->check, no wait), so a failed kernel or
 * library call ends the step with SB_ERR_DEVICE.
 * Timing: on the host path (replica_host.c), host clocks around each
 * phase of this step. On the device path (replica_device.c), CUDA events
 * on the stream; the phases added to res are the PREVIOUS step's (data,
 * forward, backward, optimizer, and comm if r->device_comm), read here
 * after this step's work is enqueued, waiting only while the device has not
 * finished that previous step; the first step adds none, the last step's
 * are not reported (docs/gpu.md, "Timing"). With --cuda-graph the step
 * after the first is captured as a graph and later steps replay it
 * (phases not split). */
sb_status sb_replica_gradients(struct sb_replica *r, const int32_t *idx, int n,
                               int global_batch, sb_grad_ready_fn ready, void *ctx,
                               struct sb_step_result *res);

/* 1 when the replica steps on the device path (phases timed by device
 * events, replica_path.h), 0 on the host path. */
int sb_replica_on_device(const struct sb_replica *r);

/* Applies cfg's optimizer (r->opt) using `grads` (n_params, backend memory; the
 * model's own gradient buffer or an aggregate), timed as the optimizer
 * phase, then checks the backend's recorded errors (be->check). Errors:
 * SB_ERR_DEVICE (the backend), SB_ERR_INTERNAL without optimizer state. */
sb_status sb_replica_update(struct sb_replica *r, const float *grads,
                            struct sb_step_result *res);

/* Counts correct predictions on test samples [first, first + count) into
 * *correct. Errors: SB_ERR_DEVICE (the backend's upload of the sample
 * indices, the model's predict, the backend's recorded errors). */
sb_status sb_replica_evaluate(struct sb_replica *r, int first, int count, long *correct);

/* Frees the replica's model, optimizer state and device buffers; safe on
 * NULL. */
void sb_replica_destroy(struct sb_replica *r);

/* Ranges [first, first + count) of `n` items split evenly over `parts`
 * (the first n % parts parts get one more). */
void sb_split_range(int n, int parts, int part, int *first, int *count);

#endif
