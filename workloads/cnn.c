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
 * A convolution is im2col + one SGEMM over the whole batch:
 * cols (n*oh*ow, c*25) . W^T (c*25, out) = (n, oh*ow, out), plus the bias,
 * then a per-sample transpose to NCHW (n, out, oh*ow). */
#include <stdlib.h>

#include "data/mnist.h"
#include "workloads/dense.h"
#include "workloads/workload.h"

#define CNN_SIDE SB_MNIST_SIDE /* MNIST image side in pixels */
#define CNN_K 5            /* convolution kernel side */
#define CNN_CONVS 2
#define CNN_DENSE 3
#define CNN_TENSORS (2 * (CNN_CONVS + CNN_DENSE))

extern const struct sb_workload_ops sb_workload_cnn;

/* One conv -> ReLU -> max-pool 2 block. */
struct cnn_conv {
    int c_in, h, w;     /* input (n, c_in, h, w) */
    int c_out, oh, ow;  /* conv output (n, c_out, oh, ow); pooled (oh/2, ow/2) */
    size_t w_off, b_off;
    float *cols;        /* (max_batch * oh * ow, c_in * 25) im2col of the input */
    float *act;         /* (max_batch, c_out, oh, ow) ReLU output, NCHW */
    float *pooled;      /* (max_batch, c_out, oh/2, ow/2) */
    int32_t *argmax;    /* (max_batch, c_out, oh/2, ow/2) flat indices into act */
    float *dpooled;     /* (max_batch, c_out, oh/2, ow/2) backward scratch */
};

struct cnn {
    struct cnn_conv conv[CNN_CONVS];
    struct sb_dense dense;         /* fc1..fc3: 256, 120, 84, 10 */
    float *nhwc;                   /* (max_batch * 576 * 6) conv GEMM output / its grad */
    float *dact;                   /* (max_batch * 6 * 576) grad of a conv's ReLU output */
    float *dcols;                  /* (max_batch * 64, 150) grad of conv2's cols */
    int n;                         /* batch size of the last forward */
};

static void cnn_destroy(struct sb_model *m)
{
    if (!m) return;
    const struct sb_backend_ops *be = m->be;
    struct cnn *p = m->impl;
    if (p) {
        for (int l = 0; l < CNN_CONVS; l++) {
            struct cnn_conv *cv = &p->conv[l];
            be->free(cv->cols);
            be->free(cv->act);
            be->free(cv->pooled);
            be->free(cv->argmax);
            be->free(cv->dpooled);
        }
        sb_dense_free(&p->dense, be);
        be->free(p->nhwc);
        be->free(p->dact);
        be->free(p->dcols);
        free(p);
    }
    be->free(m->params);
    be->free(m->grads);
    free(m->tensors);
    free(m);
}

/* Allocates `count` floats (or int32s: same size) of backend memory and
 * adds their bytes to *total (may be NULL). */
static sb_status cnn_alloc_counted(const struct sb_backend_ops *be, void *ptr, size_t count,
                                   size_t *total)
{
    if (total) *total += count * sizeof(float);
    return be->alloc((void **)ptr, count * sizeof(float));
}
#define cnn_alloc(be, ptr, count) cnn_alloc_counted(be, ptr, count, &act_bytes)

/* An empty model of this workload: m, its struct cnn and room for the
 * layout table. Errors: SB_ERR_NOMEM. */
static sb_status cnn_new(const struct sb_backend_ops *be, int max_batch, struct sb_model **out)
{
    struct sb_model *m = calloc(1, sizeof *m);
    struct cnn *p = calloc(1, sizeof *p);
    struct sb_tensor_desc *tensors = calloc(CNN_TENSORS, sizeof *tensors);
    if (!m || !p || !tensors) {
        free(m);
        free(p);
        free(tensors);
        return sb_error(SB_ERR_NOMEM, "cnn: out of memory");
    }
    m->impl = p;
    m->be = be;
    m->tensors = tensors;
    m->in_dim = CNN_SIDE * CNN_SIDE;
    m->n_classes = SB_MNIST_CLASSES;
    m->max_batch = max_batch;
    *out = m;
    return SB_OK;
}

/* Shapes and the layout table, in buffer (= layer) order: the two conv
 * blocks, then fc1..fc3; sets m->n_params and fan_in[layer] (CNN_TENSORS /
 * 2 entries) for the init. */
