/* A convolution block: a k x k "valid" convolution (stride 1), ReLU and 2x2
 * max-pooling, with activation slots, for the cnn workload.
 *
 * A convolution is im2col + one SGEMM over the whole batch:
 * cols (n*oh*ow, c*25) . W^T (c*25, out) = (n, oh*ow, out), plus the bias,
 * then a per-sample transpose to NCHW (n, out, oh*ow). */
#ifndef SB_CONV_H
#define SB_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/model_table.h"
#include "workloads/workload.h"

#define SB_CONV_K 5 /* kernel side */

struct sb_conv {
    int c_in, h, w;     /* input (n, c_in, h, w) */
    int c_out, oh, ow;  /* conv output (n, c_out, oh, ow); pooled (oh/2, ow/2) */
    int held;           /* whether the model (part) holds this block */
    size_t w_off, b_off;
    int rows;           /* max_batch */
    float *cols;        /* (slots, rows * oh * ow, c_in * 25) im2col of each slot's input */
    float *act;         /* (slots, rows, c_out, oh, ow) ReLU output, NCHW */
    float *pooled;      /* (slots, rows, c_out, oh/2, ow/2) */
    int32_t *argmax;    /* (slots, rows, c_out, oh/2, ow/2) flat indices into the slot's act */
    float *dpooled;     /* (rows, c_out, oh/2, ow/2) backward scratch: dLoss/d pooled */
    float *dnhwc;       /* split backward (sb_conv_alloc_split): (slots, rows * oh * ow,
                         * c_out) dLoss/d(pre-activation) kept by B for W */
};

/* Backward and GEMM scratch the held blocks share. */
struct sb_conv_scratch {
    float *nhwc;        /* (rows * the largest oh*ow*c_out) conv GEMM output / its grad */
    float *dact;        /* the same size: grad of a conv's ReLU output */
    float *dcols;       /* (rows * oh*ow, c_in*25), the largest of the blocks after the
                         * first: grad of their cols */
};

/* Sets the shapes of a block of c_in x side x side input and c_out
 * filters. */
void sb_conv_shape(struct sb_conv *cv, int c_in, int side, int c_out);

/* Adds the block to the tables as layer conv<index + 1> (whole-model layer
 * `index`, tensors 2 index and 2 index + 1: conv<index+1>.weight (c_out,
 * c_in, 5, 5) and .bias (c_out), replicated over tp ranks). */
void sb_conv_layout(struct sb_conv *cv, struct sb_model_table *t, int index);

/* Allocates the block's slots x max_batch activations and its dpooled;
 * adds their bytes to *bytes. SB_ERR_NOMEM (sb_conv_free releases what was
 * allocated). */
sb_status sb_conv_alloc(struct sb_conv *cv, const struct sb_backend_ops *be, int max_batch,
                        int slots, size_t *bytes);
void sb_conv_free(struct sb_conv *cv, const struct sb_backend_ops *be);

/* The bytes sb_conv_alloc allocates for the block (max_batch samples,
 * `slots` slots), sb_conv_alloc_split after it, and sb_conv_scratch_alloc
 * for the held blocks of conv[0, n): the cnn's part_size formula, from the
 * same counts the allocations use. */
double sb_conv_activation_bytes(const struct sb_conv *cv, int max_batch, int slots);
double sb_conv_split_bytes(const struct sb_conv *cv, int max_batch, int slots);
double sb_conv_scratch_bytes(const struct sb_conv *conv, int n, int max_batch);

/* Allocates the scratch for the held blocks of conv[0, n) (dcols for the
 * held ones after the first, which pass an input gradient back); adds the
 * bytes to *bytes. SB_ERR_NOMEM. */
sb_status sb_conv_scratch_alloc(struct sb_conv_scratch *s, const struct sb_conv *conv, int n,
                                const struct sb_backend_ops *be, int max_batch, size_t *bytes);
void sb_conv_scratch_free(struct sb_conv_scratch *s, const struct sb_backend_ops *be);

/* Forward of x (n, c_in, h, w) through the block into slot `slot`, with m's
 * parameters (calls m's layer hook first). */
void sb_conv_forward(struct sb_conv *cv, struct sb_conv_scratch *s, const struct sb_model *m,
                     int slot, const float *x, int n);

/* The pooled output of slot's last forward, (n, c_out, oh/2, ow/2). */
float *sb_conv_output(const struct sb_conv *cv, int slot);

/* Backward of slot's last forward (n from it) from dpooled (n, c_out, oh/2,
 * ow/2), dLoss/d(the pooled output): writes (accumulate 0) or adds (1)
 * the weight and bias gradients, calls ready(ctx, offset, count) (may be
 * NULL), and, when dx is not NULL, writes dLoss/d x (n, c_in, h, w) there.
 * The layer hook is called first. */
void sb_conv_backward(struct sb_conv *cv, struct sb_conv_scratch *s, struct sb_model *m,
                      int slot, int n, const float *dpooled, float *dx, int accumulate,
                      sb_grad_ready_fn ready, void *ctx);

/* Allocates, after sb_conv_alloc, the split backward's state (dnhwc for
 * `slots` slots); adds the bytes to *bytes. SB_ERR_NOMEM (sb_conv_free
 * releases it). */
sb_status sb_conv_alloc_split(struct sb_conv *cv, const struct sb_backend_ops *be, int slots,
                              size_t *bytes);

/* The input half of sb_conv_backward (zb-h1's B): the same dx (when not
 * NULL) from the same dpooled, keeping the pre-activation gradient in
 * slot's dnhwc; no parameter gradient. Calls the layer hook first. */
void sb_conv_backward_input(struct sb_conv *cv, struct sb_conv_scratch *s, struct sb_model *m,
                            int slot, int n, const float *dpooled, float *dx);

/* The weight half (zb-h1's W) after slot's sb_conv_backward_input: the
 * weight and bias gradients from the kept dnhwc and the slot's im2col
 * columns, written (accumulate 0) or added (1) exactly as sb_conv_backward
 * does; calls ready (may be NULL). */
void sb_conv_backward_weight(struct sb_conv *cv, struct sb_conv_scratch *s, struct sb_model *m,
                             int slot, int n, int accumulate, sb_grad_ready_fn ready, void *ctx);

#endif
