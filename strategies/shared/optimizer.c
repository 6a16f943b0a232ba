/* SGD with momentum and Adam over backend memory; see optimizer.h. */
#include "strategies/shared/optimizer.h"

#include <math.h>
#include <string.h>

#include "core/half.h"
#include "core/nvtx.h"

int sb_optimizer_state_floats(const struct sb_config *cfg)
{
    return (cfg->optimizer == SB_OPTIMIZER_ADAM ? 2 : 1) +
           (cfg->precision != SB_PRECISION_FP32 ? 1 : 0);
}

sb_status sb_optimizer_init(struct sb_optimizer *o, const struct sb_backend_ops *be,
                            const struct sb_config *cfg, size_t n)
{
    memset(o, 0, sizeof *o);
    o->be = be;
    o->kind = cfg->optimizer;
    o->n = n;
    o->lr = (float)sb_config_effective_lr(cfg);
    o->momentum = (float)cfg->momentum;
    o->schedule = cfg->lr_schedule;
    o->warmup = cfg->lr_warmup_steps;
    o->total = cfg->run_steps;
    o->updates_per_step = 1;
    size_t bytes = (n ? n : 1) * sizeof(float);
    SB_TRY(be->alloc((void **)&o->m, bytes));
    if (o->kind == SB_OPTIMIZER_ADAM) SB_TRY(be->alloc((void **)&o->v, bytes));
    if (cfg->precision != SB_PRECISION_FP32) {
        o->half_fmt = cfg->precision == SB_PRECISION_BF16 ? SB_HALF_BF16 : SB_HALF_FP16;
        SB_TRY(be->alloc((void **)&o->master, bytes));
    }
    return SB_OK;
}

double sb_lr_at(enum sb_lr_schedule schedule, double lr, long warmup, long total, long t)
{
    if (t < warmup) return lr * (double)(t + 1) / (double)warmup;
    if (schedule != SB_LR_SCHEDULE_COSINE || total <= warmup) return lr;
    if (t >= total) return 0.0;
    double progress = (double)(t - warmup) / (double)(total - warmup);
    return lr * 0.5 * (1.0 + cos(M_PI * progress));
}

float sb_optimizer_lr(const struct sb_optimizer *o)
{
    if (o->schedule == SB_LR_SCHEDULE_CONSTANT && o->warmup == 0) return o->lr;
    long step = o->t / (o->updates_per_step > 0 ? o->updates_per_step : 1);
    return (float)sb_lr_at(o->schedule, (double)o->lr, o->warmup, o->total, step);
}

/* torch.optim.Adam (_single_tensor_adam): step_size = lr / (1 - b1^t),
 * denominator sqrt(v) / sqrt(1 - b2^t) + eps; lr is this step's
 * (sb_optimizer_lr). */
static void adam_part(struct sb_optimizer *o, size_t first, size_t count, float *params,
                      const float *grads, float lr)
{
    double t = (double)(o->t + 1);
    double bc1 = 1.0 - pow(SB_ADAM_BETA1, t), bc2 = 1.0 - pow(SB_ADAM_BETA2, t);
    o->be->adam(params, o->m + first, o->v + first, grads, count, (float)SB_ADAM_BETA1,
                (float)SB_ADAM_BETA2, (float)SB_ADAM_EPS, (float)(lr / bc1),
                (float)sqrt(bc2));
}

void sb_optimizer_step_part(struct sb_optimizer *o, size_t first, size_t count, float *params,
                            const float *grads)
{
    if (!o->range_open) {
        sb_nvtx_push_phase("optimizer", SB_NVTX_OPTIMIZER);
        o->range_open = 1;
    }
    float lr = sb_optimizer_lr(o);
    float *compute = params; /* the 16-bit copy, written after the step */
    if (o->master) {
        if (o->t == 0) o->be->copy(o->master + first, params, count);
        params = o->master + first;
    }
    if (o->kind == SB_OPTIMIZER_SGD) {
        o->be->sgd_momentum(params, o->m + first, grads, count, lr, o->momentum);
    } else {
        adam_part(o, first, count, params, grads, lr);
    }
    if (o->master) {
        o->be->copy(compute, params, count);
        o->be->round_half(compute, count, o->half_fmt);
    }
}

void sb_optimizer_end_step(struct sb_optimizer *o)
{
    if (o->range_open) sb_nvtx_pop();
    o->range_open = 0;
    o->t++;
}

void sb_optimizer_step(struct sb_optimizer *o, float *params, const float *grads)
{
    sb_optimizer_step_part(o, 0, o->n, params, grads);
    sb_optimizer_end_step(o);
}

size_t sb_optimizer_state_bytes(const struct sb_optimizer *o)
{
    return ((o->m ? o->n : 0) + (o->v ? o->n : 0) + (o->master ? o->n : 0)) * sizeof(float);
}

void sb_optimizer_free(struct sb_optimizer *o)
{
    if (!o->be) return;
    o->be->free(o->m);
    o->be->free(o->v);
    o->be->free(o->master);
    o->m = o->v = o->master = NULL;
}
