/* The model interface: what a strategy may ask of a model.
 *
 * A model keeps all parameters in one flat buffer and all gradients in
 * another of the same size. Two tables describe them: the tensor table
 * (which range is which tensor) and the layer table (which consecutive
 * tensors form a layer, in forward order, with the layer's per-sample
 * activation shapes). Strategies ask the layer table, never the tensor
 * names, what a layer is: ddp never splits a layer across buckets, zero
 * stage 3 gathers one layer at a time and a pipeline cuts between layers.
 *
 * A model may be a part of the whole (struct sb_part): a run of layers,
 * possibly only one tensor-parallel shard of them, with several activation
 * slots (micro-batches in flight). The part ops run it; the whole-model ops
 * (forward, backward, predict) are the part ops on the whole model with one
 * slot. Strategies drive models only through these ops; workloads know
 * nothing of strategies or communicators. */
#ifndef SB_WORKLOAD_H
#define SB_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/status.h"

/* How tensor parallelism splits a tensor over tp ranks (Megatron-LM,
 * Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter
 * Language Models Using Model Parallelism", section 3). */
enum sb_tp_split {
    SB_TP_REPLICATED = 0, /* every tp rank holds all of it (embeddings, LayerNorm, head, a
                           * row-parallel layer's bias) */
    SB_TP_COLUMN,         /* split by output: the rows of W (out, in) and its bias
                           * (column-parallel) */
    SB_TP_ROW,            /* split by input: the columns of W (out, in) (row-parallel; bias
                           * replicated) */
};

/* One named tensor inside the flat buffers. */
struct sb_tensor_desc {
    char name[32];   /* "fc1.weight", ... (PyTorch's state_dict names, the whole model's) */
    size_t offset;   /* in floats, from the start of the flat buffer */
    size_t count;    /* number of floats (of this part's shard) */
    enum sb_tp_split tp_split; /* how tensor parallelism splits it */
    int layer;       /* index into the model's layer table */
    size_t rows;     /* the whole tensor seen as a matrix (rows, cols) in row-major order,
                      * as it is split: a weight (out, in) has out rows, a bias, LayerNorm or
                      * embedding its count (one column); a column-parallel shard holds a
                      * block of rows, a row-parallel one a block of columns of every row.
                      * 0: not stated */
};

/* One layer: the unit zero stage 3 gathers, ddp never splits across
 * buckets, and a pipeline cuts between. */
struct sb_layer_desc {
    char name[32];               /* "fc1", "conv2", "embed", "block3", "head" */
    int first_tensor, n_tensors; /* m->tensors[first_tensor, first_tensor + n_tensors) */
    size_t offset, count;        /* params[offset, offset + count), floats: its tensors,
                                  * consecutive */
    int in_shape[3], out_shape[3]; /* per-sample activation shape in and out (unused trailing
                                    * dims 1): mlp fc1 {784,1,1} -> {256,1,1}; a ViT block
                                    * {65,64,1} -> {65,64,1}. A tp shard's as it holds them:
                                    * a column-parallel layer's output and a row-parallel
                                    * layer's input are its shard's widths. */
    size_t in_floats, out_floats;  /* per sample: products of the shapes */
    int split_units;               /* indivisible groups across its split tensors (a
                                    * transformer block's attention heads: a tp rank holds
                                    * whole heads), which tp must divide as it divides the
                                    * tensors' widths; 0: none beyond the widths */
};

