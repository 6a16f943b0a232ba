/* What a workload's model will hold, computed from the configuration before
 * anything is allocated (src/harness/mem_estimate.h adds the strategy's
 * share and checks it against the memory available). Each workload states
 * its own sizes (struct sb_workload_ops.size); this asks the registry. */
#ifndef SB_WORKLOAD_ESTIMATE_H
#define SB_WORKLOAD_ESTIMATE_H

#include "core/config.h"
#include "workloads/workload.h"

/* Sizes of cfg->workload's whole model for batches of max_batch samples, its
 * size op's answer. An unknown workload, or one without a size op: zeros. */
struct sb_model_size sb_workload_size(const struct sb_config *cfg, int max_batch);

#endif
