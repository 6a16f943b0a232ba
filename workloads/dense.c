/* Shared workload pieces; see dense.h. */
#include "workloads/dense.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"

size_t sb_model_add_tensor(struct sb_model *m, const char *name, size_t count, size_t *off)
{
    struct sb_tensor_desc *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->count = count;
    *off += count;
    return t->offset;
}

void sb_init_kaiming_uniform(const struct sb_model *m, const int *fan_in, uint64_t seed,
                             float *host)
{
    for (int t = 0; t < m->n_tensors; t++) {
        double bound = 1.0 / sqrt((double)fan_in[t / 2]);
        struct sb_rng rng;
        sb_rng_seed(&rng, seed, 1000 + (uint64_t)t);
        float *x = host + m->tensors[t].offset;
        for (size_t i = 0; i < m->tensors[t].count; i++)
            x[i] = (float)((2.0 * sb_rng_uniform(&rng) - 1.0) * bound);
    }
}

sb_status sb_model_init_params(struct sb_model *m, const int *fan_in, uint64_t seed,
                               const char *workload)
{
    const struct sb_backend_ops *be = m->be;
    size_t n = m->n_params;
    float *host = be->host_memory ? m->params : malloc(n * sizeof *host);
    if (!host) return sb_error(SB_ERR_NOMEM, "%s: out of memory", workload);
    sb_init_kaiming_uniform(m, fan_in, seed, host);
    sb_status st = be->host_memory ? SB_OK : be->upload(m->params, host, n * sizeof *host);
    if (host != m->params) free(host);
    return st;
}

void sb_dense_layout(struct sb_dense *d, struct sb_model *m, int first, size_t *off)
{
    char name[32];
    for (int l = 0; l < d->n_layers; l++) {
        size_t in = (size_t)d->dim[l], out = (size_t)d->dim[l + 1];
        snprintf(name, sizeof name, "fc%d.weight", first + l);
        d->w_off[l] = sb_model_add_tensor(m, name, out * in, off);
        snprintf(name, sizeof name, "fc%d.bias", first + l);
        d->b_off[l] = sb_model_add_tensor(m, name, out, off);
    }
}

sb_status sb_dense_alloc(struct sb_dense *d, const struct sb_backend_ops *be, int max_batch)
{
    size_t rows = (size_t)max_batch, widest = 1;
    for (int l = 1; l < d->n_layers; l++)
        if ((size_t)d->dim[l] > widest) widest = (size_t)d->dim[l];
    d->alloc_bytes = 0;
    for (int l = 1; l <= d->n_layers; l++) {
        SB_TRY(be->alloc((void **)&d->act[l], rows * (size_t)d->dim[l] * sizeof(float)));
        d->alloc_bytes += rows * (size_t)d->dim[l] * sizeof(float);
    }
    SB_TRY(be->alloc((void **)&d->delta[0], rows * widest * sizeof(float)));
    SB_TRY(be->alloc((void **)&d->delta[1], rows * widest * sizeof(float)));
    d->alloc_bytes += 2 * rows * widest * sizeof(float) +
                      rows * (size_t)d->dim[d->n_layers] * sizeof(float);
    return be->alloc((void **)&d->dlogits,
                     rows * (size_t)d->dim[d->n_layers] * sizeof(float));
}

void sb_dense_free(struct sb_dense *d, const struct sb_backend_ops *be)
{
    for (int l = 1; l <= d->n_layers; l++) be->free(d->act[l]);
    be->free(d->delta[0]);
    be->free(d->delta[1]);
    be->free(d->dlogits);
}

void sb_dense_forward(struct sb_dense *d, const struct sb_model *m, const float *input, int n)
{
    const struct sb_backend_ops *be = m->be;
    d->act[0] = (float *)input;
    for (int l = 0; l < d->n_layers; l++) {
        int in = d->dim[l], out = d->dim[l + 1];
        sb_model_layer_begin(m, d->w_off[l], (size_t)out * in + out, 0);
        /* act[l+1] (n, out) = act[l] (n, in) . W_l^T (in, out) + b_l */
        be->sgemm(0, 1, n, out, in, 1.0f, d->act[l], in, m->params + d->w_off[l], in, 0.0f,
                  d->act[l + 1], out);
        be->add_bias(d->act[l + 1], m->params + d->b_off[l], n, out);
        if (l + 1 < d->n_layers) be->relu_forward(d->act[l + 1], (size_t)n * out);
    }
    d->n = n;
}

void sb_dense_backward(struct sb_dense *d, struct sb_model *m, float *dinput,
                       sb_grad_ready_fn ready, void *ctx)
{
    const struct sb_backend_ops *be = m->be;
    int n = d->n;
    float *dz = d->dlogits; /* dLoss/d(pre-activation of layer l) (n, out) */
    for (int l = d->n_layers - 1; l >= 0; l--) {
        int in = d->dim[l], out = d->dim[l + 1];
        sb_model_layer_begin(m, d->w_off[l], (size_t)out * in + out, 1);
        /* dW_l (out, in) = dz^T (out, n) . act[l] (n, in); db_l = colsum(dz) */
        be->sgemm(1, 0, out, in, n, 1.0f, dz, out, d->act[l], in, 0.0f,
                  m->grads + d->w_off[l], in);
        be->bias_grad(m->grads + d->b_off[l], dz, n, out);
        if (ready) ready(ctx, d->w_off[l], (size_t)out * in + out);
        if (l == 0 && !dinput) break;
        /* d act[l] (n, in) = dz (n, out) . W_l (out, in); through the ReLU
         * that made act[l], except for the stack's input. */
        float *da = l == 0 ? dinput : d->delta[l % 2];
        be->sgemm(0, 0, n, in, out, 1.0f, dz, out, m->params + d->w_off[l], in, 0.0f, da, in);
        if (l > 0) be->relu_backward(da, d->act[l], (size_t)n * in);
        dz = da;
    }
}
