/* A stack of fully connected layers, or a part of one; see dense.h. */
#include "workloads/dense.h"

#include <stdio.h>
#include <stdlib.h>

sb_status sb_dense_plan(struct sb_dense *d, int first, int end, int tp_rank, int tp_size,
                        const char *workload)
{
    d->first = first;
    d->end = end;
    d->tp_rank = tp_rank;
    d->tp_size = tp_size;
    for (int l = 0; l < d->n_layers; l++) {
        d->split[l] = l % 2 ? SB_TP_ROW : l + 1 < d->n_layers ? SB_TP_COLUMN : SB_TP_REPLICATED;
        d->in[l] = d->dim[l];
        d->out[l] = d->dim[l + 1];
        d->in0[l] = d->out0[l] = 0;
    }
    if (tp_size == 1) return SB_OK;
    if (d->split[first] == SB_TP_ROW || d->split[end - 1] == SB_TP_COLUMN)
        return sb_error(SB_ERR_USAGE,
                        "%s: a part of layers fc%d..fc%d cuts a column-/row-parallel pair "
                        "(tp %d)", workload, first + 1, end, tp_size);
    char what[64];
    for (int l = first; l < end; l++) {
        if (d->split[l] == SB_TP_REPLICATED) continue;
        /* The pair's hidden width: the column layer's output, the row layer's input. */
        int *first_out = d->split[l] == SB_TP_COLUMN ? &d->out0[l] : &d->in0[l];
        int *n_out = d->split[l] == SB_TP_COLUMN ? &d->out[l] : &d->in[l];
        snprintf(what, sizeof what, "%s: fc%d", workload, l + 1);
        SB_TRY(sb_tp_shard(*n_out, tp_size, tp_rank, what, first_out, n_out));
    }
    return SB_OK;
}

void sb_dense_layout(struct sb_dense *d, struct sb_model_table *t, int first_global)
{
    char layer[32], weight[40], bias[40];
    for (int l = d->first; l < d->end; l++) {
        int g = first_global + l;
        snprintf(layer, sizeof layer, "fc%d", l + 1);
        snprintf(weight, sizeof weight, "fc%d.weight", l + 1);
        snprintf(bias, sizeof bias, "fc%d.bias", l + 1);
        sb_model_table_add_layer(t, layer, (int[3]){d->in[l], 1, 1}, (int[3]){d->out[l], 1, 1});
        size_t rows = (size_t)d->dim[l + 1], cols = (size_t)d->dim[l];
        enum sb_tp_split bias_split = d->split[l] == SB_TP_COLUMN ? SB_TP_COLUMN
                                                                  : SB_TP_REPLICATED;
        struct sb_tensor_spec w = {weight, d->split[l], 2 * g, d->dim[l], rows, cols,
                                   (size_t)d->out0[l], (size_t)d->out[l],
                                   (size_t)d->in0[l], (size_t)d->in[l]};
        struct sb_tensor_spec b = {bias, bias_split, 2 * g + 1, d->dim[l], rows, 1,
                                   (size_t)d->out0[l], (size_t)d->out[l], 0, 1};
        d->w_off[l] = sb_model_table_add_tensor(t, &w);
        d->b_off[l] = sb_model_table_add_tensor(t, &b);
    }
}

/* Counts `floats` of backend memory into d->alloc_bytes and allocates them. */
static sb_status dense_alloc(struct sb_dense *d, const struct sb_backend_ops *be, float **p,
                             size_t floats)
{
    d->alloc_bytes += floats * sizeof(float);
    return be->alloc((void **)p, floats * sizeof(float));
}

/* Floats of each of the two backward scratch buffers for batches of rows:
 * a hidden layer's gradient (the inputs inside the part, and the output of
 * a part before the last), or an accumulated bias gradient. */
static size_t dense_scratch(const struct sb_dense *d, size_t rows)
{
    size_t widest = 1, bias_widest = 1;
    for (int l = d->first; l < d->end; l++) {
        if (l > d->first && (size_t)d->in[l] > widest) widest = (size_t)d->in[l];
        if ((size_t)d->out[l] > bias_widest) bias_widest = (size_t)d->out[l];
    }
    if (d->end < d->n_layers && (size_t)d->out[d->end - 1] > widest)
        widest = (size_t)d->out[d->end - 1];
    return rows * widest > bias_widest ? rows * widest : bias_widest;
}

double sb_dense_activation_bytes(const struct sb_dense *d, int max_batch, int slots)
{
    double rows = max_batch, floats = 2.0 * (double)dense_scratch(d, (size_t)max_batch);
    for (int l = d->first; l < d->end; l++) floats += slots * rows * d->out[l];
    if (d->end == d->n_layers) floats += slots * rows * d->dim[d->n_layers];
    return floats * sizeof(float);
}

