/* Workload "mlp": a multi-layer perceptron for MNIST.
 *
 * 784 -> hidden... -> 10 (default one hidden layer of 256), ReLU between
 * layers, softmax cross-entropy on the logits. Layer l holds W_l (out, in)
 * and b_l (out) in PyTorch's nn.Linear layout, stored as consecutive ranges
 * fc<l>.weight, fc<l>.bias of the flat parameter buffer, so the gradients of
 * the last layer are the last range and become ready first in backward.
 * All math is batched GEMMs and elementwise ops through the backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/mnist.h"
#include "workloads/workload.h"

#define MLP_MAX_LAYERS (SB_MAX_HIDDEN + 1)

extern const struct sb_workload_ops sb_workload_mlp;

struct mlp {
    int n_layers;                   /* linear layers */
    int dim[MLP_MAX_LAYERS + 1];    /* dim[0] = 784 ... dim[n_layers] = 10 */
    size_t w_off[MLP_MAX_LAYERS];   /* offsets of W_l and b_l in floats */
    size_t b_off[MLP_MAX_LAYERS];
    float *act[MLP_MAX_LAYERS + 1]; /* act[l] (max_batch, dim[l]); act[0] = input */
    float *delta[2];                /* ping-pong (max_batch, max dim) */
    float *dlogits;                 /* (max_batch, 10) */
    int n;                          /* batch size of the last forward */
};

static void mlp_destroy(struct sb_model *m)
{
    if (!m) return;
    struct mlp *p = m->impl;
    if (p) {
        for (int l = 1; l <= p->n_layers; l++) m->be->free(p->act[l]);
        m->be->free(p->delta[0]);
        m->be->free(p->delta[1]);
        m->be->free(p->dlogits);
        free(p);
    }
    m->be->free(m->params);
    m->be->free(m->grads);
    free(m->tensors);
    free(m);
}

/* Kaiming-uniform with a = sqrt(5), PyTorch's nn.Linear default: weights and
 * biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)). One generator stream per
 * tensor, so widening one layer leaves the others' values unchanged. */
static void mlp_init_host(const struct sb_model *m, const struct mlp *p,
                          uint64_t seed, float *host)
{
    for (int t = 0; t < m->n_tensors; t++) {
        int layer = t / 2;
        double bound = 1.0 / sqrt((double)p->dim[layer]);
        struct sb_rng rng;
        sb_rng_seed(&rng, seed, 1000 + (uint64_t)t);
        float *x = host + m->tensors[t].offset;
        for (size_t i = 0; i < m->tensors[t].count; i++)
            x[i] = (float)((2.0 * sb_rng_uniform(&rng) - 1.0) * bound);
    }
}

static sb_status mlp_create(const struct sb_config *cfg,
                            const struct sb_backend_ops *be, int max_batch,
                            struct sb_model **out)
{
    *out = NULL;
    struct sb_model *m = calloc(1, sizeof *m);
    struct mlp *p = calloc(1, sizeof *p);
    if (!m || !p) {
        free(m);
        free(p);
        return sb_error(SB_ERR_NOMEM, "mlp: out of memory");
    }
    m->impl = p;
    m->be = be;
    m->in_dim = 784;
    m->n_classes = SB_MNIST_CLASSES;
    m->max_batch = max_batch;

    p->n_layers = cfg->n_hidden + 1;
    p->dim[0] = m->in_dim;
    for (int i = 0; i < cfg->n_hidden; i++) p->dim[i + 1] = cfg->hidden[i];
    p->dim[p->n_layers] = m->n_classes;

    m->n_tensors = 2 * p->n_layers;
    m->tensors = calloc((size_t)m->n_tensors, sizeof *m->tensors);
    if (!m->tensors) goto nomem;
    size_t off = 0, widest = 0;
    for (int l = 0; l < p->n_layers; l++) {
        size_t in = (size_t)p->dim[l], outd = (size_t)p->dim[l + 1];
        struct sb_tensor_desc *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
        snprintf(w->name, sizeof w->name, "fc%d.weight", l + 1);
        snprintf(b->name, sizeof b->name, "fc%d.bias", l + 1);
        w->offset = p->w_off[l] = off;
        w->count = outd * in;
        off += w->count;
        b->offset = p->b_off[l] = off;
        b->count = outd;
        off += b->count;
        if (outd > widest) widest = outd;
    }
    m->n_params = off;

