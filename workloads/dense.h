/* A stack of fully connected layers (ReLU between them, logits out) over
 * the model's flat parameter and gradient buffers, or a part of one: layers
 * [first, end) of the stack, a tensor-parallel shard of them, with several
 * activation slots. mlp is one such stack; cnn ends in one.
 *
 * Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, section 3) pairs
 * the stack's layers from its first: layer 2i is column-parallel (its
 * weight's rows and its bias split over the tp ranks, its ReLU output a
 * shard), layer 2i + 1 row-parallel (its weight's columns split: it reads
 * the shard and its partial output is summed over the tp ranks before its
 * replicated bias). A last layer left without a partner (an odd number of
 * layers) is replicated. A part of a tp > 1 stack may not cut a pair. */
#ifndef SB_DENSE_H
#define SB_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/model_table.h"
#include "workloads/workload.h"

#define SB_DENSE_MAX_LAYERS (SB_MAX_HIDDEN + 1)

struct sb_dense {
    int n_layers;                          /* linear layers of the whole stack */
    int dim[SB_DENSE_MAX_LAYERS + 1];      /* dim[0] inputs ... dim[n_layers] logits */
    int first, end;                        /* the part holds layers [first, end) */
    int tp_rank, tp_size;
    enum sb_tp_split split[SB_DENSE_MAX_LAYERS]; /* of layer l's weight */
    int in[SB_DENSE_MAX_LAYERS], out[SB_DENSE_MAX_LAYERS]; /* layer l's widths as held */
    int in0[SB_DENSE_MAX_LAYERS], out0[SB_DENSE_MAX_LAYERS]; /* where its shard starts */
    size_t w_off[SB_DENSE_MAX_LAYERS];     /* W_l (out, in) in the flat buffers */
    size_t b_off[SB_DENSE_MAX_LAYERS];     /* b_l (out) */
    int slots, rows;                       /* activation slots of rows (max_batch) samples */
    float *act[SB_DENSE_MAX_LAYERS + 1];   /* act[l + 1] (slots, rows, out[l]) layer l's
                                            * output: ReLU, or the logits of the last */
    const float **input;                   /* (slots) the input of each slot's forward */
    int *n;                                /* (slots) its batch size, 0 before one */
    float *delta[2];                       /* (rows, widest) backward scratch */
    float *dlogits;                        /* (slots, rows, dim[n_layers]) dLoss/dlogits, when
                                            * the part holds the last layer */
    float *dz[SB_DENSE_MAX_LAYERS];        /* split backward (sb_dense_alloc_split): (slots,
                                            * rows, out[l]) dLoss/d(pre-activation of layer
                                            * l) kept by B for W; the model's last layer
                                            * keeps its dlogits instead */
    int *pending;                          /* (slots) 1 between B and W */
    size_t alloc_bytes;                    /* what sb_dense_alloc(_split) allocated */
};

/* The bytes sb_dense_alloc allocates for planned part d (sb_dense_plan),
 * max_batch samples in each of `slots` slots: each layer's output per slot,
 * dlogits per slot when the part holds the last layer, and two backward
 * scratch buffers (not per slot). The workloads' part_size formula. */
double sb_dense_activation_bytes(const struct sb_dense *d, int max_batch, int slots);

/* Plans the part [first, end) of the stack of widths d->dim[0..n_layers]
 * (set by the caller with d->n_layers) for tp rank tp_rank of tp_size:
 * each layer's split and widths as held. SB_ERR_USAGE naming `workload` for
 * a cut through a tp pair or a width narrower than tp_size. */
sb_status sb_dense_plan(struct sb_dense *d, int first, int end, int tp_rank, int tp_size,
                        const char *workload);

/* Adds the held layers to the tables as fc<l + 1> with tensors
 * fc<l + 1>.weight and .bias; layer l of the stack is layer
 * first_global + l of the whole model (its tensors 2 (first_global + l)
 * and one more, the streams of the init). Records their offsets. */
void sb_dense_layout(struct sb_dense *d, struct sb_model_table *t, int first_global);

/* Allocates the activations of `slots` slots of max_batch samples, the
 * backward scratch and (when it holds the last layer) dlogits in backend
 * memory. SB_ERR_NOMEM; sb_dense_free releases a partial one. */
sb_status sb_dense_alloc(struct sb_dense *d, const struct sb_backend_ops *be, int max_batch,
                         int slots);
void sb_dense_free(struct sb_dense *d, const struct sb_backend_ops *be);

/* Allocates, after sb_dense_alloc, the split backward's state: dz of every
 * held layer but the model's last, for every slot (adds to alloc_bytes).
 * SB_ERR_NOMEM; sb_dense_free releases it. */
sb_status sb_dense_alloc_split(struct sb_dense *d, const struct sb_backend_ops *be);

/* The bytes sb_dense_alloc_split allocates for planned part d with
 * max_batch samples in each of `slots` slots (part_size's zb-h1 term). */
double sb_dense_split_bytes(const struct sb_dense *d, int max_batch, int slots);

/* Forward of input (n, in[first]) through the held layers into slot `slot`
 * with m's parameters: act[l+1] = act[l] . W_l^T + b_l, ReLU except on the
 * logits; a row-parallel layer's product summed over the tp ranks
 * (m's tp hook) before its bias. input is kept for backward. */
void sb_dense_forward(struct sb_dense *d, const struct sb_model *m, int slot, const float *input,
                      int n);

/* The output of slot's last forward: (n, out[end - 1]). */
float *sb_dense_output(const struct sb_dense *d, int slot);

/* dLoss/dlogits of slot: (rows, dim[n_layers]) (the part holds the last
 * layer). */
float *sb_dense_dlogits(const struct sb_dense *d, int slot);

/* Backward of slot's last forward, from dLoss/d(output) dout (n, out[end -
 * 1]), through the held layers' ReLU, or from the slot's dlogits when dout
 * is NULL: writes (accumulate 0) or adds (1) each layer's weight and bias
 * gradients into m->grads (last layer first, calling ready(ctx, offset,
 * count) as each layer's are final; `ready` may be NULL). If dinput is not
 * NULL, also writes dLoss/d input (n, in[first]) there, without a ReLU (the
 * input is not this stack's); a column-parallel layer's input gradient is
 * summed over the tp ranks (m's tp hook). */
void sb_dense_backward(struct sb_dense *d, struct sb_model *m, int slot, const float *dout,
                       float *dinput, int accumulate, sb_grad_ready_fn ready, void *ctx);

/* The input half of sb_dense_backward (zb-h1's B; needs
 * sb_dense_alloc_split): the same dinput, from the same dout, with the same
 * tp all-reduces, keeping each held layer's dLoss/d(pre-activation) in
 * slot's dz for sb_dense_backward_weight; no parameter gradient. */
void sb_dense_backward_input(struct sb_dense *d, struct sb_model *m, int slot, const float *dout,
                             float *dinput);

/* The weight half (zb-h1's W) after slot's sb_dense_backward_input: each
 * held layer's weight and bias gradients from its kept dz and its input
 * activations, written (accumulate 0) or added (1) into m->grads exactly as
 * sb_dense_backward does (the same GEMM, bias sum and rounding), last layer
 * first, calling ready as each is final. */
void sb_dense_backward_weight(struct sb_dense *d, struct sb_model *m, int slot, int accumulate,
                              sb_grad_ready_fn ready, void *ctx);

#endif