static void cnn_layout(struct sb_model *m, int *fan_in)
{
    struct cnn *p = m->impl;
    static const int channels[CNN_CONVS + 1] = {1, 6, 16};
    static const char *const names[2 * CNN_CONVS] = {"conv1.weight", "conv1.bias",
                                                     "conv2.weight", "conv2.bias"};
    size_t off = 0;
    int side = CNN_SIDE;
    for (int l = 0; l < CNN_CONVS; l++) {
        struct cnn_conv *cv = &p->conv[l];
        cv->c_in = channels[l];
        cv->c_out = channels[l + 1];
        cv->h = cv->w = side;
        cv->oh = cv->ow = side - CNN_K + 1;
        side = cv->oh / 2;
        fan_in[l] = cv->c_in * CNN_K * CNN_K;
        cv->w_off = sb_model_add_tensor(m, names[2 * l], (size_t)cv->c_out * fan_in[l], &off);
        cv->b_off = sb_model_add_tensor(m, names[2 * l + 1], (size_t)cv->c_out, &off);
    }
    struct sb_dense *d = &p->dense;
    d->n_layers = CNN_DENSE;
    d->dim[0] = channels[CNN_CONVS] * side * side; /* 16 * 4 * 4 = 256 */
    d->dim[1] = 120;
    d->dim[2] = 84;
    d->dim[3] = m->n_classes;
    for (int l = 0; l < CNN_DENSE; l++) fan_in[CNN_CONVS + l] = d->dim[l];
    sb_dense_layout(d, m, 1, &off); /* fc1..fc3 */
    m->n_params = off;
}

/* Parameters, gradients and every activation and scratch buffer for
 * batches of up to max_batch, sized from the layout; sets
 * m->activation_bytes. Errors: SB_ERR_NOMEM (what was allocated stays for
 * cnn_destroy). */
static sb_status cnn_alloc_buffers(struct sb_model *m, int max_batch, const int *fan_in)
{
    const struct sb_backend_ops *be = m->be;
    struct cnn *p = m->impl;
    size_t b = (size_t)max_batch, nhwc_max = 0, dcols = 0, act_bytes = 0;
    SB_TRY(cnn_alloc_counted(be, &m->params, m->n_params, NULL));
    SB_TRY(cnn_alloc_counted(be, &m->grads, m->n_params, NULL));
    for (int l = 0; l < CNN_CONVS; l++) {
        struct cnn_conv *cv = &p->conv[l];
        size_t positions = b * cv->oh * cv->ow, act = positions * cv->c_out;
        size_t pooled = b * cv->c_out * (cv->oh / 2) * (cv->ow / 2);
        SB_TRY(cnn_alloc(be, &cv->cols, positions * fan_in[l]));
        SB_TRY(cnn_alloc(be, &cv->act, act));
        SB_TRY(cnn_alloc(be, &cv->pooled, pooled));
        SB_TRY(cnn_alloc(be, &cv->argmax, pooled));
        SB_TRY(cnn_alloc(be, &cv->dpooled, pooled));
        if (act > nhwc_max) nhwc_max = act;
        if (l > 0 && positions * fan_in[l] > dcols) dcols = positions * fan_in[l];
    }
    SB_TRY(sb_dense_alloc(&p->dense, be, max_batch));
    SB_TRY(cnn_alloc(be, &p->nhwc, nhwc_max));
    SB_TRY(cnn_alloc(be, &p->dact, nhwc_max));
    SB_TRY(cnn_alloc(be, &p->dcols, dcols));
    m->activation_bytes = act_bytes + p->dense.alloc_bytes;
    return SB_OK;
}

static sb_status cnn_create(const struct sb_config *cfg, const struct sb_backend_ops *be,
                            int max_batch, struct sb_model **out)
{
    *out = NULL;
    if (!be->im2col || !be->col2im || !be->transpose_batched || !be->maxpool2_forward ||
        !be->maxpool2_backward)
        return sb_error(SB_ERR_USAGE, "--workload cnn: backend '%s' lacks the convolution ops",
                        be->name);
    struct sb_model *m = NULL;
    SB_TRY(cnn_new(be, max_batch, &m));
    int fan_in[CNN_TENSORS / 2];
    cnn_layout(m, fan_in);
    sb_status st = cnn_alloc_buffers(m, max_batch, fan_in);
    if (!st) st = sb_model_init_params(m, fan_in, cfg->seed, "cnn");
    if (st) {
        cnn_destroy(m);
        return st;
    }
    m->ops = &sb_workload_cnn;
    *out = m;
    return SB_OK;
}

