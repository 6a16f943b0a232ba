/* Workload "cnn": LeNet-5 for MNIST (LeCun et al. 1998, in the modern form
 * with ReLU and max-pooling that PyTorch's tutorials use).
 *
 *   x (n, 1, 28, 28)
 *   conv1 6@5x5 valid -> (n, 6, 24, 24), ReLU, max-pool 2 -> (n, 6, 12, 12)
 *   conv2 16@5x5      -> (n, 16, 8, 8),  ReLU, max-pool 2 -> (n, 16, 4, 4)
 *   flatten (c, h, w order, as torch.flatten) -> (n, 256)
 *   fc1 256->120, ReLU, fc2 120->84, ReLU, fc3 84->10, softmax cross-entropy
 *
 * 44,426 parameters in one flat buffer, in layer order with PyTorch's
 * state_dict names and layouts: conv1.weight (6, 1, 5, 5), conv1.bias (6),
 * conv2.weight (16, 6, 5, 5), conv2.bias (16), fc1.weight (120, 256), ...
 * Five layers in the table: conv1 (its convolution, ReLU and pooling),
 * conv2, fc1, fc2, fc3. A part holds a run of them; tensor parallelism
 * splits only the dense stack (fc1 column-, fc2 row-parallel, fc3
 * replicated: dense.h), the convolutions are replicated. The convolution
 * blocks are workloads/conv.h. */
#include <stdlib.h>

#include "data/mnist.h"
#include "workloads/conv.h"
#include "workloads/dense.h"
#include "workloads/model_table.h"
#include "workloads/workload.h"

#define CNN "cnn"
#define CNN_SIDE SB_MNIST_SIDE /* MNIST image side in pixels */
#define CNN_CONVS 2
#define CNN_DENSE 3
#define CNN_LAYERS (CNN_CONVS + CNN_DENSE)

extern const struct sb_workload_ops sb_workload_cnn;

struct cnn {
    struct sb_conv conv[CNN_CONVS];
    struct sb_conv_scratch scratch; /* shared by the held convolutions */
    struct sb_dense dense;          /* fc1..fc3: 256, 120, 84, 10 */
    int conv_end;                   /* the part holds convolutions [first, conv_end) */
    int *n;                         /* (slots) batch of each slot's forward, 0 before one */
    int *pending;                   /* (slots) split backward: 1 between B and W */
};

static void cnn_destroy(struct sb_model *m)
{
    if (!m) return;
    const struct sb_backend_ops *be = m->be;
    struct cnn *p = m->impl;
    if (p) {
        for (int l = 0; l < CNN_CONVS; l++) sb_conv_free(&p->conv[l], be);
        sb_conv_scratch_free(&p->scratch, be);
        sb_dense_free(&p->dense, be);
        free(p->n);
        free(p->pending);
        free(p);
    }
    be->free(m->params);
    be->free(m->grads);
    free(m->tensors);
    free(m->layers);
    free(m);
}

/* Shapes of every layer, which of them the part holds, and the tables of
 * those (conv1, conv2, fc1..fc3 in buffer = layer order). Errors: those of
 * sb_dense_plan. */
static sb_status cnn_layout(struct sb_model *m, struct sb_model_table *t)
{
    struct cnn *p = m->impl;
    static const int channels[CNN_CONVS + 1] = {1, 6, 16};
    int first = m->part.first_layer, end = first + m->part.n_layers, side = CNN_SIDE;
    p->conv_end = end < CNN_CONVS ? end : CNN_CONVS;
    for (int l = 0; l < CNN_CONVS; l++) {
        sb_conv_shape(&p->conv[l], channels[l], side, channels[l + 1]);
        side = p->conv[l].oh / 2;
        p->conv[l].held = l >= first && l < p->conv_end;
    }
    struct sb_dense *d = &p->dense;
    d->n_layers = CNN_DENSE;
    d->dim[0] = channels[CNN_CONVS] * side * side; /* 16 * 4 * 4 = 256 */
    d->dim[1] = 120;
    d->dim[2] = 84;
    d->dim[3] = m->n_classes;
    int dense_first = first > CNN_CONVS ? first - CNN_CONVS : 0;
    int dense_end = end > CNN_CONVS ? end - CNN_CONVS : 0;
    if (dense_end > dense_first)
        SB_TRY(sb_dense_plan(d, dense_first, dense_end, m->part.tp_rank, m->part.tp_size, CNN));
    for (int l = 0; l < CNN_CONVS; l++)
        if (p->conv[l].held) sb_conv_layout(&p->conv[l], t, l);
    if (dense_end > dense_first) sb_dense_layout(d, t, CNN_CONVS);
    sb_model_table_end(t);
    return SB_OK;
}