sb_status sb_dense_alloc(struct sb_dense *d, const struct sb_backend_ops *be, int max_batch,
                         int slots)
{
    size_t rows = (size_t)max_batch;
    d->rows = max_batch;
    d->slots = slots;
    d->alloc_bytes = 0;
    d->input = calloc((size_t)slots, sizeof *d->input);
    d->n = calloc((size_t)slots, sizeof *d->n);
    if (!d->input || !d->n) return sb_error(SB_ERR_NOMEM, "dense layers: out of memory");
    size_t scratch = dense_scratch(d, rows);
    for (int l = d->first; l < d->end; l++)
        SB_TRY(dense_alloc(d, be, &d->act[l + 1], (size_t)slots * rows * (size_t)d->out[l]));
    SB_TRY(dense_alloc(d, be, &d->delta[0], scratch));
    SB_TRY(dense_alloc(d, be, &d->delta[1], scratch));
    if (d->end == d->n_layers)
        SB_TRY(dense_alloc(d, be, &d->dlogits,
                           (size_t)slots * rows * (size_t)d->dim[d->n_layers]));
    return SB_OK;
}

void sb_dense_free(struct sb_dense *d, const struct sb_backend_ops *be)
{
    for (int l = d->first; l < d->end; l++) be->free(d->act[l + 1]);
    be->free(d->delta[0]);
    be->free(d->delta[1]);
    be->free(d->dlogits);
    for (int l = d->first; l < d->end; l++) be->free(d->dz[l]);
    free(d->input);
    free(d->n);
    free(d->pending);
}

double sb_dense_split_bytes(const struct sb_dense *d, int max_batch, int slots)
{
    double floats = 0;
    for (int l = d->first; l < d->end && l < d->n_layers - 1; l++)
        floats += (double)slots * max_batch * d->out[l];
    return floats * sizeof(float);
}

sb_status sb_dense_alloc_split(struct sb_dense *d, const struct sb_backend_ops *be)
{
    d->pending = calloc((size_t)d->slots, sizeof *d->pending);
    if (!d->pending) return sb_error(SB_ERR_NOMEM, "dense layers: out of memory");
    for (int l = d->first; l < d->end && l < d->n_layers - 1; l++)
        SB_TRY(dense_alloc(d, be, &d->dz[l], (size_t)d->slots * d->rows * (size_t)d->out[l]));
    return SB_OK;
}

/* Slot s's kept dLoss/d(pre-activation of layer l) (rows, out[l]): its
 * dlogits for the model's last layer. */
static float *dz_of(const struct sb_dense *d, int l, int slot)
{
    if (l == d->n_layers - 1) return sb_dense_dlogits(d, slot);
    return d->dz[l] + (size_t)slot * d->rows * (size_t)d->out[l];
}

/* Slot s's (rows, out[l - 1]) block of act[l], or its input for l = first. */
static float *act_of(const struct sb_dense *d, int l, int slot)
{
    if (l == d->first) return (float *)d->input[slot];
    return d->act[l] + (size_t)slot * d->rows * (size_t)d->out[l - 1];
}

float *sb_dense_output(const struct sb_dense *d, int slot) { return act_of(d, d->end, slot); }

float *sb_dense_dlogits(const struct sb_dense *d, int slot)
{
    return d->dlogits + (size_t)slot * d->rows * (size_t)d->dim[d->n_layers];
}

void sb_dense_forward(struct sb_dense *d, const struct sb_model *m, int slot, const float *input,
                      int n)
{
    const struct sb_backend_ops *be = m->be;
    d->input[slot] = input;
    for (int l = d->first; l < d->end; l++) {
        int in = d->in[l], out = d->out[l];
        float *x = act_of(d, l, slot), *y = act_of(d, l + 1, slot);
        sb_model_layer_begin(m, d->w_off[l], (size_t)out * in + out, 0);
        /* y (n, out) = x (n, in) . W_l^T (in, out) + b_l */
        sb_model_gemm(m, 0, 1, n, out, in, 1.0f, x, in, m->params + d->w_off[l], in, 0.0f, y, out);
        if (d->split[l] == SB_TP_ROW) sb_model_tp_allreduce(m, y, (size_t)n * out);
        be->add_bias(y, m->params + d->b_off[l], n, out);
        sb_model_round(m, y, (size_t)n * out); /* the GEMM's output, stored 16-bit */
        if (l + 1 < d->n_layers) be->relu_forward(y, (size_t)n * out);
    }
    d->n[slot] = n;
}

