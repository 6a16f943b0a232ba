/* Workload "mlp": a multi-layer perceptron for MNIST.
 *
 * 784 -> hidden... -> 10 (default one hidden layer of 256), ReLU between
 * layers, softmax cross-entropy on the logits. Layer l holds W_l (out, in)
 * and b_l (out) in PyTorch's nn.Linear layout, stored as consecutive ranges
 * fc<l>.weight, fc<l>.bias of the flat parameter buffer, so the gradients of
 * the last layer are the last range and become ready first in backward.
 * The layers are one dense stack (workloads/dense.h): batched GEMMs and
 * elementwise ops through the backend. Every linear layer is a layer of the
 * table; tensor parallelism pairs them (fc1 column-, fc2 row-parallel, ...;
 * an odd last layer replicated), as dense.h says. */
#include <stdlib.h>

#include "data/mnist.h"
#include "workloads/dense.h"
#include "workloads/model_table.h"
#include "workloads/workload.h"

#define MLP "mlp"

extern const struct sb_workload_ops sb_workload_mlp;

static struct sb_model_size mlp_size(const struct sb_config *cfg, int max_batch)
{
    /* 784 -> hidden... -> 10: weights and biases; per sample, each layer's
     * output, two delta buffers of the widest hidden layer and dlogits, as
     * workloads/dense.c allocates them. */
    struct sb_model_size s = {0};
    double rows = max_batch > 0 ? max_batch : 1;
    double in = SB_MNIST_SIDE * SB_MNIST_SIDE, widest = 1, act = 0;
    for (int l = 0; l <= cfg->n_hidden; l++) {
        double out = l < cfg->n_hidden ? cfg->hidden[l] : SB_MNIST_CLASSES;
        s.n_params += in * out + out;
        act += out; /* act[l+1] */
        if (l < cfg->n_hidden && out > widest) widest = out;
        in = out;
    }
    s.activation_bytes = rows * (act + 2 * widest + SB_MNIST_CLASSES) * sizeof(float);
    return s;
}

static void mlp_destroy(struct sb_model *m)
{
    if (!m) return;
    struct sb_dense *d = m->impl;
    if (d) {
        sb_dense_free(d, m->be);
        free(d);
    }
    m->be->free(m->params);
    m->be->free(m->grads);
    free(m->tensors);
    free(m->layers);
    free(m);
}

static sb_status mlp_create_part(const struct sb_config *cfg, const struct sb_backend_ops *be,
                                 int max_batch, const struct sb_part *part,
                                 struct sb_model **out)
{
    *out = NULL;
    struct sb_model *m = calloc(1, sizeof *m);
    struct sb_dense *d = calloc(1, sizeof *d);
    if (!m || !d) {
        free(m);
        free(d);
        return sb_error(SB_ERR_NOMEM, MLP ": out of memory");
    }
    struct sb_model_table t = {0};
    m->impl = d;
    m->be = be;
    sb_model_set_precision(m, cfg);
    m->in_dim = SB_MNIST_PIXELS;
    m->n_classes = SB_MNIST_CLASSES;
    m->max_batch = max_batch;

    d->n_layers = cfg->n_hidden + 1;
    d->dim[0] = m->in_dim;
    for (int i = 0; i < cfg->n_hidden; i++) d->dim[i + 1] = cfg->hidden[i];
    d->dim[d->n_layers] = m->n_classes;
    m->whole_layers = d->n_layers;

    sb_status st;
    if ((st = sb_part_check(part, d->n_layers, MLP, &m->part)) ||
        (st = sb_dense_plan(d, m->part.first_layer, m->part.first_layer + m->part.n_layers,
                            m->part.tp_rank, m->part.tp_size, MLP)) ||
        (st = sb_model_table_begin(&t, m, m->part.n_layers, 2 * m->part.n_layers)))
        goto fail;
    sb_dense_layout(d, &t, 0);
    sb_model_table_end(&t);

    if ((st = be->alloc((void **)&m->params, m->n_params * sizeof(float))) ||
        (st = be->alloc((void **)&m->grads, m->n_params * sizeof(float))) ||
        (st = sb_dense_alloc(d, be, max_batch, m->part.slots)) ||
        (m->part.split_backward && (st = sb_dense_alloc_split(d, be))) ||
        (st = sb_model_table_init(&t, cfg->seed, MLP)))
        goto fail;
    m->activation_bytes = d->alloc_bytes;
    sb_model_round(m, m->params, m->n_params); /* 16-bit parameters from the start */
    sb_model_table_free(&t);
    m->ops = &sb_workload_mlp;
    *out = m;
    return SB_OK;
fail:
    sb_model_table_free(&t);
    mlp_destroy(m);
    return st;
}

static sb_status mlp_create(const struct sb_config *cfg, const struct sb_backend_ops *be,
                            int max_batch, struct sb_model **out)
{
    return mlp_create_part(cfg, be, max_batch, NULL, out);
}

/* The part's sizes as mlp_create_part allocates them (fp32): the shard's
 * parameters from its plan, the activation bytes by sb_dense_activation_bytes
 * (and zb-h1's kept gradients when part->split_backward); zeros for a part
 * the plan refuses. */
