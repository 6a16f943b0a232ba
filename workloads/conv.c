/* Convolution blocks of the cnn workload; see conv.h. */
#include "workloads/conv.h"

#include <stdio.h>

void sb_conv_shape(struct sb_conv *cv, int c_in, int side, int c_out)
{
    cv->c_in = c_in;
    cv->c_out = c_out;
    cv->h = cv->w = side;
    cv->oh = cv->ow = side - SB_CONV_K + 1;
}

/* Inputs each output reads: c_in * k * k. */
static int fan_in_of(const struct sb_conv *cv) { return cv->c_in * SB_CONV_K * SB_CONV_K; }

void sb_conv_layout(struct sb_conv *cv, struct sb_model_table *t, int index)
{
    char layer[32], weight[40], bias[40];
    snprintf(layer, sizeof layer, "conv%d", index + 1);
    snprintf(weight, sizeof weight, "conv%d.weight", index + 1);
    snprintf(bias, sizeof bias, "conv%d.bias", index + 1);
    sb_model_table_add_layer(t, layer, (int[3]){cv->c_in, cv->h, cv->w},
                       (int[3]){cv->c_out, cv->oh / 2, cv->ow / 2});
    size_t out = (size_t)cv->c_out, fan_in = (size_t)fan_in_of(cv);
    struct sb_tensor_spec w = {weight, SB_TP_REPLICATED, 2 * index, (int)fan_in, out, fan_in,
                               0, out, 0, fan_in};
    struct sb_tensor_spec b = {bias, SB_TP_REPLICATED, 2 * index + 1, (int)fan_in, out, 1,
                               0, out, 0, 1};
    cv->w_off = sb_model_table_add_tensor(t, &w);
    cv->b_off = sb_model_table_add_tensor(t, &b);
}

/* Allocates `count` floats (or int32s: same size) of backend memory and adds
 * their bytes to *bytes. */
static sb_status alloc_counted(const struct sb_backend_ops *be, void *ptr, size_t count,
                               size_t *bytes)
{
    *bytes += count * sizeof(float);
    return be->alloc((void **)ptr, count * sizeof(float));
}

/* Per-sample sizes: positions of the convolution output, pooled outputs. */
static size_t positions_of(const struct sb_conv *cv) { return (size_t)cv->oh * cv->ow; }
static size_t pooled_of(const struct sb_conv *cv)
{
    return (size_t)cv->c_out * (cv->oh / 2) * (cv->ow / 2);
}

/* The floats of the block's buffers for max_batch samples in `slots` slots:
 * cols, act, pooled, argmax (per slot) and dpooled (one). */
static void buffer_floats(const struct sb_conv *cv, int max_batch, int slots, size_t f[5])
{
    size_t b = (size_t)max_batch, s = (size_t)slots;
    size_t positions = b * positions_of(cv), pooled = b * pooled_of(cv);
    f[0] = s * positions * (size_t)fan_in_of(cv);
    f[1] = s * positions * (size_t)cv->c_out;
    f[2] = f[3] = s * pooled;
    f[4] = pooled;
}

double sb_conv_activation_bytes(const struct sb_conv *cv, int max_batch, int slots)
{
    size_t f[5];
    buffer_floats(cv, max_batch, slots, f);
    return (double)(f[0] + f[1] + f[2] + f[3] + f[4]) * sizeof(float);
}

sb_status sb_conv_alloc(struct sb_conv *cv, const struct sb_backend_ops *be, int max_batch,
                        int slots, size_t *bytes)
{
    size_t f[5];
    buffer_floats(cv, max_batch, slots, f);
    cv->rows = max_batch;
    SB_TRY(alloc_counted(be, &cv->cols, f[0], bytes));
    SB_TRY(alloc_counted(be, &cv->act, f[1], bytes));
    SB_TRY(alloc_counted(be, &cv->pooled, f[2], bytes));
    SB_TRY(alloc_counted(be, &cv->argmax, f[3], bytes));
    return alloc_counted(be, &cv->dpooled, f[4], bytes);
}

void sb_conv_free(struct sb_conv *cv, const struct sb_backend_ops *be)
{
    be->free(cv->cols);
    be->free(cv->act);
    be->free(cv->pooled);
    be->free(cv->argmax);
    be->free(cv->dpooled);
    be->free(cv->dnhwc);
}

/* The floats of the split backward's dnhwc: slots x rows x positions x c_out. */
static size_t split_floats(const struct sb_conv *cv, int max_batch, int slots)
{
    return (size_t)slots * (size_t)max_batch * positions_of(cv) * (size_t)cv->c_out;
}

double sb_conv_split_bytes(const struct sb_conv *cv, int max_batch, int slots)
{
    return (double)split_floats(cv, max_batch, slots) * sizeof(float);
}

sb_status sb_conv_alloc_split(struct sb_conv *cv, const struct sb_backend_ops *be, int slots,
                              size_t *bytes)
{
    return alloc_counted(be, &cv->dnhwc, split_floats(cv, cv->rows, slots), bytes);
}

