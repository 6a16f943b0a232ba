/* The optimizer every strategy steps, on all of a replica's parameters or
 * on one shard of them (zero, central's servers): SGD with momentum or
 * Adam, one call into the backend (sgd_momentum, adam), so a replica, a
 * parameter server and a ZeRO rank apply the same arithmetic. */
#ifndef SB_OPTIMIZER_H
#define SB_OPTIMIZER_H

#include <stddef.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/status.h"

/* Adam's constants: PyTorch's torch.optim.Adam defaults. */
#define SB_ADAM_BETA1 0.9
#define SB_ADAM_BETA2 0.999
#define SB_ADAM_EPS 1e-8

struct sb_optimizer {
    const struct sb_backend_ops *be;
    enum sb_optimizer_kind kind;
    size_t n;      /* parameters it steps */
    float *m;      /* (n) SGD: the momentum buffer; Adam: the first moment */
    float *v;      /* (n) Adam: the second moment; NULL for SGD */
    float lr;      /* effective learning rate: the schedule's peak */
    float momentum;
    long t;        /* steps taken (Adam's bias correction uses t + 1) */
    /* --precision bf16|fp16: the fp32 master weights (n), the parameters
     * the optimizer steps; the caller's params are the 16-bit compute copy,
     * written as the master rounded (half_fmt, core/half.h) after every
     * step. The master is taken from the (16-bit) parameters at the first
     * step, as DeepSpeed and Megatron-LM build theirs from the model's
     * 16-bit weights. NULL under fp32: params are stepped in place. */
    float *master;
    int half_fmt;
    enum sb_lr_schedule schedule; /* cfg's --lr-schedule */
    long warmup;   /* cfg's --lr-warmup-steps */
    long total;    /* cfg's run_steps: the schedule's length in training steps */
    int updates_per_step; /* optimizer steps per training step: 1, or central --async's
                           * one update per worker's push (the schedule reads t / this) */
    int range_open; /* this step's NVTX "optimizer" range is open (a step of parts) */
};

/* Optimizer-state floats per parameter for cfg's optimizer: 1 (SGD's
 * momentum) or 2 (Adam's two moments), plus 1 for the fp32 master weights
 * under --precision bf16|fp16; the ZeRO paper's K = 4 x this
 * (Rajbhandari et al. 2020, section 3.1: K = 12 for mixed-precision Adam,
 * 8 for fp32 Adam, whose parameters are their own master). */
int sb_optimizer_state_floats(const struct sb_config *cfg);

/* The learning rate of training step t (0-based: t steps done before it)
 * of a run of `total` steps, for peak lr: lr x w(t) x c(t), where the
 * linear warm-up w(t) = (t + 1) / warmup for t < warmup, else 1 (Goyal et
 * al. 2017, section 2.2, from 0: its first step already moves), and c(t) =
 * 1 for the constant schedule; for cosine, c(t) = 1 during the warm-up and
 * then (1 + cos(pi (t - warmup) / (total - warmup))) / 2 (Loshchilov &
 * Hutter 2017, SGDR, eq. 5 with one period and eta_min = 0; as PyTorch's
 * CosineAnnealingLR with T_max = total - warmup), 0 from t = total on, so
 * the run's last step (t = total - 1) takes the smallest lr above 0.
 * total <= warmup (a length not known) holds the lr after the warm-up. A
 * pure function of t: every strategy applies the same lr at the same step. */
double sb_lr_at(enum sb_lr_schedule schedule, double lr, long warmup, long total, long t);

/* The learning rate o's next step applies (sb_lr_at of its step t /
 * updates_per_step); exactly o->lr for the constant schedule without
 * warm-up. */
float sb_optimizer_lr(const struct sb_optimizer *o);

/* Allocates zeroed state for n parameters in backend memory (cfg's
 * optimizer, effective lr, momentum and lr schedule over cfg->run_steps;
 * one optimizer step per training step, a caller that steps more often
 * sets updates_per_step). Errors: SB_ERR_NOMEM;
 * sb_optimizer_free releases a partial one. */
sb_status sb_optimizer_init(struct sb_optimizer *o, const struct sb_backend_ops *be,
                            const struct sb_config *cfg, size_t n);

/* One step on params (o->n floats) with grads (o->n floats), both backend
 * memory, at the scheduled lr (sb_optimizer_lr): SGD p -= lr (v = mu v + g); Adam with the bias corrections of
 * step t + 1 computed here in double (be->adam). Asynchronous on a device;
 * the caller checks be->check. */
void sb_optimizer_step(struct sb_optimizer *o, float *params, const float *grads);

/* The same step on a part of the state: params and grads (count floats
 * each) are the parameters and gradients of state range [first, first +
 * count), stepped as step t + 1; a step made of parts (zero's shard
 * blocks) ends with one sb_optimizer_end_step. The step's NVTX range
 * "optimizer" (payload: the thread's step, core/nvtx.h) opens at its first
 * part and closes at sb_optimizer_end_step, so every strategy's update is
 * marked wherever it steps its optimizer. */
void sb_optimizer_step_part(struct sb_optimizer *o, size_t first, size_t count, float *params,
                            const float *grads);

/* Ends a step made of sb_optimizer_step_part calls (t advances). */
void sb_optimizer_end_step(struct sb_optimizer *o);

/* Bytes of its state (m, v and the master weights). */
size_t sb_optimizer_state_bytes(const struct sb_optimizer *o);

/* Frees the state; safe on a zeroed or freed struct. */
void sb_optimizer_free(struct sb_optimizer *o);

#endif