/* Parameters, gradients and the held layers' activations (slots slots of
 * max_batch) and scratch; sets m->activation_bytes. Errors: SB_ERR_NOMEM
 * (what was allocated stays for cnn_destroy). */
static sb_status cnn_alloc_buffers(struct sb_model *m, int max_batch)
{
    const struct sb_backend_ops *be = m->be;
    struct cnn *p = m->impl;
    int slots = m->part.slots;
    size_t bytes = 0;
    p->n = calloc((size_t)slots, sizeof *p->n);
    if (!p->n) return sb_error(SB_ERR_NOMEM, CNN ": out of memory");
    SB_TRY(be->alloc((void **)&m->params, m->n_params * sizeof(float)));
    SB_TRY(be->alloc((void **)&m->grads, m->n_params * sizeof(float)));
    for (int l = 0; l < CNN_CONVS; l++)
        if (p->conv[l].held) SB_TRY(sb_conv_alloc(&p->conv[l], be, max_batch, slots, &bytes));
    SB_TRY(sb_conv_scratch_alloc(&p->scratch, p->conv, CNN_CONVS, be, max_batch, &bytes));
    if (p->dense.end > p->dense.first)
        SB_TRY(sb_dense_alloc(&p->dense, be, max_batch, slots));
    if (m->part.split_backward) {
        p->pending = calloc((size_t)slots, sizeof *p->pending);
        if (!p->pending) return sb_error(SB_ERR_NOMEM, CNN ": out of memory");
        for (int l = 0; l < CNN_CONVS; l++)
            if (p->conv[l].held) SB_TRY(sb_conv_alloc_split(&p->conv[l], be, slots, &bytes));
        if (p->dense.end > p->dense.first) SB_TRY(sb_dense_alloc_split(&p->dense, be));
    }
    m->activation_bytes = bytes + p->dense.alloc_bytes;
    return SB_OK;
}

/* Whether the part holds any of the dense layers. */
static int has_dense(const struct cnn *p) { return p->dense.end > p->dense.first; }

/* The part's sizes as cnn_create_part allocates them (fp32), from its
 * layout (cnn_layout on tables that are freed again) and the counts the
 * allocations use (sb_conv_activation_bytes, sb_conv_scratch_bytes,
 * sb_dense_activation_bytes, and the split backward's for zb-h1); zeros
 * for a part outside the model. The whole model: part NULL. */
static struct sb_model_size cnn_part_size(const struct sb_config *cfg, int max_batch,
                                          const struct sb_part *part)
{
    (void)cfg;
    struct sb_model_size z = {0};
    struct sb_model m = {0};
    struct cnn p = {0};
    struct sb_model_table t = {0};
    m.impl = &p;
    m.n_classes = SB_MNIST_CLASSES;
    m.whole_layers = CNN_LAYERS;
    int rows = max_batch > 0 ? max_batch : 1;
    if (sb_part_check(part, CNN_LAYERS, CNN, &m.part) == SB_OK &&
        sb_model_table_begin(&t, &m, m.part.n_layers, 2 * m.part.n_layers) == SB_OK &&
        cnn_layout(&m, &t) == SB_OK) {
        int slots = m.part.slots;
        z.n_params = (double)m.n_params;
        for (int l = 0; l < CNN_CONVS; l++)
            if (p.conv[l].held)
                z.activation_bytes += sb_conv_activation_bytes(&p.conv[l], rows, slots) +
                                      (m.part.split_backward
                                           ? sb_conv_split_bytes(&p.conv[l], rows, slots) : 0);
        z.activation_bytes += sb_conv_scratch_bytes(p.conv, CNN_CONVS, rows);
        if (has_dense(&p))
            z.activation_bytes += sb_dense_activation_bytes(&p.dense, rows, slots) +
                                  (m.part.split_backward
                                       ? sb_dense_split_bytes(&p.dense, rows, slots) : 0);
    }
    sb_model_table_free(&t);
    free(m.layers);
    free(m.tensors);
    return z;
}

