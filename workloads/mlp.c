/* Workload "mlp": a multi-layer perceptron for MNIST.
 *
 * 784 -> hidden... -> 10 (default one hidden layer of 256), ReLU between
 * layers, softmax cross-entropy on the logits. Layer l holds W_l (out, in)
 * and b_l (out) in PyTorch's nn.Linear layout, stored as consecutive ranges
 * fc<l>.weight, fc<l>.bias of the flat parameter buffer, so the gradients of
 * the last layer are the last range and become ready first in backward.
 * The layers are one dense stack (workloads/dense.h): batched GEMMs and
 * elementwise ops through the backend. */
#include <stdlib.h>

#include "data/mnist.h"
#include "workloads/dense.h"
#include "workloads/workload.h"

extern const struct sb_workload_ops sb_workload_mlp;

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
    free(m);
}

static sb_status mlp_create(const struct sb_config *cfg,
                            const struct sb_backend_ops *be, int max_batch,
                            struct sb_model **out)
{
    *out = NULL;
    struct sb_model *m = calloc(1, sizeof *m);
    struct sb_dense *d = calloc(1, sizeof *d);
    if (!m || !d) {
        free(m);
        free(d);
        return sb_error(SB_ERR_NOMEM, "mlp: out of memory");
    }
    m->impl = d;
    m->be = be;
    m->in_dim = SB_MNIST_PIXELS;
    m->n_classes = SB_MNIST_CLASSES;
    m->max_batch = max_batch;

    d->n_layers = cfg->n_hidden + 1;
    d->dim[0] = m->in_dim;
    for (int i = 0; i < cfg->n_hidden; i++) d->dim[i + 1] = cfg->hidden[i];
    d->dim[d->n_layers] = m->n_classes;

    sb_status st;
    m->tensors = calloc((size_t)(2 * d->n_layers), sizeof *m->tensors);
    if (!m->tensors) goto nomem;
    size_t off = 0;
    sb_dense_layout(d, m, 1, &off);
    m->n_params = off;

    if ((st = be->alloc((void **)&m->params, off * sizeof(float))) ||
        (st = be->alloc((void **)&m->grads, off * sizeof(float))) ||
        (st = sb_dense_alloc(d, be, max_batch)))
        goto fail;
    m->activation_bytes = d->alloc_bytes;

    /* fan_in of layer l = dim[l] */
    if ((st = sb_model_init_params(m, d->dim, cfg->seed, "mlp"))) goto fail;
    m->ops = &sb_workload_mlp;
    *out = m;
    return SB_OK;
nomem:
    st = sb_error(SB_ERR_NOMEM, "mlp: out of memory");
fail:
    mlp_destroy(m);
    return st;
}

static sb_status mlp_forward(struct sb_model *m, const float *x, const uint8_t *y,
                             int n, float grad_scale, double *loss_sum)
{
    struct sb_dense *d = m->impl;
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "mlp: batch %d outside 1..%d", n, m->max_batch);
    sb_dense_forward(d, m, x, n);
    m->be->softmax_xent(d->act[d->n_layers], y, n, m->n_classes, grad_scale, d->dlogits,
                        loss_sum);
    return SB_OK;
}

static sb_status mlp_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    sb_dense_backward(m->impl, m, NULL, ready, ctx); /* no gradient for the images */
    return SB_OK;
}

static sb_status mlp_predict(struct sb_model *m, const float *x, const uint8_t *y,
                             int n, long *correct)
{
    struct sb_dense *d = m->impl;
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "mlp: batch %d outside 1..%d", n, m->max_batch);
    sb_dense_forward(d, m, x, n);
    m->be->count_correct(d->act[d->n_layers], y, n, m->n_classes, correct);
    return SB_OK;
}

const struct sb_workload_ops sb_workload_mlp = {
    .name = "mlp",
    .create = mlp_create,
    .forward = mlp_forward,
    .backward = mlp_backward,
    .predict = mlp_predict,
    .destroy = mlp_destroy,
};
