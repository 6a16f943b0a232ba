/* The model interface: what a strategy may ask of a model.
 *
 * A model keeps all parameters in one flat buffer and all gradients in
 * another of the same size (a layout table says which range is which
 * tensor), so synchronisation is one range or a few buckets. Strategies
 * drive models only through these ops; workloads know nothing of
 * strategies. */
#ifndef SB_WORKLOAD_H
#define SB_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/status.h"

/* How tensor parallelism splits a tensor over tp ranks (Megatron-LM,
 * Shoeybi et al. 2019). */
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
    char name[32];   /* "fc1.weight", ... (PyTorch's state_dict names) */
    size_t offset;   /* in floats, from the start of the flat buffer */
    size_t count;    /* number of floats */
    enum sb_tp_split tp_split; /* how tensor parallelism splits it */
    int layer;       /* index into the model's layer table */
};

/* One layer: the unit zero stage 3 gathers, ddp never splits across
 * buckets, and a pipeline cuts between. */
struct sb_layer_desc {
    char name[32];              /* "fc1", "conv2", "embed", "block3", "head" */
    int first_tensor, n_tensors;/* m->tensors[first_tensor, first_tensor + n_tensors) */
    size_t offset, count;       /* params[offset, offset + count), floats: its tensors,
                                 * consecutive */
    int in_shape[3], out_shape[3]; /* per-sample activation shape in and out (unused trailing
                                    * dims 1): mlp fc1 {784,1,1} -> {256,1,1}; a ViT block
                                    * {65,64,1} -> {65,64,1} */
    size_t in_floats, out_floats;  /* per sample: products of the shapes */
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

struct sb_model {
    const struct sb_workload_ops *ops;
    const struct sb_backend_ops *be;
    float *params;        /* (n_params) backend memory */
    float *grads;         /* (n_params) backend memory */
    size_t n_params;
    struct sb_tensor_desc *tensors; /* layout table, in buffer order */
    int n_tensors;
    struct sb_layer_desc *layers; /* (n_layers) in buffer order, covering [0, n_params) */
    int n_layers;
    int in_dim;           /* input features per sample (784) */
    int n_classes;        /* 10 */
    int max_batch;        /* largest n accepted by forward/predict */
    size_t activation_bytes; /* backend bytes of activations and backward
                              * scratch for max_batch (the memory ledger) */
    sb_layer_fn layer_hook;  /* NULL, or set by a strategy (see sb_layer_fn) */
    void *layer_ctx;
    void *impl;           /* workload-private state */
};

/* Calls m's layer hook, if any, for the layer at params[offset, offset +
 * count). */
static inline void sb_model_layer_begin(const struct sb_model *m, size_t offset, size_t count,
                                        int backward)
{
    if (m->layer_hook) m->layer_hook(m->layer_ctx, offset, count, backward);
}

struct sb_workload_ops {
    const char *name;
    /* Builds a model for `cfg` on backend `be` for batches of at most
     * max_batch samples and initialises its parameters from cfg->seed with
     * PyTorch's default (Kaiming-uniform, a = sqrt(5): weights and biases
     * ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))). Every process and replica gets
     * the same initial parameters. SB_ERR_USAGE for a bad architecture
     * flag, SB_ERR_NOMEM. */
    sb_status (*create)(const struct sb_config *cfg,
                        const struct sb_backend_ops *be, int max_batch,
                        struct sb_model **out);
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
    void (*destroy)(struct sb_model *m);
};

/* The workload registered under `name`, or NULL. */
const struct sb_workload_ops *sb_workload_find(const char *name);

/* Comma-separated names of all workloads, for usage texts. */
const char *sb_workload_names(void);

#endif