static struct sb_model_size cnn_size(const struct sb_config *cfg, int max_batch)
{
    return cnn_part_size(cfg, max_batch, NULL);
}

static sb_status cnn_create_part(const struct sb_config *cfg, const struct sb_backend_ops *be,
                                 int max_batch, const struct sb_part *part,
                                 struct sb_model **out)
{
    *out = NULL;
    if (!be->im2col || !be->col2im || !be->transpose_batched || !be->maxpool2_forward ||
        !be->maxpool2_backward)
        return sb_error(SB_ERR_USAGE, "--workload " CNN ": backend '%s' lacks the convolution ops",
                        be->name);
    struct sb_model *m = calloc(1, sizeof *m);
    struct cnn *p = calloc(1, sizeof *p);
    if (!m || !p) {
        free(m);
        free(p);
        return sb_error(SB_ERR_NOMEM, CNN ": out of memory");
    }
    m->impl = p;
    m->be = be;
    sb_model_set_precision(m, cfg);
    m->in_dim = CNN_SIDE * CNN_SIDE;
    m->n_classes = SB_MNIST_CLASSES;
    m->max_batch = max_batch;
    m->whole_layers = CNN_LAYERS;
    struct sb_model_table t = {0};
    sb_status st;
    if ((st = sb_part_check(part, CNN_LAYERS, CNN, &m->part)) ||
        (st = sb_model_table_begin(&t, m, m->part.n_layers, 2 * m->part.n_layers)) ||
        (st = cnn_layout(m, &t)) || (st = cnn_alloc_buffers(m, max_batch)) ||
        (st = sb_model_table_init(&t, cfg->seed, CNN))) {
        sb_model_table_free(&t);
        cnn_destroy(m);
        return st;
    }
    sb_model_table_free(&t);
    sb_model_round(m, m->params, m->n_params); /* 16-bit parameters from the start */
    m->ops = &sb_workload_cnn;
    *out = m;
    return SB_OK;
}

static sb_status cnn_create(const struct sb_config *cfg, const struct sb_backend_ops *be,
                            int max_batch, struct sb_model **out)
{
    return cnn_create_part(cfg, be, max_batch, NULL, out);
}

static sb_status cnn_forward_part(struct sb_model *m, int slot, const float *x,
                                  const uint8_t *y, int n, float grad_scale, double *loss_sum)
{
    struct cnn *p = m->impl;
    SB_TRY(sb_part_check_forward(m, slot, n, CNN));
    const float *in = x;
    for (int l = m->part.first_layer; l < p->conv_end; l++) {
        sb_conv_forward(&p->conv[l], &p->scratch, m, slot, in, n);
        in = sb_conv_output(&p->conv[l], slot);
    }
    /* The pooled features (n, 16, 4, 4) are the flattened (n, 256) input. */
    if (has_dense(p)) sb_dense_forward(&p->dense, m, slot, in, n);
    p->n[slot] = n;
    if (sb_part_is_last(m))
        m->be->softmax_xent(sb_dense_output(&p->dense, slot), y, n, m->n_classes, grad_scale,
                            sb_dense_dlogits(&p->dense, slot), loss_sum);
    return SB_OK;
}

static const float *cnn_part_output(const struct sb_model *m, int slot)
{
    const struct cnn *p = m->impl;
    return has_dense(p) ? sb_dense_output(&p->dense, slot)
                        : sb_conv_output(&p->conv[p->conv_end - 1], slot);
}

static sb_status cnn_backward_part(struct sb_model *m, int slot, const float *dout, float *din,
                                   int accumulate, sb_grad_ready_fn ready, void *ctx)
{
    struct cnn *p = m->impl;
    SB_TRY(sb_part_check_backward(m, slot, dout, din, CNN));
    if (p->n[slot] == 0) return sb_error(SB_ERR_INTERNAL, CNN ": backward before forward");
    int first = m->part.first_layer;
    const float *dy = dout; /* dLoss/d(the output of the layer next in backward) */
    if (has_dense(p)) {
        /* fc3..fc1, then the gradient of the flattened features into
         * conv2's pooled-gradient buffer (or din). Those features are
         * max-pooled ReLU outputs: their ReLU is undone below, on the
         * un-pooled activations. */
        float *dfeatures = p->conv_end > first ? p->conv[CNN_CONVS - 1].dpooled : din;
        sb_dense_backward(&p->dense, m, slot, dout, dfeatures, accumulate, ready, ctx);
        dy = dfeatures;
    }
    for (int l = p->conv_end - 1; l >= first; l--) {
        /* The input gradient: into the previous convolution's
         * pooled-gradient buffer, din for the part's first, none for the
         * images. */
        float *dx = l > first ? p->conv[l - 1].dpooled : din;
        sb_conv_backward(&p->conv[l], &p->scratch, m, slot, p->n[slot], dy, dx, accumulate, ready,
                         ctx);
        dy = dx;
    }
    return SB_OK;
}

