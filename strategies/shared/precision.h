/* Mixed precision (--precision bf16|fp16) as one piece beside the
 * replica: what a strategy asks about the run's numerics, and fp16's
 * dynamic loss scaler. docs/precision.md has the derivations.
 *
 * What is 16-bit on the CPU backend (values stored rounded to nearest
 * even in float buffers, computed in fp32: the numerics of tensor cores,
 * 16-bit inputs and fp32 accumulation):
 *   - the compute copy of the parameters: the fp32 master rounded after
 *     every optimizer step (the master and the optimizer state are fp32,
 *     strategies/shared/optimizer.h);
 *   - the batch images (sb_replica_data) and every GEMM output a layer
 *     writes, forward and backward (workloads/dense.c, conv.c via
 *     sb_model_round);
 *   - the gradients, rounded by backward before a layer is reported ready,
 *     so that what a strategy reduces is 16-bit (ddp's all-reduce and
 *     zero's reduce-scatter then move 2 bytes per element:
 *     sb_config_grad_wire16).
 * fp16 also scales the loss (PyTorch's torch.amp.GradScaler with its
 * defaults): the gradients are made S times larger in backward and
 * unscaled before the optimizer, and a step whose gradients hold an inf or
 * a NaN anywhere is skipped while S is halved. */
#ifndef SB_PRECISION_H
#define SB_PRECISION_H

#include "backend/backend.h"
#include "core/config.h"
#include "core/memory.h"
#include "core/status.h"

/* GradScaler's defaults (torch.amp.GradScaler, PyTorch 2.x). */
#define SB_LOSS_SCALE_INIT 65536.0     /* init_scale 2^16 */
#define SB_LOSS_SCALE_GROWTH 2.0       /* growth_factor */
#define SB_LOSS_SCALE_BACKOFF 0.5      /* backoff_factor */
#define SB_LOSS_SCALE_INTERVAL 2000    /* growth_interval: good steps before growing */

/* fp16's dynamic loss scaler; for fp32 and bf16 it scales by 1 and never
 * skips (enabled = 0). */
struct sb_loss_scaler {
    int enabled;      /* 1 under --precision fp16 */
    double scale;     /* S: the loss (and so every gradient) is multiplied by it */
    long good_steps;  /* consecutive steps without inf/NaN since the last change */
    long skipped;     /* steps skipped because of inf/NaN */
};

/* The scaler for cfg's precision: enabled with S = 2^16 for fp16, else
 * S = 1 and disabled. */
void sb_loss_scaler_init(struct sb_loss_scaler *ls, const struct sb_config *cfg);

/* S as the float the forward multiplies its gradient scale by (1 when
 * disabled). */
float sb_loss_scaler_factor(const struct sb_loss_scaler *ls);

/* Unscales grads[0..n) (backend memory) by 1/S and sets *found_inf to 1
 * when any of them is inf or NaN (leaves it otherwise); nothing when
 * disabled. The strategy then agrees on found_inf across every rank whose
 * gradients feed the same step (a reduction where ranks see different
 * pieces: zero's shards) before sb_loss_scaler_update. */
void sb_loss_scaler_unscale(const struct sb_loss_scaler *ls, const struct sb_backend_ops *be,
                            float *grads, size_t n, int *found_inf);

/* GradScaler.update with the step's agreed found_inf: returns 1 when the
 * step must be skipped (found_inf: S *= 0.5, counted in ls->skipped, the
 * good-step count restarts), else 0 (after 2000 good steps in a row S *=
 * 2). Disabled: always 0. */
int sb_loss_scaler_update(struct sb_loss_scaler *ls, int found_inf);

struct sb_comm;

/* The step's agreed found_inf where the ranks of `comm` hold different
 * pieces of one step's gradients (zero's shards, pipeline stages, tp
 * shards): *found_inf becomes 1 on every rank when it is 1 on any (a sum
 * of one double over comm, uncounted: a decision, not training traffic).
 * Nothing when ls is disabled (no message). Errors: the communicator's. */
sb_status sb_loss_scaler_agree(const struct sb_loss_scaler *ls, struct sb_comm *comm,
                               int *found_inf);

/* Whether cfg trains with 16-bit values (bf16 or fp16), and their format
 * (*fmt, an enum sb_half_format of core/half.h). */
int sb_precision_half(const struct sb_config *cfg, int *fmt);

/* Rounds buf[0..n) (backend memory) to cfg's 16-bit format; nothing under
 * fp32. */
void sb_precision_round(const struct sb_config *cfg, const struct sb_backend_ops *be, float *buf,
                        size_t n);

/* Bytes of one parameter or gradient value in the ZeRO paper's
 * accounting: 4 under fp32, 2 under bf16 and fp16. */
double sb_precision_value_bytes(const struct sb_config *cfg);

/* Restates a ledger entry whose held parameters and gradients were counted
 * at 4 bytes a value (the float buffers this suite allocates) in cfg's
 * precision: under bf16/fp16 half of them move to e->emulation_bytes. */
void sb_precision_ledger(const struct sb_config *cfg, struct sb_memory_entry *e);

/* Test hook: 1 when $STRATBENCH_TEST_FAULT is "inf-grad:N" and step == N
 * (0-based): the replica then writes +inf into its first gradient after
 * backward, as an overflow would (tests/integration/test_precision.py). */
int sb_precision_inject_inf(long step);

#endif
