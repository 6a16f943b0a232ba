/* One replica: a model (or, once workloads build parts, a model part), its
 * optimizer state and batch buffers, and the step pieces every strategy
 * composes. The pieces are the replica passes, each timed as its own
 * phase: data (sb_replica_data), forward of a slot (sb_replica_forward),
 * backward of a slot (sb_replica_backward), the optimizer
 * (sb_replica_update); sb_replica_gradients is data + forward + backward of
 * one batch for the data-parallel strategies, and a pipeline schedule is a
 * loop over the passes in its own strategy file (docs/design.md, "Replica
 * passes"). Timing of the phases happens here, so all strategies time them
 * the same way. */
#ifndef SB_REPLICA_H
#define SB_REPLICA_H

#include "strategies/shared/optimizer.h"
#include "strategies/shared/precision.h"
#include "strategies/strategy.h"

struct sb_replica_path;   /* how a step runs: host or device (replica_path.h) */
struct sb_replica_device; /* the device path's state (replica_device.c) */

/* One micro-batch's batch buffers: a slot. A pipeline keeps several
 * micro-batches in flight (forwarded, not yet backwarded), each in its own
 * slot. */
struct sb_replica_slot {
    float *x;   /* (max_batch, in_dim) batch images, backend memory */
    uint8_t *y; /* (max_batch) batch labels, backend memory */
    int n;      /* samples that sb_replica_data put here (0: none yet) */
};

struct sb_replica {
    const struct sb_strategy_env *env;
    struct sb_model *model;
    struct sb_optimizer opt; /* over all n_params; opt.m NULL without optimizer */
    /* slots batch buffers (slot[0] also serves evaluation). Forward and
     * backward run on slot 0 only while the workload keeps one batch's
     * activations (its whole-model forward/backward ops); a workload's
     * per-slot part ops lift that (sb_replica_forward). */
    struct sb_replica_slot *slot;
    int slots;
    /* The slot whose forward ran and whose backward has not: the model
     * keeps that forward's activations; -1: none. */
    int forwarded;
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
     * reaches --max-steps (sb_replica_count_step). */
    double *loss_acc;
    /* fp16's dynamic loss scaler (precision.h): forward scales the loss by
     * its S, sb_replica_update unscales and may skip the step; S = 1 and
     * never a skip under fp32 and bf16. A strategy whose ranks see
     * different pieces of the gradient (zero, central's servers) agrees on
     * the skip itself and updates this scaler. */
    struct sb_loss_scaler scaler;
    long steps;          /* steps that ran so far */
    int steps_per_epoch; /* of the global batch */
    int max_batch;
};

/* Creates a replica with the workload's initial parameters from cfg->seed
 * and one slot. with_optimizer = 0 omits the optimizer state (central's
 * workers, zero, which step a shard with their own sb_optimizer).
 * Errors: SB_ERR_NOMEM, or the workload's. */
sb_status sb_replica_create(const struct sb_strategy_env *env, int with_optimizer,
                            struct sb_replica **out);

/* sb_replica_create with `slots` >= 1 batch buffers (micro-batches in
 * flight). Errors: as sb_replica_create; SB_ERR_INTERNAL for slots < 1 or
 * slots > 1 on the device path (one batch buffer there). */
sb_status sb_replica_create_slots(const struct sb_strategy_env *env, int with_optimizer,
                                  int slots, struct sb_replica **out);

/* A replica of one part of the model (workload.h's struct sb_part: its
 * layers, tp shard and activation slots), with part->slots batch buffers
 * of max_batch samples each (a pipeline's micro-batch) and, with
 * with_optimizer, the optimizer state of the part's parameters. The
 * whole-model passes below do not run a part (the workload refuses them):
 * a strategy drives its part with the workload's part ops; data,
 * count_step and update work as for a whole model. Errors: SB_ERR_USAGE
 * naming --workload for a workload without parts; SB_ERR_INTERNAL for
 * max_batch < 1; those of sb_replica_create_slots and create_part. */
sb_status sb_replica_create_part(const struct sb_strategy_env *env, int with_optimizer,
                                 const struct sb_part *part, int max_batch,
                                 struct sb_replica **out);

/* --- the replica passes (host path; the device path runs only the fused
 * sb_replica_gradients: replica_device.c) --- */

/* The data pass: gathers training samples idx[0..n) (host indices, n <=
 * max_batch) into slot `slot`'s batch buffers, timed as the data phase
 * (added to res->phase_ms, host clock). Errors: SB_ERR_INTERNAL for a slot
 * out of range, n out of range, or the device path. */
sb_status sb_replica_data(struct sb_replica *r, int slot, const int32_t *idx, int n,
                          struct sb_step_result *res);