void sb_dense_backward(struct sb_dense *d, struct sb_model *m, int slot, const float *dout,
                       float *dinput, int accumulate, sb_grad_ready_fn ready, void *ctx)
{
    const struct sb_backend_ops *be = m->be;
    int n = d->n[slot];
    float *dz; /* dLoss/d(pre-activation of layer l) (n, out) */
    if (dout) {
        /* Through the ReLU of the part's last layer, which made its output. */
        size_t count = (size_t)n * d->out[d->end - 1];
        dz = d->delta[d->end % 2];
        be->copy(dz, dout, count);
        be->relu_backward(dz, act_of(d, d->end, slot), count);
    } else {
        dz = sb_dense_dlogits(d, slot);
        sb_model_round(m, dz, (size_t)n * d->dim[d->n_layers]); /* the loss's gradient */
    }
    float beta = accumulate ? 1.0f : 0.0f;
    for (int l = d->end - 1; l >= d->first; l--) {
        int in = d->in[l], out = d->out[l];
        float *x = act_of(d, l, slot), *gb = m->grads + d->b_off[l];
        sb_model_layer_begin(m, d->w_off[l], (size_t)out * in + out, 1);
        /* dW_l (out, in) = dz^T (out, n) . x (n, in); db_l = colsum(dz) */
        sb_model_gemm(m, 1, 0, out, in, n, 1.0f, dz, out, x, in, beta, m->grads + d->w_off[l], in);
        if (accumulate) {
            /* delta[l % 2] is free until this layer's input gradient. */
            be->bias_grad(d->delta[l % 2], dz, n, out);
            be->add(gb, d->delta[l % 2], (size_t)out);
        } else {
            be->bias_grad(gb, dz, n, out);
        }
        sb_model_round(m, m->grads + d->w_off[l], (size_t)out * in + out);
        if (ready) ready(ctx, d->w_off[l], (size_t)out * in + out);
        if (l == d->first && !dinput) break;
        /* d x (n, in) = dz (n, out) . W_l (out, in); through the ReLU that
         * made x, except for the part's input. */
        float *dx = l == d->first ? dinput : d->delta[l % 2];
        sb_model_gemm(m, 0, 0, n, in, out, 1.0f, dz, out, m->params + d->w_off[l], in, 0.0f, dx,
                          in);
        if (d->split[l] == SB_TP_COLUMN) sb_model_tp_allreduce(m, dx, (size_t)n * in);
        sb_model_round(m, dx, (size_t)n * in);
        if (l > d->first) be->relu_backward(dx, x, (size_t)n * in);
        dz = dx;
    }
}

void sb_dense_backward_input(struct sb_dense *d, struct sb_model *m, int slot, const float *dout,
                             float *dinput)
{
    const struct sb_backend_ops *be = m->be;
    int n = d->n[slot];
    float *dz = dz_of(d, d->end - 1, slot); /* as sb_dense_backward's, kept per slot */
    if (dout) {
        size_t count = (size_t)n * d->out[d->end - 1];
        be->copy(dz, dout, count);
        be->relu_backward(dz, act_of(d, d->end, slot), count);
    } else {
        sb_model_round(m, dz, (size_t)n * d->dim[d->n_layers]);
    }
    for (int l = d->end - 1; l >= d->first; l--) {
        int in = d->in[l], out = d->out[l];
        sb_model_layer_begin(m, d->w_off[l], (size_t)out * in + out, 1);
        if (l == d->first && !dinput) break;
        float *dx = l == d->first ? dinput : dz_of(d, l - 1, slot);
        sb_model_gemm(m, 0, 0, n, in, out, 1.0f, dz, out, m->params + d->w_off[l], in, 0.0f, dx,
                      in);
        if (d->split[l] == SB_TP_COLUMN) sb_model_tp_allreduce(m, dx, (size_t)n * in);
        sb_model_round(m, dx, (size_t)n * in);
        if (l > d->first) be->relu_backward(dx, act_of(d, l, slot), (size_t)n * in);
        dz = dx;
    }
    d->pending[slot] = 1;
}

void sb_dense_backward_weight(struct sb_dense *d, struct sb_model *m, int slot, int accumulate,
                              sb_grad_ready_fn ready, void *ctx)
{
    const struct sb_backend_ops *be = m->be;
    int n = d->n[slot];
    float beta = accumulate ? 1.0f : 0.0f;
    for (int l = d->end - 1; l >= d->first; l--) {
        int in = d->in[l], out = d->out[l];
        const float *dz = dz_of(d, l, slot), *x = act_of(d, l, slot);
        float *gb = m->grads + d->b_off[l];
        /* dW_l (out, in) = dz^T (out, n) . x (n, in); db_l = colsum(dz), as
         * sb_dense_backward computes them (delta[0] is free: B is done). */
        sb_model_gemm(m, 1, 0, out, in, n, 1.0f, dz, out, x, in, beta, m->grads + d->w_off[l], in);
        if (accumulate) {
            be->bias_grad(d->delta[0], dz, n, out);
            be->add(gb, d->delta[0], (size_t)out);
        } else {
            be->bias_grad(gb, dz, n, out);
        }
        sb_model_round(m, m->grads + d->w_off[l], (size_t)out * in + out);
        if (ready) ready(ctx, d->w_off[l], (size_t)out * in + out);
    }
    d->pending[slot] = 0;
}