/* Runs every layer on x (n, 1, 28, 28) and leaves the logits in act[3]. */
static void cnn_layers(struct sb_model *m, const float *x, int n)
{
    struct cnn *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    const float *in = x;
    for (int l = 0; l < CNN_CONVS; l++) {
        struct cnn_conv *cv = &p->conv[l];
        int positions = n * cv->oh * cv->ow, fan_in = cv->c_in * CNN_K * CNN_K;
        sb_model_layer_begin(m, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out, 0);
        be->im2col(in, n, cv->c_in, cv->h, cv->w, CNN_K, cv->cols);
        /* nhwc (n*oh*ow, out) = cols (n*oh*ow, fan_in) . W^T (fan_in, out) + b */
        be->sgemm(0, 1, positions, cv->c_out, fan_in, 1.0f, cv->cols, fan_in,
                  m->params + cv->w_off, fan_in, 0.0f, p->nhwc, cv->c_out);
        be->add_bias(p->nhwc, m->params + cv->b_off, positions, cv->c_out);
        /* (n, oh*ow, out) -> NCHW (n, out, oh*ow) */
        be->transpose_batched(p->nhwc, n, cv->oh * cv->ow, cv->c_out, cv->act);
        be->relu_forward(cv->act, (size_t)positions * cv->c_out);
        be->maxpool2_forward(cv->act, n, cv->c_out, cv->oh, cv->ow, cv->pooled, cv->argmax);
        in = cv->pooled;
    }
    /* The pooled features (n, 16, 4, 4) are the flattened (n, 256) input. */
    sb_dense_forward(&p->dense, m, in, n);
    p->n = n;
}

static sb_status cnn_forward(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             float grad_scale, double *loss_sum)
{
    struct cnn *p = m->impl;
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "cnn: batch %d outside 1..%d", n, m->max_batch);
    cnn_layers(m, x, n);
    m->be->softmax_xent(p->dense.act[CNN_DENSE], y, n, m->n_classes, grad_scale,
                        p->dense.dlogits, loss_sum);
    return SB_OK;
}

static sb_status cnn_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    struct cnn *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int n = p->n;
    /* fc3..fc1, then the gradient of the flattened features into conv2's
     * pooled-gradient buffer. Those features are max-pooled ReLU outputs:
     * their ReLU is undone below, on the un-pooled activations. */
    sb_dense_backward(&p->dense, m, p->conv[CNN_CONVS - 1].dpooled, ready, ctx);
    for (int l = CNN_CONVS - 1; l >= 0; l--) {
        struct cnn_conv *cv = &p->conv[l];
        int positions = n * cv->oh * cv->ow, fan_in = cv->c_in * CNN_K * CNN_K;
        sb_model_layer_begin(m, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out, 1);
        /* pooled grad -> ReLU output grad -> pre-activation grad, NCHW */
        be->maxpool2_backward(cv->dpooled, cv->argmax, n, cv->c_out, cv->oh, cv->ow, p->dact);
        be->relu_backward(p->dact, cv->act, (size_t)positions * cv->c_out);
        /* NCHW (n, out, oh*ow) -> (n*oh*ow, out) */
        be->transpose_batched(p->dact, n, cv->c_out, cv->oh * cv->ow, p->nhwc);
        /* dW (out, fan_in) = dnhwc^T (out, n*oh*ow) . cols (n*oh*ow, fan_in) */
        be->sgemm(1, 0, cv->c_out, fan_in, positions, 1.0f, p->nhwc, cv->c_out, cv->cols,
                  fan_in, 0.0f, m->grads + cv->w_off, fan_in);
        be->bias_grad(m->grads + cv->b_off, p->nhwc, positions, cv->c_out);
        if (ready) ready(ctx, cv->w_off, (size_t)cv->c_out * fan_in + cv->c_out);
        if (l == 0) break; /* no gradient for the input images */
        /* dcols (n*oh*ow, fan_in) = dnhwc (n*oh*ow, out) . W (out, fan_in) */
        be->sgemm(0, 0, positions, fan_in, cv->c_out, 1.0f, p->nhwc, cv->c_out,
                  m->params + cv->w_off, fan_in, 0.0f, p->dcols, fan_in);
        be->col2im(p->dcols, n, cv->c_in, cv->h, cv->w, CNN_K, p->conv[l - 1].dpooled);
    }
    return SB_OK;
}

static sb_status cnn_predict(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             long *correct)
{
    struct cnn *p = m->impl;
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "cnn: batch %d outside 1..%d", n, m->max_batch);
    cnn_layers(m, x, n);
    m->be->count_correct(p->dense.act[CNN_DENSE], y, n, m->n_classes, correct);
    return SB_OK;
}

const struct sb_workload_ops sb_workload_cnn = {
    .name = "cnn",
    .create = cnn_create,
    .forward = cnn_forward,
    .backward = cnn_backward,
    .predict = cnn_predict,
    .destroy = cnn_destroy,
};