/* zb-h1's B (workload.h): cnn_backward_part's input gradients, through
 * the dense stack's and each convolution's input half. */
static sb_status cnn_backward_input_part(struct sb_model *m, int slot, const float *dout,
                                         float *din)
{
    struct cnn *p = m->impl;
    SB_TRY(sb_part_check_backward(m, slot, dout, din, CNN));
    if (!m->part.split_backward || p->n[slot] == 0)
        return sb_error(SB_ERR_INTERNAL, CNN ": input half of slot %d without a split part or "
                        "a forward", slot);
    int first = m->part.first_layer;
    const float *dy = dout;
    if (has_dense(p)) {
        float *dfeatures = p->conv_end > first ? p->conv[CNN_CONVS - 1].dpooled : din;
        sb_dense_backward_input(&p->dense, m, slot, dout, dfeatures);
        dy = dfeatures;
    }
    for (int l = p->conv_end - 1; l >= first; l--) {
        float *dx = l > first ? p->conv[l - 1].dpooled : din;
        sb_conv_backward_input(&p->conv[l], &p->scratch, m, slot, p->n[slot], dy, dx);
        dy = dx;
    }
    p->pending[slot] = 1;
    return SB_OK;
}

/* zb-h1's W: the weight gradients of the slot, last layer first, as
 * cnn_backward_part writes them. */
static sb_status cnn_backward_weight_part(struct sb_model *m, int slot, int accumulate,
                                          sb_grad_ready_fn ready, void *ctx)
{
    struct cnn *p = m->impl;
    if (slot < 0 || slot >= m->part.slots || !m->part.split_backward || !p->pending[slot])
        return sb_error(SB_ERR_INTERNAL, CNN ": weight half of slot %d before its input half",
                        slot);
    if (has_dense(p)) sb_dense_backward_weight(&p->dense, m, slot, accumulate, ready, ctx);
    for (int l = p->conv_end - 1; l >= m->part.first_layer; l--)
        sb_conv_backward_weight(&p->conv[l], &p->scratch, m, slot, p->n[slot], accumulate, ready,
                                ctx);
    p->pending[slot] = 0;
    return SB_OK;
}

static sb_status cnn_forward(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             float grad_scale, double *loss_sum)
{
    SB_TRY(sb_part_check_whole(m, CNN));
    return cnn_forward_part(m, 0, x, y, n, grad_scale, loss_sum);
}

static sb_status cnn_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    SB_TRY(sb_part_check_whole(m, CNN));
    return cnn_backward_part(m, 0, NULL, NULL, 0, ready, ctx); /* no gradient for the images */
}

static sb_status cnn_predict(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             long *correct)
{
    struct cnn *p = m->impl;
    SB_TRY(sb_part_check_whole(m, CNN));
    SB_TRY(sb_part_check_forward(m, 0, n, CNN));
    const float *in = x;
    for (int l = 0; l < CNN_CONVS; l++) {
        sb_conv_forward(&p->conv[l], &p->scratch, m, 0, in, n);
        in = sb_conv_output(&p->conv[l], 0);
    }
    sb_dense_forward(&p->dense, m, 0, in, n);
    p->n[0] = n;
    m->be->count_correct(sb_dense_output(&p->dense, 0), y, n, m->n_classes, correct);
    return SB_OK;
}

const struct sb_workload_ops sb_workload_cnn = {
    .name = CNN,
    .size = cnn_size,
    .part_size = cnn_part_size,
    .create = cnn_create,
    .create_part = cnn_create_part,
    .forward = cnn_forward,
    .backward = cnn_backward,
    .predict = cnn_predict,
    .forward_part = cnn_forward_part,
    .part_output = cnn_part_output,
    .backward_part = cnn_backward_part,
    .backward_input_part = cnn_backward_input_part,
    .backward_weight_part = cnn_backward_weight_part,
    .destroy = cnn_destroy,
};