    sb_status st;
    size_t rows = (size_t)max_batch;
    if ((st = be->alloc((void **)&m->params, off * sizeof(float))) ||
        (st = be->alloc((void **)&m->grads, off * sizeof(float))) ||
        (st = be->alloc((void **)&p->delta[0], rows * widest * sizeof(float))) ||
        (st = be->alloc((void **)&p->delta[1], rows * widest * sizeof(float))) ||
        (st = be->alloc((void **)&p->dlogits, rows * (size_t)m->n_classes * sizeof(float))))
        goto fail;
    for (int l = 1; l <= p->n_layers; l++)
        if ((st = be->alloc((void **)&p->act[l], rows * (size_t)p->dim[l] * sizeof(float))))
            goto fail;

    float *host = malloc(off * sizeof *host);
    if (!host) goto nomem;
    mlp_init_host(m, p, cfg->seed, host);
    st = be->upload(m->params, host, off * sizeof *host);
    free(host);
    if (st) goto fail;
    m->ops = &sb_workload_mlp;
    *out = m;
    return SB_OK;
nomem:
    st = sb_error(SB_ERR_NOMEM, "mlp: out of memory");
fail:
    mlp_destroy(m);
    return st;
}

/* Runs the layers on x (n, 784) and leaves the logits in act[n_layers]. */
static void mlp_layers(struct sb_model *m, const float *x, int n)
{
    struct mlp *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    p->act[0] = (float *)x;
    for (int l = 0; l < p->n_layers; l++) {
        int in = p->dim[l], outd = p->dim[l + 1];
        /* act[l+1] (n, out) = act[l] (n, in) . W_l^T (in, out) + b_l */
        be->sgemm(0, 1, n, outd, in, 1.0f, p->act[l], in, m->params + p->w_off[l],
                  in, 0.0f, p->act[l + 1], outd);
        be->add_bias(p->act[l + 1], m->params + p->b_off[l], n, outd);
        if (l + 1 < p->n_layers) be->relu_forward(p->act[l + 1], (size_t)n * outd);
    }
    p->n = n;
}

static sb_status mlp_forward(struct sb_model *m, const float *x, const uint8_t *y,
                             int n, float grad_scale, double *loss_sum)
{
    struct mlp *p = m->impl;
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "mlp: batch %d outside 1..%d", n, m->max_batch);
    mlp_layers(m, x, n);
    double loss = 0.0;
    m->be->softmax_xent(p->act[p->n_layers], y, n, m->n_classes, grad_scale,
                        p->dlogits, &loss);
    *loss_sum += loss;
    return SB_OK;
}

static sb_status mlp_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    struct mlp *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int n = p->n;
    float *dz = p->dlogits; /* dLoss/d(pre-activation of layer l) (n, out) */
    for (int l = p->n_layers - 1; l >= 0; l--) {
        int in = p->dim[l], outd = p->dim[l + 1];
        /* dW_l (out, in) = dz^T (out, n) . act[l] (n, in); db_l = colsum(dz) */
        be->sgemm(1, 0, outd, in, n, 1.0f, dz, outd, p->act[l], in, 0.0f,
                  m->grads + p->w_off[l], in);
        be->bias_grad(m->grads + p->b_off[l], dz, n, outd);
        if (ready) ready(ctx, p->w_off[l], (size_t)outd * in + outd);
        if (l == 0) break;
        /* d act[l] (n, in) = dz (n, out) . W_l (out, in), then through ReLU */
        float *da = p->delta[l % 2];
        be->sgemm(0, 0, n, in, outd, 1.0f, dz, outd, m->params + p->w_off[l], in,
                  0.0f, da, in);
        be->relu_backward(da, p->act[l], (size_t)n * in);
        dz = da;
    }
    return SB_OK;
}

static sb_status mlp_predict(struct sb_model *m, const float *x, const uint8_t *y,
                             int n, long *correct)
{
    struct mlp *p = m->impl;
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "mlp: batch %d outside 1..%d", n, m->max_batch);
    mlp_layers(m, x, n);
    m->be->count_correct(p->act[p->n_layers], y, n, m->n_classes, correct);
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
