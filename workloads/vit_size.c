/* The vit workload's sizes from the configuration, before anything is
 * allocated: parameters and activation bytes of the whole model or of a
 * tensor-parallel shard (vit_model.h; docs/workloads.md and docs/tensor.md
 * derive them). */
#include "data/mnist.h"
#include "workloads/vit_model.h"

/* The sizes of tp shard T of every layer (docs/tensor.md derives them;
 * with sequence parallelism the formula below it there):
 * per block s tokens, b samples (the training cap), h width, a heads, r
 * MLP ratio, kept for backward in fp32 without dropout:
 *   4sbh (4 + (4 + 2r)/T) + 4as^2 b/T + 16sb bytes
 * (the residual input, the attention output mid and the two LayerNorm
 * outputs whole; q, k, v, the context, fc1's pre-activation and the GELU
 * output, and the attention probabilities of the shard's heads; the four
 * LayerNorm statistics), and outside the blocks the embedding, head and
 * backward scratch: 4(sbh + b p^2 g^2 + 4bh + 2b + 20b) + 4(3 + (3 + r)/T)
 * sbh + 4as^2 b/T. T = 1: the whole model's (sb_vit_size). */
struct sb_model_size sb_vit_part_size(const struct sb_config *cfg, int max_batch,
                                     const struct sb_part *part)
{
    const struct sb_vit_config *v = &cfg->vit;
    struct sb_model_size z = {0};
    double T = part ? part->tp_size : 1;
    if (v->patch < 1 || v->heads < 1 || v->width % v->heads != 0 || T < 1) return z;
    double b = cfg->batch > 0 && cfg->batch < max_batch ? cfg->batch : max_batch;
    double g = SB_MNIST_SIDE / v->patch, pd = (double)v->patch * v->patch, s = g * g + 1;
    double h = v->width, a = v->heads, r = v->mlp_ratio, L = v->depth;
    /* split: q, k, v, fc1 (weights and biases), proj and fc2 weights */
    double split_params = 3 * (h * h + h) + (r * h * h + r * h) + h * h + h * r * h;
    double block_params = 4 * h + 4 * (h * h + h) + (r * h * h + r * h) + (h * r * h + h);
    block_params -= split_params * (1 - 1 / T);
    z.n_params = h + s * h + h * pd + h + L * block_params + 2 * h + 10 * h + 10;
    double block = 4 * s * b * h * (4 + (4 + 2 * r) / T) + 4 * a * s * s * b / T + 16 * s * b;
    double rest = 4 * (s * b * h + b * pd * g * g + 4 * b * h + 2 * b + 20 * b) +
                  4 * (3 + (3 + r) / T) * s * b * h + 4 * a * s * s * b / T;
    if (part && part->sequence_parallel && T > 1) {
        /* the residual input, mid and the statistics hold s/T tokens; the
         * gathered LayerNorm outputs stay whole (backward reads them) */
        block = 4 * s * b * h * (2 + (6 + 2 * r) / T) + 4 * a * s * s * b / T + 16 * s * b / T;
        /* the last residual s/T; the embedding's and head's whole sequence and
         * the gather's staging whole; a LayerNorm shard and the running
         * gradient s/T */
        rest += 4 * s * b * h * (1 / T - 1) + 4 * s * b * h * (2 + 2 / T);
    }
    z.activation_bytes = L * block + rest;
    z.block_activation_bytes = block;
    return z;
}

struct sb_model_size sb_vit_size(const struct sb_config *cfg, int max_batch)
{
    return sb_vit_part_size(cfg, max_batch, NULL);
}
