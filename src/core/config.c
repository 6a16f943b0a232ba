/* Derived quantities of a configuration; see config.h. */
#include "core/config.h"

#include <stdio.h>
#include <string.h>

double sb_config_effective_lr(const struct sb_config *cfg)
{
    return cfg->lr_scaling == SB_LR_SCALING_LINEAR ? cfg->lr * cfg->replicas : cfg->lr;
}

int sb_config_global_batch(const struct sb_config *cfg) { return cfg->replicas * cfg->batch; }

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
