/* Model sizes from the configuration; see estimate.h. */
#include "workloads/estimate.h"

struct sb_model_size sb_workload_size(const struct sb_config *cfg, int max_batch)
{
    const struct sb_workload_ops *wl = sb_workload_find(cfg->workload);
    struct sb_model_size none = {0};
    return wl && wl->size ? wl->size(cfg, max_batch) : none;
}
