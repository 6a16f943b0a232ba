/* Mixed precision and fp16's loss scaler; see precision.h. */
#include "strategies/shared/precision.h"

#include "comm/comm.h"
#include "core/half.h"
#include "core/test_fault.h"

void sb_loss_scaler_init(struct sb_loss_scaler *ls, const struct sb_config *cfg)
{
    ls->enabled = cfg->precision == SB_PRECISION_FP16;
    ls->scale = ls->enabled ? SB_LOSS_SCALE_INIT : 1.0;
    ls->good_steps = 0;
    ls->skipped = 0;
}

float sb_loss_scaler_factor(const struct sb_loss_scaler *ls)
{
    return ls->enabled ? (float)ls->scale : 1.0f;
}

void sb_loss_scaler_unscale(const struct sb_loss_scaler *ls, const struct sb_backend_ops *be,
                            float *grads, size_t n, int *found_inf)
{
    if (!ls->enabled || n == 0) return;
    /* S is a power of two, so 1/S is exact and so is every product (but
     * for results below the smallest normal float). */
    be->unscale_check(grads, (float)(1.0 / ls->scale), n, found_inf);
}

int sb_loss_scaler_update(struct sb_loss_scaler *ls, int found_inf)
{
    if (!ls->enabled) return 0;
    if (found_inf) {
        ls->scale *= SB_LOSS_SCALE_BACKOFF;
        ls->good_steps = 0;
        ls->skipped++;
        return 1;
    }
    if (++ls->good_steps == SB_LOSS_SCALE_INTERVAL) {
        ls->scale *= SB_LOSS_SCALE_GROWTH;
        ls->good_steps = 0;
    }
    return 0;
}

sb_status sb_loss_scaler_agree(const struct sb_loss_scaler *ls, struct sb_comm *comm,
                               int *found_inf)
{
    if (!ls->enabled) return SB_OK;
    double any = *found_inf;
    SB_TRY(sb_comm_allreduce_f64(comm, &any, 1));
    *found_inf = any > 0;
    return SB_OK;
}

int sb_precision_half(const struct sb_config *cfg, int *fmt)
{
    if (cfg->precision == SB_PRECISION_FP32) return 0;
    if (fmt) *fmt = cfg->precision == SB_PRECISION_BF16 ? SB_HALF_BF16 : SB_HALF_FP16;
    return 1;
}

void sb_precision_round(const struct sb_config *cfg, const struct sb_backend_ops *be, float *buf,
                        size_t n)
{
    int fmt = 0;
    if (n && sb_precision_half(cfg, &fmt)) be->round_half(buf, n, fmt);
}

int sb_precision_inject_inf(long step) { return sb_test_fault("inf-grad", (int)step); }

double sb_precision_value_bytes(const struct sb_config *cfg)
{
    return cfg->precision == SB_PRECISION_FP32 ? 4.0 : 2.0;
}

void sb_precision_ledger(const struct sb_config *cfg, struct sb_memory_entry *e)
{
    double keep = sb_precision_value_bytes(cfg) / 4.0;
    double emulated = (1.0 - keep) * (e->held.param_bytes + e->held.grad_bytes);
    e->held.param_bytes *= keep;
    e->held.grad_bytes *= keep;
    e->emulation_bytes = emulated;
}
