/* What a workload's model will hold, computed from the configuration before
 * anything is allocated (src/harness/mem_estimate.h adds the strategy's
 * share and checks it against the memory available). */
#ifndef SB_WORKLOAD_ESTIMATE_H
#define SB_WORKLOAD_ESTIMATE_H

#include <stddef.h>

#include "core/config.h"

struct sb_model_size {
    double n_params;          /* parameters (a double: 65536 x 65536 overflows no int) */
    double activation_bytes;  /* activations and their gradients for max_batch samples */
};

/* Sizes of cfg->workload's model for batches of max_batch samples: the mlp
 * from --hidden (784 -> hidden... -> 10: weights and biases; act and two
 * delta buffers of the widest layer per sample, as workloads/dense.c
 * allocates), the cnn from its fixed layers (workloads/cnn.c), the vit
 * from --patch ... --mlp-ratio (sb_vit_size). Unknown workload: zeros. */
struct sb_model_size sb_workload_size(const struct sb_config *cfg, int max_batch);

#endif