/* Which part of the whole model a model holds. */
struct sb_part {
    int first_layer, n_layers; /* layers [first_layer, first_layer + n_layers) of the whole
                                * model's layer table */
    int tp_rank, tp_size;      /* this tensor-parallel shard of the SB_TP_COLUMN and
                                * SB_TP_ROW tensors (tp_size 1: whole tensors) */
    int slots;                 /* activation slots: micro-batches in flight at once (>= 1) */
    int sequence_parallel;     /* 1: a transformer's tp shard keeps its residual stream and
                                * LayerNorms sharded along the sequence between the tp regions
                                * (Korthikanti et al. 2022), through the all-gather and
                                * reduce-scatter hooks; 0: whole, through the all-reduce */
    int split_backward;        /* 1: each slot also keeps what its weight gradients need
                                * between backward_input_part and backward_weight_part
                                * (zb-h1's W-pending state: dLoss/d(pre-activation) of
                                * every held layer); 0: backward_part only */
    int accumulate;            /* 1: backward_part (or backward_weight_part) will be called with
                                * accumulate (micro-batches after the first of a step): a
                                * workload that accumulates through a gradient-sized buffer of
                                * its own (the vit: n_params floats) allocates it at create_part
                                * and counts it in activation_bytes (backward scratch); part_size
                                * counts it the same. 0: such a buffer is allocated on first use
                                * (and counted then). The mlp and cnn add in place (none). */
};

/* Called by backward each time a layer's gradients are final, last layer
 * first: grads[offset, offset + count) will not change again this step. */
typedef void (*sb_grad_ready_fn)(void *ctx, size_t offset, size_t count);

/* Called by forward (backward = 0), predict (0) and backward (1) just
 * before a layer reads its parameters params[offset, offset + count)
 * (its weight and bias, consecutive in the buffer): forward in layer
 * order, backward in reverse. A strategy that shards parameters (zero
 * stage 3) installs one to gather the layer first and to free the layers
 * that are done; errors are the callback's to keep (as with the ready
 * callback). */
typedef void (*sb_layer_fn)(void *ctx, size_t offset, size_t count, int backward);

/* Called by a tensor-parallel part (tp_size > 1) where the tp ranks must sum
 * a buffer, buf[0, count) floats in backend memory, in place, over the tp
 * group (an all-reduce): the row-parallel layer's partial output in forward
 * (before its bias), the column-parallel layer's partial input gradient in
 * backward (Megatron-LM's conjugate operators g and f). Every tp rank calls
 * it with the same count in the same order. Errors are the callback's to
 * keep (as with the ready callback). */
typedef void (*sb_tp_allreduce_fn)(void *ctx, float *buf, size_t count);

/* Called by a sequence-parallel tp part (workload.h's part.sequence_parallel)
 * over the tp group, every rank with the same count in the same order, ctx
 * the tp hook's: the all-gather writes whole[r count, (r+1) count) = rank
 * r's shard[0, count) for every tp rank r (rank order); the reduce-scatter
 * writes shard[0, count) = the sum over the ranks of their whole[r count,
 * (r+1) count), r this rank. Backend memory. Errors are the callback's. */
typedef void (*sb_tp_allgather_fn)(void *ctx, const float *shard, float *whole, size_t count);
typedef void (*sb_tp_reduce_scatter_fn)(void *ctx, const float *whole, float *shard,
                                        size_t count);

struct sb_model {
    const struct sb_workload_ops *ops;
    const struct sb_backend_ops *be;
    float *params;        /* (n_params) backend memory */
    float *grads;         /* (n_params) backend memory */
    size_t n_params;      /* of this part */
    struct sb_tensor_desc *tensors; /* layout table, in buffer order */
    int n_tensors;
    struct sb_layer_desc *layers; /* (n_layers) in buffer order, covering [0, n_params) */
    int n_layers;
    struct sb_part part;  /* what this model holds: first_layer is layers[0]'s index in the
                           * whole model's table (the whole model: {0, n_layers, 0, 1, 1}) */
    int whole_layers;     /* layers of the whole model */
    int in_dim;           /* input features per sample of the whole model (784) */
    int n_classes;        /* 10 */
    int max_batch;        /* largest n accepted by forward/predict, per slot */
    size_t activation_bytes; /* backend bytes of activations (for max_batch x slots) and
                              * backward scratch (the memory ledger) */
    size_t block_activation_bytes; /* of them, what one transformer block allocated for its
                                    * backward (0: a model without blocks) */
    sb_layer_fn layer_hook;  /* NULL, or set by a strategy (see sb_layer_fn) */
    void *layer_ctx;
    sb_tp_allreduce_fn tp_allreduce; /* set by a strategy when part.tp_size > 1 */
    sb_tp_allgather_fn tp_allgather; /* ... and these two with part.sequence_parallel */
    sb_tp_reduce_scatter_fn tp_reduce_scatter;
    void *tp_ctx;
    /* --precision bf16|fp16: 1, and the format (core/half.h's enum): the
     * layers round every GEMM output they write, forward and backward, and
     * each layer's gradients before reporting them ready (sb_model_round;
     * docs/precision.md). 0: fp32, nothing rounded. */
    int half;
    int half_fmt;
    void *impl;           /* workload-private state */
};