/* The scratch's floats for the held blocks of conv[0, n): nhwc and dact
 * *nhwc each, dcols *dcols. */
static void scratch_floats(const struct sb_conv *conv, int n, int max_batch, size_t *nhwc_out,
                           size_t *dcols_out)
{
    size_t b = (size_t)max_batch, nhwc = 0, dcols = 0;
    for (int l = 0; l < n; l++) {
        if (!conv[l].held) continue;
        size_t positions = b * positions_of(&conv[l]);
        if (positions * (size_t)conv[l].c_out > nhwc) nhwc = positions * (size_t)conv[l].c_out;
        if (l > 0 && positions * (size_t)fan_in_of(&conv[l]) > dcols)
            dcols = positions * (size_t)fan_in_of(&conv[l]);
    }
    *nhwc_out = nhwc;
    *dcols_out = nhwc ? dcols : 0;
}

double sb_conv_scratch_bytes(const struct sb_conv *conv, int n, int max_batch)
{
    size_t nhwc, dcols;
    scratch_floats(conv, n, max_batch, &nhwc, &dcols);
    return (double)(2 * nhwc + dcols) * sizeof(float);
}

sb_status sb_conv_scratch_alloc(struct sb_conv_scratch *s, const struct sb_conv *conv, int n,
                                const struct sb_backend_ops *be, int max_batch, size_t *bytes)
{
    size_t nhwc, dcols;
    scratch_floats(conv, n, max_batch, &nhwc, &dcols);
    if (nhwc == 0) return SB_OK; /* no block held */
    SB_TRY(alloc_counted(be, &s->nhwc, nhwc, bytes));
    SB_TRY(alloc_counted(be, &s->dact, nhwc, bytes));
    return dcols ? alloc_counted(be, &s->dcols, dcols, bytes) : SB_OK;
}

void sb_conv_scratch_free(struct sb_conv_scratch *s, const struct sb_backend_ops *be)
{
    be->free(s->nhwc);
    be->free(s->dact);
    be->free(s->dcols);
}

/* Slot `slot`'s block of a per-slot buffer of `per_sample` elements. */
static size_t slot_at(const struct sb_conv *cv, int slot, size_t per_sample)
{
    return (size_t)slot * (size_t)cv->rows * per_sample;
}

float *sb_conv_output(const struct sb_conv *cv, int slot)
{
    return cv->pooled + slot_at(cv, slot, pooled_of(cv));
}

void sb_conv_forward(struct sb_conv *cv, struct sb_conv_scratch *s, const struct sb_model *m,
                     int slot, const float *x, int n)
{
    const struct sb_backend_ops *be = m->be;
    int positions = n * cv->oh * cv->ow, fan_in = fan_in_of(cv);
    float *cols = cv->cols + slot_at(cv, slot, positions_of(cv) * (size_t)fan_in);
    float *act = cv->act + slot_at(cv, slot, positions_of(cv) * (size_t)cv->c_out);
    int32_t *argmax = cv->argmax + slot_at(cv, slot, pooled_of(cv));
    sb_model_layer_begin(m, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out, 0);
    be->im2col(x, n, cv->c_in, cv->h, cv->w, SB_CONV_K, cols);
    /* nhwc (n*oh*ow, out) = cols (n*oh*ow, fan_in) . W^T (fan_in, out) + b */
    sb_model_gemm(m, 0, 1, positions, cv->c_out, fan_in, 1.0f, cols, fan_in, m->params + cv->w_off,
                  fan_in, 0.0f, s->nhwc, cv->c_out);
    be->add_bias(s->nhwc, m->params + cv->b_off, positions, cv->c_out);
    sb_model_round(m, s->nhwc, (size_t)positions * cv->c_out); /* the GEMM's output, 16-bit */
    /* (n, oh*ow, out) -> NCHW (n, out, oh*ow) */
    be->transpose_batched(s->nhwc, n, cv->oh * cv->ow, cv->c_out, act);
    be->relu_forward(act, (size_t)positions * cv->c_out);
    be->maxpool2_forward(act, n, cv->c_out, cv->oh, cv->ow, sb_conv_output(cv, slot), argmax);
}