/* The forward pass of slot `slot`'s batch (gathered by sb_replica_data)
 * with gradient scale 1/global_batch, so that summing the gradients of all
 * replicas and micro-batches gives the mean over the global batch; the loss
 * sum goes to the replica's loss sum (read by sb_replica_count_step), the
 * slot's samples to res->samples, the time to the forward phase. Checks
 * the backend's recorded errors after forward (be->check). Errors:
 * SB_ERR_INTERNAL for a slot without data, or a slot other than 0 while the
 * workload keeps one batch's activations; SB_ERR_DEVICE; the workload's. */
sb_status sb_replica_forward(struct sb_replica *r, int slot, int global_batch,
                             struct sb_step_result *res);

/* The backward pass of slot `slot` (whose forward ran last), timed as the
 * backward phase: writes the model's gradients, calling `ready` (may be
 * NULL) as layers' gradients become final (last layer first).
 * accumulate = 1 adds to the gradients instead of overwriting them (for
 * micro-batches of one step); the workload's whole-model backward only
 * overwrites, so accumulate = 1 waits for its part ops. Errors:
 * SB_ERR_INTERNAL for a slot whose forward did not run last, or
 * accumulate = 1; the workload's. */
sb_status sb_replica_backward(struct sb_replica *r, int slot, sb_grad_ready_fn ready, void *ctx,
                              int accumulate, struct sb_step_result *res);

/* A bubble: the time a stage idles because another stage has not
 * delivered (a pipeline's blocking receive of activations or gradients).
 * sb_replica_bubble_begin opens the NVTX range "bubble" (category
 * SB_NVTX_BUBBLE, the trace's "bubble") and returns the host clock (s);
 * sb_replica_bubble_end closes the range and adds the time since t0 to
 * res->phase_ms[SB_PHASE_BUBBLE]. Host clocks: on a device the wait being
 * timed is the host's (a receive that returns once the data is there). */
double sb_replica_bubble_begin(void);
void sb_replica_bubble_end(double t0, struct sb_step_result *res);

/* Ends a step's passes (call once per step, after its last backward):
 * counts the step and, on the epoch's last step or the --max-steps step,
 * adds the loss summed since the last read to res->loss_sum. Errors: the
 * backend's download of the loss sum (SB_ERR_DEVICE). */
sb_status sb_replica_count_step(struct sb_replica *r, struct sb_step_result *res);

/* Data, forward and backward of one batch in slot 0, then the step's count:
 * gathers training samples idx[0..n) (data phase), runs forward and
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
 * phase of this step (the passes above, then sb_replica_count_step). On
 * the device path (replica_device.c: the passes fused, not split), CUDA
 * events on the stream; the phases added to res are the PREVIOUS step's (data,
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

/* Test hook (STRATBENCH_TEST_FAULT=inf-grad:N, precision.h): at the
 * replica's step N, writes +inf into the first of its model's gradients.
 * sb_replica_backward does this on its own; a strategy whose passes run
 * the workload's parts directly (pipeline, tensor) calls it after backward
 * on the ranks it chooses. */
void sb_replica_test_inject_inf(struct sb_replica *r);

/* fp16: unscales grads (r->opt.n floats, backend memory, in place) by
 * 1/S and sets *found_inf to 1 when any is inf or NaN (else 0); nothing
 * and 0 for fp32 and bf16. For a strategy whose ranks hold different
 * pieces of one step's gradients (pipeline stages, tensor-parallel
 * shards): it sums found_inf over every such rank, then calls
 * sb_replica_update_decided on each replica. Errors: the backend's
 * (be->check). */
sb_status sb_replica_unscale(struct sb_replica *r, const float *grads, int *found_inf);

/* The optimizer step on gradients sb_replica_unscale has unscaled, after
 * the loss scaler's update with the job's agreed found_inf (fp16: skipped,
 * S halved and counted, when found_inf; fp32 and bf16: always stepped).
 * Errors: those of sb_replica_update. */
sb_status sb_replica_update_decided(struct sb_replica *r, const float *grads, int found_inf,
                                    struct sb_step_result *res);

/* Applies cfg's optimizer (r->opt) using `grads` (n_params, backend memory; the
 * model's own gradient buffer or an aggregate), timed as the optimizer
 * phase, then checks the backend's recorded errors (be->check). Under
 * fp16 the gradients are first unscaled in place (1/S) and the step is
 * skipped when any is inf or NaN (r->scaler): every replica that calls
 * this holds the same reduced gradients (single, ddp, mirrored), so every
 * one decides alike. Errors: SB_ERR_DEVICE (the backend), SB_ERR_INTERNAL
 * without optimizer state. */
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