static struct sb_model_size mlp_part_size(const struct sb_config *cfg, int max_batch,
                                          const struct sb_part *part)
{
    struct sb_model_size s = {0};
    struct sb_dense d = {0};
    d.n_layers = cfg->n_hidden + 1;
    d.dim[0] = SB_MNIST_PIXELS;
    for (int i = 0; i < cfg->n_hidden; i++) d.dim[i + 1] = cfg->hidden[i];
    d.dim[d.n_layers] = SB_MNIST_CLASSES;
    struct sb_part p = part ? *part : (struct sb_part){0, d.n_layers, 0, 1, 1, 0, 0, 0};
    if (p.first_layer < 0 || p.n_layers < 1 || p.first_layer + p.n_layers > d.n_layers ||
        sb_dense_plan(&d, p.first_layer, p.first_layer + p.n_layers, p.tp_rank, p.tp_size,
                      MLP) != SB_OK)
        return s;
    for (int l = d.first; l < d.end; l++)
        s.n_params += (double)d.in[l] * d.out[l] +
                      (d.split[l] == SB_TP_ROW ? d.dim[l + 1] : d.out[l]);
    int rows = max_batch > 0 ? max_batch : 1, slots = p.slots > 0 ? p.slots : 1;
    s.activation_bytes = sb_dense_activation_bytes(&d, rows, slots);
    /* zb-h1's kept dLoss/d(pre-activation), as sb_dense_alloc_split allocates them. */
    if (p.split_backward) s.activation_bytes += sb_dense_split_bytes(&d, rows, slots);
    return s;
}

static sb_status mlp_forward_part(struct sb_model *m, int slot, const float *in,
                                  const uint8_t *y, int n, float grad_scale, double *loss_sum)
{
    struct sb_dense *d = m->impl;
    SB_TRY(sb_part_check_forward(m, slot, n, MLP));
    sb_dense_forward(d, m, slot, in, n);
    if (sb_part_is_last(m))
        m->be->softmax_xent(sb_dense_output(d, slot), y, n, m->n_classes, grad_scale,
                            sb_dense_dlogits(d, slot), loss_sum);
    return SB_OK;
}

static const float *mlp_part_output(const struct sb_model *m, int slot)
{
    return sb_dense_output(m->impl, slot);
}

static sb_status mlp_backward_part(struct sb_model *m, int slot, const float *dout, float *din,
                                   int accumulate, sb_grad_ready_fn ready, void *ctx)
{
    struct sb_dense *d = m->impl;
    SB_TRY(sb_part_check_backward(m, slot, dout, din, MLP));
    if (d->n[slot] == 0) return sb_error(SB_ERR_INTERNAL, MLP ": backward before forward");
    sb_dense_backward(d, m, slot, dout, din, accumulate, ready, ctx);
    return SB_OK;
}

/* zb-h1's B and W (workload.h): the dense stack's halves. */
static sb_status mlp_backward_input_part(struct sb_model *m, int slot, const float *dout,
                                         float *din)
{
    struct sb_dense *d = m->impl;
    SB_TRY(sb_part_check_backward(m, slot, dout, din, MLP));
    if (!m->part.split_backward || d->n[slot] == 0)
        return sb_error(SB_ERR_INTERNAL, MLP ": input half of slot %d without a split part or "
                        "a forward", slot);
    sb_dense_backward_input(d, m, slot, dout, din);
    return SB_OK;
}

static sb_status mlp_backward_weight_part(struct sb_model *m, int slot, int accumulate,
                                          sb_grad_ready_fn ready, void *ctx)
{
    struct sb_dense *d = m->impl;
    if (slot < 0 || slot >= m->part.slots || !m->part.split_backward || !d->pending[slot])
        return sb_error(SB_ERR_INTERNAL, MLP ": weight half of slot %d before its input half",
                        slot);
    sb_dense_backward_weight(d, m, slot, accumulate, ready, ctx);
    return SB_OK;
}

static sb_status mlp_forward(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             float grad_scale, double *loss_sum)
{
    SB_TRY(sb_part_check_whole(m, MLP));
    return mlp_forward_part(m, 0, x, y, n, grad_scale, loss_sum);
}

static sb_status mlp_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    SB_TRY(sb_part_check_whole(m, MLP));
    return mlp_backward_part(m, 0, NULL, NULL, 0, ready, ctx); /* no gradient for the images */
}

static sb_status mlp_predict(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             long *correct)
{
    struct sb_dense *d = m->impl;
    SB_TRY(sb_part_check_whole(m, MLP));
    SB_TRY(sb_part_check_forward(m, 0, n, MLP));
    sb_dense_forward(d, m, 0, x, n);
    m->be->count_correct(sb_dense_output(d, 0), y, n, m->n_classes, correct);
    return SB_OK;
}

const struct sb_workload_ops sb_workload_mlp = {
    .name = MLP,
    .size = mlp_size,
    .part_size = mlp_part_size,
    .create = mlp_create,
    .create_part = mlp_create_part,
    .forward = mlp_forward,
    .backward = mlp_backward,
    .predict = mlp_predict,
    .forward_part = mlp_forward_part,
    .part_output = mlp_part_output,
    .backward_part = mlp_backward_part,
    .backward_input_part = mlp_backward_input_part,
    .backward_weight_part = mlp_backward_weight_part,
    .destroy = mlp_destroy,
};