/* Sets m->half and m->half_fmt from cfg->precision (create calls it). */
static inline void sb_model_set_precision(struct sb_model *m, const struct sb_config *cfg)
{
    m->half = cfg->precision != SB_PRECISION_FP32;
    m->half_fmt = cfg->precision == SB_PRECISION_BF16 ? 1 : 0; /* SB_HALF_BF16 : SB_HALF_FP16 */
}

/* The backend's sgemm (backend.h) for m's layers: its gemm_half with
 * 16-bit inputs under --precision bf16|fp16 where the backend has one
 * (cuda's tensor cores), else sgemm (on the cpu the inputs are 16-bit
 * values already and the products exact). */
static inline void sb_model_gemm(const struct sb_model *m, int trans_a, int trans_b, int rows,
                                 int cols, int k, float alpha, const float *a, int lda,
                                 const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m->half && m->be->gemm_half)
        m->be->gemm_half(m->half_fmt, trans_a, trans_b, rows, cols, k, alpha, a, lda, b, ldb,
                         beta, c, ldc);
    else
        m->be->sgemm(trans_a, trans_b, rows, cols, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* fn(ctx, i) for every i in [0, n): on the backend's threads where it has
 * parallel_for (the cpu's pool: items write disjoint memory), else in order
 * on this thread. */
static inline void sb_model_parallel_for(const struct sb_model *m, int n,
                                         void (*fn)(void *ctx, int i), void *ctx)
{
    if (m->be->parallel_for)
        m->be->parallel_for(n, fn, ctx);
    else
        for (int i = 0; i < n; i++) fn(ctx, i);
}

/* Rounds buf[0..count) (backend memory) to m's 16-bit format when m->half;
 * nothing under fp32. */
static inline void sb_model_round(const struct sb_model *m, float *buf, size_t count)
{
    if (m->half && count) m->be->round_half(buf, count, m->half_fmt);
}

/* Calls m's layer hook, if any, for the layer at params[offset, offset +
 * count). */
static inline void sb_model_layer_begin(const struct sb_model *m, size_t offset, size_t count,
                                        int backward)
{
    if (m->layer_hook) m->layer_hook(m->layer_ctx, offset, count, backward);
}

/* Calls m's tensor-parallel all-reduce for buf[0, count), if the model is a
 * tp shard (tp_size > 1); nothing otherwise. */
static inline void sb_model_tp_allreduce(const struct sb_model *m, float *buf, size_t count)
{
    if (m->part.tp_size > 1 && m->tp_allreduce) m->tp_allreduce(m->tp_ctx, buf, count);
}

/* The sequence-parallel collectives through m's hooks (see
 * sb_tp_allgather_fn); nothing where the model has none. */
static inline void sb_model_tp_allgather(const struct sb_model *m, const float *shard,
                                         float *whole, size_t count)
{
    if (m->tp_allgather) m->tp_allgather(m->tp_ctx, shard, whole, count);
}
static inline void sb_model_tp_reduce_scatter(const struct sb_model *m, const float *whole,
                                              float *shard, size_t count)
{
    if (m->tp_reduce_scatter) m->tp_reduce_scatter(m->tp_ctx, whole, shard, count);
}

/* What a workload's model will hold, computed from the configuration before
 * anything is allocated (src/harness/mem_estimate.h adds the strategy's
 * share and checks it against the memory available). */
/* One layer of a whole model as a layout sees it (the report's
 * model.layers, the layout model's input: strategies/shared/layout_model.h). */
struct sb_layer_summary {
    char name[32];
    double params;        /* floats of the layer */
    double split_params;  /* of which tensor parallelism splits (column-/row-parallel) */
    double in_floats, out_floats; /* activation floats per sample in and out */
    int tp_column;        /* tp all-reduces of its input gradient in backward (Megatron-LM's
                           * f, one per column-parallel group: a layer holding only column-
                           * parallel tensors 1, a layer holding pairs (a transformer block)
                           * as many as its row-parallel tensors), each of in_floats */
    int tp_row;           /* tp all-reduces of its output in forward (Megatron-LM's g, one
                           * per row-parallel tensor), each of out_floats */
    int split_width;      /* the width tp must divide: the gcd of its column-parallel
                           * tensors' sizes (a bias: its out width) and its split_units
                           * (attention heads), else in_shape[0] of a row-parallel layer;
                           * 0: nothing split */
    double flops;         /* forward multiply-adds x 2 per sample, estimated as
                           * 2 x params x the output's positions: out_shape[1] x
                           * out_shape[2] (1 for a dense layer {out,1,1}, H x W for a
                           * convolution {C,H,W}), out_shape[0] for a sequence
                           * {tokens,width,1}; the layout model uses shares of it */
};

struct sb_model_size {
    double n_params;          /* parameters (a double: 65536 x 65536 overflows no int) */
    double activation_bytes;  /* activations and their gradients for max_batch samples */
    double block_activation_bytes; /* of them, what one transformer block keeps for
                                    * backward (0: a model without blocks) */
};

struct sb_workload_ops {
    const char *name;
    /* Sizes of the whole model of `cfg` for batches of max_batch samples
     * and one slot, as create would allocate them. */
    struct sb_model_size (*size)(const struct sb_config *cfg, int max_batch);
    /* Optional (NULL: not stated): the sizes of the part `part` of that
     * model as create_part allocates it, from the closed-form formulas
     * (parameters of the shard, activation bytes, a block's; fp32). Pure. */
    struct sb_model_size (*part_size)(const struct sb_config *cfg, int max_batch,
                                      const struct sb_part *part);
    /* Builds a model for `cfg` on backend `be` for batches of at most
     * max_batch samples and initialises its parameters from cfg->seed with
     * PyTorch's default (Kaiming-uniform, a = sqrt(5): weights and biases
     * ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))). Every process and replica gets
     * the same initial parameters. SB_ERR_USAGE for a bad architecture
     * flag, SB_ERR_NOMEM. */
    sb_status (*create)(const struct sb_config *cfg,
                        const struct sb_backend_ops *be, int max_batch,
                        struct sb_model **out);
    /* Builds the part `part` of the model create builds (NULL: the whole
     * model with one slot, as create): its buffers hold only the part's
     * parameters, its tables describe the part (offsets in its buffers,
     * tensor names the whole model's), and its parameters equal the whole
     * model's values of those tensors (of a tp shard: the shard of them).
     * Activations for max_batch samples in each of part->slots slots.
     * SB_ERR_USAGE for a part outside the model, a tp split the workload
     * cannot make (the message says which), the errors of create. NULL in a
     * workload that builds whole models only. */
    sb_status (*create_part)(const struct sb_config *cfg, const struct sb_backend_ops *be,
                             int max_batch, const struct sb_part *part, struct sb_model **out);
    /* Forward pass of x (n, in_dim) with labels y (n), both backend memory,
     * n <= max_batch. Adds the sum over the n samples of the cross-entropy
     * loss to *loss_sum, one double in BACKEND memory (host memory on cpu;
     * on a GPU the sum stays on the device, so forward never waits), and
     * keeps dLoss/dlogits scaled by grad_scale for backward (grad_scale =
     * 1/global_batch makes the gradient the mean over the global batch). */
    sb_status (*forward)(struct sb_model *m, const float *x, const uint8_t *y,
                         int n, float grad_scale, double *loss_sum);
    /* Backward pass of the last forward: overwrites grads, calling
     * ready(ctx, offset, count) as each layer's gradients become final
     * (last layer first). `ready` may be NULL. */
    sb_status (*backward)(struct sb_model *m, sb_grad_ready_fn ready,
                          void *ctx);
    /* Counts correct arg-max predictions for x (n, in_dim), labels y (n). */
    sb_status (*predict)(struct sb_model *m, const float *x, const uint8_t *y,
                         int n, long *correct);
    /* Forward of the part's layers into activation slot `slot` (0 <=
     * slot < part.slots) for n <= max_batch samples. `in`, backend memory:
     * the images (n, in_dim) on the first part, else the previous part's
     * output activations (n, layers[0].in_floats); it is read again by
     * backward_part of this slot, so it must stay unchanged until then. On
     * the part holding the last layer, y (n) are the labels and the loss is
     * added to *loss_sum as forward does (grad_scale as there); elsewhere
     * y, grad_scale and loss_sum are unused (may be NULL). SB_ERR_INTERNAL
     * for a slot or n out of range. */
    sb_status (*forward_part)(struct sb_model *m, int slot, const float *in, const uint8_t *y,
                              int n, float grad_scale, double *loss_sum);
    /* The output activations of slot's last forward_part, (n,
     * layers[n_layers - 1].out_floats) backend memory (the logits on the
     * last part), valid until that slot's next forward_part. */
    const float *(*part_output)(const struct sb_model *m, int slot);
    /* Backward of slot's last forward_part. dout (n, layers[n_layers -
     * 1].out_floats): dLoss/d(the part's output), or NULL on the last part
     * (from the loss kept by forward_part). din (n, layers[0].in_floats):
     * receives dLoss/d(the part's input), or NULL for none (the first
     * part). accumulate 0 overwrites grads, 1 adds this slot's gradients
     * to them (M micro-batches with grad_scale = 1/global_batch sum to the
     * mean). Calls ready as backward does, and the layer and tp hooks.
     * SB_ERR_INTERNAL for a slot without a forward, or dout NULL on a part
     * that is not the last. */
    sb_status (*backward_part)(struct sb_model *m, int slot, const float *dout, float *din,
                               int accumulate, sb_grad_ready_fn ready, void *ctx);
    /* backward_part in two halves (zb-h1's B and W: Qi et al., "Zero
     * Bubble Pipeline Parallelism", ICLR 2024), on a part created with
     * part.split_backward. The input half (B): from dout (as backward_part)
     * writes din (as backward_part), running the tp all-reduces of input
     * gradients and the layer hooks, and keeps each held layer's
     * dLoss/d(pre-activation) in the slot; no gradient of a parameter. The
     * weight half (W), later, before the slot's next forward_part: from what
     * B kept and the slot's activations, writes (accumulate 0) or adds (1)
     * the slot's parameter gradients, calling ready as backward does; no tp
     * collective. B then W leaves grads and din byte-identical to
     * backward_part (the same operations in the same order per tensor), so
     * W's of slots in micro-batch order accumulate as backward_part's do.
     * SB_ERR_INTERNAL for a part without split_backward, a slot without a
     * forward (B) or without a B (W), dout as backward_part. NULL (both) in
     * a workload that cannot split its backward: zb-h1 refuses it. */
    sb_status (*backward_input_part)(struct sb_model *m, int slot, const float *dout,
                                     float *din);
    sb_status (*backward_weight_part)(struct sb_model *m, int slot, int accumulate,
                                      sb_grad_ready_fn ready, void *ctx);
    void (*destroy)(struct sb_model *m);
};

/* The workload registered under `name`, or NULL. */
const struct sb_workload_ops *sb_workload_find(const char *name);

/* Comma-separated names of all workloads, for usage texts ("mlp, cnn"),
 * made from the registry's table. */
const char *sb_workload_names(void);

#endif
