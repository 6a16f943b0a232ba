/* Model sizes from the configuration; see estimate.h. */
#include "workloads/estimate.h"

#include <string.h>

#include "data/mnist.h"
#include "workloads/vit_model.h"

struct sb_model_size sb_workload_size(const struct sb_config *cfg, int max_batch)
{
    struct sb_model_size s = {0};
    double rows = max_batch > 0 ? max_batch : 1;
    if (strcmp(cfg->workload, "mlp") == 0) {
        double in = SB_MNIST_SIDE * SB_MNIST_SIDE, widest = 1, act = 0;
        for (int l = 0; l <= cfg->n_hidden; l++) {
            double out = l < cfg->n_hidden ? cfg->hidden[l] : 10;
            s.n_params += in * out + out;
            act += out;                       /* act[l+1] */
            if (l < cfg->n_hidden && out > widest) widest = out;
            in = out;
        }
        s.activation_bytes = rows * (act + 2 * widest + 10) * sizeof(float);
    } else if (strcmp(cfg->workload, "cnn") == 0) {
        /* conv 1->6 and 6->16 (5x5), dense 256->120->84->10: workloads/cnn.c. */
        s.n_params = (6 * 25 + 6) + (16 * 6 * 25 + 16) + (256 * 120 + 120) + (120 * 84 + 84) +
                     (84 * 10 + 10);
        /* 6x24x24, 6x12x12, 16x8x8, 16x4x4, 120, 84, 10 per sample, and
         * their gradients, with im2col scratch of the first convolution. */
        s.activation_bytes = rows * 2.0 * (3456 + 864 + 1024 + 256 + 120 + 84 + 10 + 25 * 576) *
                             sizeof(float);
    } else if (strcmp(cfg->workload, "vit") == 0) {
        s = sb_vit_size(cfg, max_batch); /* workloads/vit.c: what it allocates */
    }
    return s;
}
