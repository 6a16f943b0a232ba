/* Derived quantities of a configuration; see config.h. */
#include "core/config.h"

#include "core/half.h"

#include <stdio.h>
#include <string.h>

double sb_config_effective_lr(const struct sb_config *cfg)
{
    return cfg->lr_scaling == SB_LR_SCALING_LINEAR ? cfg->lr * cfg->replicas : cfg->lr;
}

int sb_config_global_batch(const struct sb_config *cfg) { return cfg->replicas * cfg->batch; }

const char *sb_precision_name(enum sb_precision p)
{
    return p == SB_PRECISION_BF16 ? "bf16" : p == SB_PRECISION_FP16 ? "fp16" : "fp32";
}

int sb_precision_parse(const char *name, enum sb_precision *out)
{
    static const enum sb_precision all[] = {SB_PRECISION_FP32, SB_PRECISION_BF16,
                                            SB_PRECISION_FP16};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, sb_precision_name(all[i])) == 0) {
            *out = all[i];
            return 1;
        }
    return 0;
}

int sb_config_grad_wire16(const struct sb_config *cfg, int *fmt)
{
    if (strcmp(cfg->grad_compression, "bf16") == 0 || cfg->precision == SB_PRECISION_BF16) {
        if (fmt) *fmt = SB_HALF_BF16;
        return 1;
    }
    if (strcmp(cfg->grad_compression, "fp16") == 0 || cfg->precision == SB_PRECISION_FP16) {
        if (fmt) *fmt = SB_HALF_FP16;
        return 1;
    }
    return 0;
}

const char *sb_lr_schedule_name(enum sb_lr_schedule s)
{
    return s == SB_LR_SCHEDULE_COSINE ? "cosine" : "constant";
}

const char *sb_optimizer_name(enum sb_optimizer_kind o) { return o == SB_OPTIMIZER_ADAM ? "adam" : "sgd"; }

char *sb_method_name(const char *compression, int powersgd_rank, int local_sgd, char *out,
                     size_t size)
{
    if (compression && strcmp(compression, "none") != 0) {
        if (strcmp(compression, "powersgd") == 0 && powersgd_rank > 0)
            snprintf(out, size, "%s-r%d", compression, powersgd_rank);
        else
            snprintf(out, size, "%s", compression);
    } else if (local_sgd > 0) {
        snprintf(out, size, "local-sgd-%d", local_sgd);
    } else {
        snprintf(out, size, "none");
    }
    return out;
}