void sb_conv_backward(struct sb_conv *cv, struct sb_conv_scratch *s, struct sb_model *m,
                      int slot, int n, const float *dpooled, float *dx, int accumulate,
                      sb_grad_ready_fn ready, void *ctx)
{
    const struct sb_backend_ops *be = m->be;
    int positions = n * cv->oh * cv->ow, fan_in = fan_in_of(cv);
    const float *cols = cv->cols + slot_at(cv, slot, positions_of(cv) * (size_t)fan_in);
    const float *act = cv->act + slot_at(cv, slot, positions_of(cv) * (size_t)cv->c_out);
    const int32_t *argmax = cv->argmax + slot_at(cv, slot, pooled_of(cv));
    float *gb = m->grads + cv->b_off;
    sb_model_layer_begin(m, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out, 1);
    /* pooled grad -> ReLU output grad -> pre-activation grad, NCHW */
    be->maxpool2_backward(dpooled, argmax, n, cv->c_out, cv->oh, cv->ow, s->dact);
    be->relu_backward(s->dact, act, (size_t)positions * cv->c_out);
    /* NCHW (n, out, oh*ow) -> (n*oh*ow, out) */
    be->transpose_batched(s->dact, n, cv->c_out, cv->oh * cv->ow, s->nhwc);
    /* dW (out, fan_in) = dnhwc^T (out, n*oh*ow) . cols (n*oh*ow, fan_in) */
    sb_model_gemm(m, 1, 0, cv->c_out, fan_in, positions, 1.0f, s->nhwc, cv->c_out, cols, fan_in,
                  accumulate ? 1.0f : 0.0f, m->grads + cv->w_off, fan_in);
    if (accumulate) {
        /* dact is free once transposed. */
        be->bias_grad(s->dact, s->nhwc, positions, cv->c_out);
        be->add(gb, s->dact, (size_t)cv->c_out);
    } else {
        be->bias_grad(gb, s->nhwc, positions, cv->c_out);
    }
    sb_model_round(m, m->grads + cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out);
    if (ready) ready(ctx, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out);
    if (!dx) return;
    /* dcols (n*oh*ow, fan_in) = dnhwc (n*oh*ow, out) . W (out, fan_in) */
    sb_model_gemm(m, 0, 0, positions, fan_in, cv->c_out, 1.0f, s->nhwc, cv->c_out,
                  m->params + cv->w_off, fan_in, 0.0f, s->dcols, fan_in);
    sb_model_round(m, s->dcols, (size_t)positions * fan_in);
    be->col2im(s->dcols, n, cv->c_in, cv->h, cv->w, SB_CONV_K, dx);
    sb_model_round(m, dx, (size_t)n * cv->c_in * cv->h * cv->w); /* col2im's sums */
}

/* Slot s's kept pre-activation gradient (rows * oh * ow, c_out). */
static float *dnhwc_of(const struct sb_conv *cv, int slot)
{
    return cv->dnhwc + slot_at(cv, slot, positions_of(cv) * (size_t)cv->c_out);
}

void sb_conv_backward_input(struct sb_conv *cv, struct sb_conv_scratch *s, struct sb_model *m,
                            int slot, int n, const float *dpooled, float *dx)
{
    const struct sb_backend_ops *be = m->be;
    int positions = n * cv->oh * cv->ow, fan_in = fan_in_of(cv);
    const float *act = cv->act + slot_at(cv, slot, positions_of(cv) * (size_t)cv->c_out);
    const int32_t *argmax = cv->argmax + slot_at(cv, slot, pooled_of(cv));
    float *dnhwc = dnhwc_of(cv, slot);
    sb_model_layer_begin(m, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out, 1);
    be->maxpool2_backward(dpooled, argmax, n, cv->c_out, cv->oh, cv->ow, s->dact);
    be->relu_backward(s->dact, act, (size_t)positions * cv->c_out);
    be->transpose_batched(s->dact, n, cv->c_out, cv->oh * cv->ow, dnhwc);
    if (!dx) return;
    sb_model_gemm(m, 0, 0, positions, fan_in, cv->c_out, 1.0f, dnhwc, cv->c_out,
                  m->params + cv->w_off, fan_in, 0.0f, s->dcols, fan_in);
    sb_model_round(m, s->dcols, (size_t)positions * fan_in);
    be->col2im(s->dcols, n, cv->c_in, cv->h, cv->w, SB_CONV_K, dx);
    sb_model_round(m, dx, (size_t)n * cv->c_in * cv->h * cv->w);
}

void sb_conv_backward_weight(struct sb_conv *cv, struct sb_conv_scratch *s, struct sb_model *m,
                             int slot, int n, int accumulate, sb_grad_ready_fn ready, void *ctx)
{
    const struct sb_backend_ops *be = m->be;
    int positions = n * cv->oh * cv->ow, fan_in = fan_in_of(cv);
    const float *cols = cv->cols + slot_at(cv, slot, positions_of(cv) * (size_t)fan_in);
    const float *dnhwc = dnhwc_of(cv, slot);
    float *gb = m->grads + cv->b_off;
    sb_model_gemm(m, 1, 0, cv->c_out, fan_in, positions, 1.0f, dnhwc, cv->c_out, cols, fan_in,
                  accumulate ? 1.0f : 0.0f, m->grads + cv->w_off, fan_in);
    if (accumulate) {
        be->bias_grad(s->dact, dnhwc, positions, cv->c_out); /* dact: scratch, B is done */
        be->add(gb, s->dact, (size_t)cv->c_out);
    } else {
        be->bias_grad(gb, dnhwc, positions, cv->c_out);
    }
    sb_model_round(m, m->grads + cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out);
    if (ready) ready(ctx, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out);
}
