/* Cheaper gradient synchronisation for the all-reduce strategies (ddp):
 * the machinery behind --grad-compression none | fp16 | bf16 | powersgd
 * and --local-sgd, in the spirit of PyTorch DDP's communication hooks
 * (fp16_compress_hook, bf16_compress_hook, powerSGD_hook) and its
 * PostLocalSGDOptimizer / PeriodicModelAverager. A strategy keeps its own
 * all-reduce for the plain steps and calls this hook where a step is
 * compressed or local; the hook also counts what every run reports
 * (docs/compression.md):
 *   - wire bytes per step: the communicator's counted bytes over the
 *     measured steps (fp16/bf16 count 2 bytes a value);
 *   - logical bytes per step: 4 x n_params for every synchronisation of the
 *     gradients or (local SGD) the parameters, whatever the wire carried;
 *   - the compression ratio: 1 (none), 2 (fp16, bf16), sum mn / sum (m+n)r
 *     over the compressed matrices (powersgd), H (local SGD);
 *   - the relative L2 error ||g - g32|| / ||g32|| of the synchronised
 *     gradient g against the exact average g32 (the local gradients summed
 *     in double by an uncounted metrics all-reduce), every --check-every
 *     steps (when it is 0: at the run's last step only); for none without
 *     local SGD only when --check-every is given (the fp32 all-reduce is the
 *     reference up to summation order; the check holds 8 bytes a parameter).
 * Host memory, except fp16/bf16 on a GPU (--comm nccl: ncclFloat16 /
 * ncclBfloat16, src/comm/nccl.c), where the error is not measured and the
 * phases are the device replica's (validated by the CLI). */
#ifndef SB_GRAD_SYNC_H
#define SB_GRAD_SYNC_H

#include "strategies/strategy.h"

struct sb_grad_sync;

/* The hook for cfg's --grad-compression and --local-sgd over communicator
 * c, for model m (n_params floats) whose buffers are host memory
 * (host_memory = 1) or device memory (0: fp16/bf16 only); the run ends
 * after step `last_step` (0-based; where the error is measured when
 * --check-every is 0). Errors:
 * SB_ERR_NOMEM; SB_ERR_USAGE for an unknown --grad-compression name, or a
 * method other than fp16/bf16 on device memory. */
sb_status sb_grad_sync_create(const struct sb_config *cfg, const struct sb_model *m,
                              struct sb_comm *c, int host_memory, long last_step,
                              struct sb_grad_sync **out);

/* Whether step `step` (0-based) synchronises its gradients through
 * sb_grad_sync_gradients (fp16, bf16; powersgd from --powersgd-start)
 * instead of the strategy's own all-reduce. */
int sb_grad_sync_hooked(const struct sb_grad_sync *g, long step);

/* Whether step `step` is a local SGD step: the replica computes the
 * gradient of its own slice (scaled by 1/batch), steps alone, and calls
 * sb_grad_sync_after_local_update. */
int sb_grad_sync_local(const struct sb_grad_sync *g, long step);

/* Whether this step measures the error against the fp32 average (every
 * --check-every steps, or the last step when it is 0; never for local SGD
 * steps, nor for none without local SGD unless --check-every is given). A strategy whose own
 * all-reduce runs such a step calls sb_grad_sync_reference before it
 * (with the local gradients, all ready: no overlap) and
 * sb_grad_sync_compare after it. */
int sb_grad_sync_measure_due(const struct sb_grad_sync *g, long step);
/* Keeps the exact average of `grads` (n_params, every rank's local gradient)
 * for sb_grad_sync_compare, by an uncounted all-reduce. Errors: SB_ERR_COMM,
 * SB_ERR_INTERRUPTED (sb_comm_allreduce_f64). */
sb_status sb_grad_sync_reference(struct sb_grad_sync *g, const float *grads);
void sb_grad_sync_compare(struct sb_grad_sync *g, const float *grads);

/* Synchronises grads (n_params, the local gradient) into the (compressed)
 * sum over the replicas, measuring the error when due; adds the step's
 * compress, comm and comm_exposed (= comm: nothing overlaps) phases to
 * out. Errors: those of the communicator. */
sb_status sb_grad_sync_gradients(struct sb_grad_sync *g, long step, float *grads,
                                 struct sb_step_result *out);

/* Counts a step the strategy synchronised itself (4 n_params logical
 * bytes). */
void sb_grad_sync_count_plain(struct sb_grad_sync *g);

/* After a local SGD step's update: on every H-th step after the warm-up
 * the parameters (n_params) are averaged over the replicas (one counted
 * all-reduce, then x 1/replicas; every replica ends bit-identical); the
 * time goes to out's comm phases. Errors: those of the communicator. */
sb_status sb_grad_sync_after_local_update(struct sb_grad_sync *g, long step, float *params,
                                          struct sb_step_result *out);

/* Whether the replicas hold the same parameters after the last step
 * (0 after a local SGD step that did not average). */
int sb_grad_sync_in_sync(const struct sb_grad_sync *g);

/* Zeroes the logical-byte count (with the communicator's counters at the
 * end of warm-up). */
void sb_grad_sync_reset(struct sb_grad_sync *g);

/* Adds to d: comm keys wire_bytes_per_step, logical_bytes_per_step,
 * compression_ratio, grad_rel_l2_error (mean over the measurements),
 * grad_rel_l2_error_max, grad_error_checks (null where not measured), and
 * details (powersgd_matrices, powersgd_ratio_mn, powersgd_ratio_mnr,
 * local_sgd_averages). wire bytes: c's counters over measured_steps. */
void sb_grad_sync_describe(const struct sb_grad_sync *g, const struct sb_comm *c,
                           long measured_steps, struct sb_strategy_details *d);

/* The comm keys sb_grad_sync_describe sets (for the strategy's comm_keys;
 * NULL-terminated). */
extern const char *const sb_grad_sync_comm_keys[];

/* Frees the method's state (buffers, PowerSGD's factors, the reference
 * copy); safe on NULL. */
void sb_grad_sync_destroy(struct sb_grad_sync *g);

#endif
