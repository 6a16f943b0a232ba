/* Derived quantities of a configuration; see config.h. */
#include "core/config.h"

double sb_config_effective_lr(const struct sb_config *cfg)
{
    return cfg->lr_scaling == SB_LR_SCALING_LINEAR ? cfg->lr * cfg->replicas : cfg->lr;
}

int sb_config_global_batch(const struct sb_config *cfg) { return cfg->replicas * cfg->batch; }

const char *sb_optimizer_name(enum sb_optimizer_kind o) { return o == SB_OPTIMIZER_ADAM ? "adam" : "sgd"; }
