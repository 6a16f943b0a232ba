/* The vit workload's sizes from the configuration, before anything is
 * allocated: parameters and activation bytes of the whole model or of a
 * tensor-parallel shard (vit_model.h; docs/workloads.md and docs/tensor.md
 * derive them). */
#include "data/mnist.h"
#include "workloads/vit_model.h"

/* The sizes of a part: layers [first, first + n) (the embedding layer 0,
 * block i layer i + 1, the head layer depth + 1), tp shard T, S slots
 * (docs/tensor.md derives them; with sequence parallelism the formula below
 * it there). Per block s tokens, b samples (the training cap), h width, a
 * heads, r MLP ratio, kept for backward in fp32 without dropout:
 *   4sbh (4 + (4 + 2r)/T) + 4as^2 b/T + 16sb bytes
 * (the residual input, the attention output mid and the two LayerNorm
 * outputs whole; q, k, v, the context, fc1's pre-activation and the GELU
 * output, and the attention probabilities of the shard's heads; the four
 * LayerNorm statistics). Per slot besides its blocks the part's output
 * residual 4sbh, the embedding's patches 4b p^2 g^2, the head's class
 * token before and after its LayerNorm, statistics and logits 4(2bh + 2b
 * + 20b); shared by the slots the backward scratch 4(3 + (3 + r)/T) sbh +
 * 4as^2 b/T and the head's 4(2bh); with part.split_backward (zb-h1) each
 * slot's records of B for W besides; with part.accumulate (micro-batches)
 * the accumulation buffer, 4 x the part's parameters. The whole model (one slot, T = 1):
 * sb_vit_size. */
struct sb_model_size sb_vit_part_size(const struct sb_config *cfg, int max_batch,
                                     const struct sb_part *part)
{
    const struct sb_vit_config *v = &cfg->vit;
    struct sb_model_size z = {0};
    double T = part ? part->tp_size : 1;
    if (v->patch < 1 || v->heads < 1 || v->width % v->heads != 0 || T < 1) return z;
    int first = part ? part->first_layer : 0, n = part ? part->n_layers : v->depth + 2;
    int last = first + n; /* one past */
    int embed = first == 0, head = last == v->depth + 2;
    int b0 = first > 0 ? first - 1 : 0, b1 = last - 1 < v->depth ? last - 1 : v->depth;
    double S = part && part->slots > 1 ? part->slots : 1;
    double b = cfg->batch > 0 && cfg->batch < max_batch ? cfg->batch : max_batch;
    double g = SB_MNIST_SIDE / v->patch, pd = (double)v->patch * v->patch, s = g * g + 1;
    double h = v->width, a = v->heads, r = v->mlp_ratio, L = b1 > b0 ? b1 - b0 : 0;
    /* split: q, k, v, fc1 (weights and biases), proj and fc2 weights */
    double split_params = 3 * (h * h + h) + (r * h * h + r * h) + h * h + h * r * h;
    double block_params = 4 * h + 4 * (h * h + h) + (r * h * h + r * h) + (h * r * h + h);
    block_params -= split_params * (1 - 1 / T);
    z.n_params = (embed ? h + s * h + h * pd + h : 0) + L * block_params +
                 (head ? 2 * h + 10 * h + 10 : 0);
    double block = 4 * s * b * h * (4 + (4 + 2 * r) / T) + 4 * a * s * s * b / T + 16 * s * b;
    double slot = 4 * s * b * h + (embed ? 4 * b * pd * g * g : 0) +
                  (head ? 4 * (2 * b * h + 2 * b + 20 * b) : 0);
    double shared = (head ? 8 * b * h : 0) + 4 * (3 + (3 + r) / T) * s * b * h +
                    4 * a * s * s * b / T + (L > 0 ? 4 * (3 * h / T * h + 3 * h / T) : 0);
    if (part && part->sequence_parallel && T > 1) {
        /* the residual input, mid and the statistics hold s/T tokens; the
         * gathered LayerNorm outputs stay whole (backward reads them) */
        block = 4 * s * b * h * (2 + (6 + 2 * r) / T) + 4 * a * s * s * b / T + 16 * s * b / T;
        /* the output residual s/T, and a part before the head its gathered
         * output whole; the embedding's and head's whole sequence and the
         * gather's staging whole; a LayerNorm shard and the running
         * gradient s/T */
        slot += 4 * s * b * h * (1 / T - 1) + (head ? 0 : 4 * s * b * h);
        shared += 4 * s * b * h * (2 + 2 / T);
    }
    if (part && part->split_backward) {
        /* zb-h1's records per slot (vit_split.c): each block's output gradients
         * of fc2, fc1, norm2, proj, q, k, v and norm1 (4 sbh + (r + 3) sbh/T),
         * the head's dlogits and norm's (10b + bh), the embedding's position
         * and patch gradients (sbh + b g^2 h), and the LayerNorm's discarded
         * parameter gradients (2h) */
        slot += 4 * (L * s * b * h * (4 + (r + 3) / T) + (head ? 10 * b + b * h : 0) +
                     (embed ? s * b * h + b * g * g * h : 0) + 2 * h);
    }
    z.activation_bytes = S * (L * block + slot) + shared;
    /* part.accumulate: the accumulation buffer, one gradient of the part
     * (sb_vit_acc_alloc: n_params floats) */
    if (part && part->accumulate) z.activation_bytes += 4 * z.n_params;
    z.block_activation_bytes = L > 0 ? block : 0;
    return z;
}

struct sb_model_size sb_vit_size(const struct sb_config *cfg, int max_batch)
{
    return sb_vit_part_size(cfg, max_batch, NULL);
}
