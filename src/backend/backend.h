/* Tensor operations behind one interface, one implementation per device.
 *
 * A workload computes only through these ops, so the same model code runs on
 * the CPU (OpenBLAS SGEMM, plain C loops; src/backend/cpu.c) and on CUDA
 * (cuBLAS and kernels; src/backend/cuda.cu, built when configure.py finds
 * the toolkit). All matrices are row-major float32 in the backend's memory; the
 * shapes are given as (rows, cols). Ops that cannot fail return void; a
 * device backend reports asynchronous failures from sync(). */
#ifndef SB_BACKEND_H
#define SB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct sb_backend_ops {
    const char *name; /* "cpu", "cuda" */
    /* 1 when backend memory is host memory (cpu): replicas read the data
     * set where it was loaded and time phases with host clocks. 0 for a
     * device (cuda): each replica uploads the data set once and steps on
     * the device path (strategies/shared/replica_device.c). */
    int host_memory;
    /* Sets how many host threads one op of this process may use (cpu: the
     * threads of its pool, which split the large GEMMs and run
     * parallel_for, n >= 1). NULL where ops do not run on host threads. */
    void (*set_threads)(int n);
    /* Runs fn(ctx, i) for every i in [0, n) on set_threads' threads, BLAS
     * calls inside single-threaded; items write disjoint memory; returns
     * when all have (cpu: src/backend/cpu_pool.h). NULL on a backend whose
     * ops do not run on host threads (cuda): the caller loops. */
    void (*parallel_for)(int n, void (*fn)(void *ctx, int i), void *ctx);

    /* Memory in the backend's address space. alloc returns zeroed memory;
     * SB_ERR_NOMEM on failure. */
    sb_status (*alloc)(void **ptr, size_t bytes);
    void (*free)(void *ptr);
    /* Copies `bytes` from host memory to backend memory and back. */
    sb_status (*upload)(void *dst, const void *host_src, size_t bytes);
    sb_status (*download)(void *host_dst, const void *src, size_t bytes);
    /* Waits for queued work; returns the first asynchronous error. */
    sb_status (*sync)(void);
    /* Returns, without waiting, the first failure recorded since the last
     * check or sync: a void op whose launch or library call failed, or a
     * fault the device has already reported for earlier work (SB_ERR_DEVICE
     * with the message). Replicas call it after forward and after the
     * optimizer of every step, so a failing GPU stops the run at once
     * instead of training on garbage. Always SB_OK on cpu. */
    sb_status (*check)(void);

    /* C (m, n) = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T
     * (trans_a/trans_b non-zero for the transpose), row-major with leading
     * dimensions lda, ldb, ldc, as BLAS SGEMM. */
    void (*sgemm)(int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc);
    /* sgemm with 16-bit inputs in format fmt (core/half.h's enum) and fp32
     * accumulation and output: A and B, float buffers holding 16-bit
     * values (--precision bf16|fp16), are converted to 16-bit copies and
     * multiplied by the tensor cores (cuda: cublasGemmEx, CUDA_R_16BF or
     * CUDA_R_16F inputs, CUBLAS_COMPUTE_32F). NULL where sgemm on the
     * rounded values already is that arithmetic (cpu: fp32 products of
     * 16-bit values are exact, the sums fp32). */
    void (*gemm_half)(int fmt, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc);
    /* y (rows, cols) += bias (cols) broadcast over rows. */
    void (*add_bias)(float *y, const float *bias, int rows, int cols);
    /* y = max(y, 0) elementwise over n values, in place. */
    void (*relu_forward)(float *y, size_t n);
    /* dy = y > 0 ? dy : 0, where y is the ReLU output. */
    void (*relu_backward)(float *dy, const float *y, size_t n);
    /* db (cols) = sum over rows of dy (rows, cols). */
    void (*bias_grad)(float *db, const float *dy, int rows, int cols);
    /* Softmax cross-entropy of logits (rows, cols) against labels (rows):
     * writes dlogits = (softmax(logits) - onehot(labels)) * scale and ADDS
     * the sum over rows of -log softmax[label] to *loss_acc, one double in
     * backend memory (host memory on cpu). Nothing waits: a device keeps
     * the running sum on the device and the caller reads it when it needs
     * it (once per epoch), so a step has no host synchronisation. */
    void (*softmax_xent)(const float *logits, const uint8_t *labels, int rows,
                         int cols, float scale, float *dlogits,
                         double *loss_acc);
    /* Number of rows whose arg-max over cols equals the label (host). */
    void (*count_correct)(const float *logits, const uint8_t *labels, int rows,
                          int cols, long *correct);
    /* SGD with momentum, PyTorch's form: v = mu * v + g; p -= lr * v. */
    void (*sgd_momentum)(float *p, float *v, const float *g, size_t n,
                         float lr, float mu);
    /* Adam (Kingma & Ba 2015, Algorithm 1) in PyTorch's form (torch.optim.Adam,
     * single-tensor path): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
     * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps), where for step t >= 1
     * step_size = lr / (1 - b1^t) and bc2_sqrt = sqrt(1 - b2^t), the bias
     * corrections, computed by the caller (strategies/shared/optimizer.c). m and v
     * are the first and second moments (n floats each). */
    void (*adam)(float *p, float *m, float *v, const float *g, size_t n, float b1,
                 float b2, float eps, float step_size, float bc2_sqrt);
    /* Tells the backend that the contents of ptr[0, bytes) are no longer
     * needed: the next write defines them again and until then they read
     * as any value (cpu: the whole pages inside the range go back to the
     * kernel, madvise(MADV_DONTNEED), so a sharded strategy's freed copies
     * leave the resident set; cuda: nothing, device memory stays
     * allocated). ptr must lie inside one alloc'd block. */
    void (*discard)(void *ptr, size_t bytes);
    /* dst[i] = src[i] for i < n, both backend memory. */
    void (*copy)(float *dst, const float *src, size_t n);
    /* y[i] += x[i] for i < n (used by device-side reductions). */
    void (*add)(float *y, const float *x, size_t n);
    /* y[i] *= a for i < n. */
    void (*scale)(float *y, float a, size_t n);
    /* x[i] = x[i] rounded to the 16-bit format fmt (an enum sb_half_format
     * of core/half.h: fp16 or bf16; round to nearest, ties to even) and
     * widened back, for i < n: a 16-bit value stored in a float buffer
     * (--precision bf16|fp16, strategies/shared/precision.h). fp16 values
     * beyond its range become +-inf, as a conversion on a device does. */
    void (*round_half)(float *x, size_t n, int fmt);
    /* Sets *found to 1 when any of x[0..n) is inf or NaN (leaves it
     * otherwise), then x[i] *= a for i < n: a loss scaler's unscale and
     * check in one pass (PyTorch's _amp_foreach_non_finite_check_and_unscale_).
     * found is host memory. */
    void (*unscale_check)(float *x, float a, size_t n, int *found);
    /* Batch gather from a dataset held in backend memory (uploaded once):
     * for i < n, x[i] (dim floats) = (pixels[idx[i]] / 255 - 0.1307) / 0.3081
     * elementwise, as sb_mnist_gather, and y[i] = labels[idx[i]]. pixels
     * (samples, dim) and labels (samples) are raw uint8; idx (n) int32;
     * x (n, dim), y (n); all in backend memory. */
    void (*gather)(float *x, uint8_t *y, const uint8_t *pixels,
                   const uint8_t *labels, const int32_t *idx, int n, int dim);

    /* --- convolution and pooling (the cnn workload) ----------------------
     * Images are NCHW: x (n, c, h, w) row-major, so element (s, ch, i, j)
     * is x[((s * c + ch) * h + i) * w + j]. */

    /* im2col for a k x k "valid" convolution, stride 1, no padding:
     * oh = h - k + 1, ow = w - k + 1. Writes cols (n * oh * ow, c * k * k),
     * row (s * oh + oy) * ow + ox, column (ch * k + ky) * k + kx, with
     * cols[row][col] = x[s][ch][oy + ky][ox + kx]. The column order is that
     * of a PyTorch Conv2d weight (out, c, k, k) flattened to (out, c*k*k),
     * so cols . W^T is the convolution output in (n, oh, ow, out) order. */
    void (*im2col)(const float *x, int n, int c, int h, int w, int k,
                   float *cols);
    /* The adjoint of im2col: dx (n, c, h, w) is overwritten with the sum,
     * over every (row, col) of dcols (n * oh * ow, c * k * k), of
     * dcols[row][col] added at the x element that im2col copied there. */
    void (*col2im)(const float *dcols, int n, int c, int h, int w, int k,
                   float *dx);
    /* Per-matrix transpose of a batch: x (batch, rows, cols) ->
     * y (batch, cols, rows), y[b][j][i] = x[b][i][j]. x and y must not
     * overlap. Turns (n, oh*ow, out) into NCHW (n, out, oh*ow) and back. */
    void (*transpose_batched)(const float *x, int batch, int rows, int cols,
                              float *y);
    /* 2x2 max-pooling, stride 2: x (n, c, h, w) -> y (n, c, h/2, w/2)
     * (odd trailing row/column dropped, as PyTorch's floor mode). argmax
     * (n, c, h/2, w/2), int32 in backend memory, receives for each output
     * the flat index into x (over all n*c*h*w) of the maximum; among equal
     * values the first in row-major window order wins. */
    void (*maxpool2_forward)(const float *x, int n, int c, int h, int w,
                             float *y, int32_t *argmax);
    /* Backward of maxpool2_forward: dx (n, c, h, w) is zeroed, then
     * dx[argmax[i]] += dy[i] for every i of dy (n, c, h/2, w/2). */
    void (*maxpool2_backward)(const float *dy, const int32_t *argmax, int n,
                              int c, int h, int w, float *dx);

    /* --- transformer ops (the vit workload; src/backend/cpu_nn.c,
     * src/backend/cuda_nn.cu). NULL on a backend without them. */

    /* Strided batched SGEMM: for i < batch, C_i = alpha * op(A_i) * op(B_i)
     * + beta * C_i with A_i = a + i * stride_a (floats), likewise B_i and
     * C_i; the rest as sgemm (row-major, op(X) = X^T when trans_x). As
     * cublasSgemmStridedBatched. Attention runs one per (sample, head). */
    void (*sgemm_strided_batched)(int trans_a, int trans_b, int m, int n, int k,
                                  float alpha, const float *a, int lda, long stride_a,
                                  const float *b, int ldb, long stride_b, float beta,
                                  float *c, int ldc, long stride_c, int batch);
    /* LayerNorm over each row of x (rows, cols) (Ba et al. 2016; PyTorch's
     * nn.LayerNorm: biased variance, eps inside the root):
     * y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps).
     * Saves mean (rows) and rstd (rows) for the backward. x and y may not
     * overlap. */
    void (*layernorm_forward)(const float *x, const float *gamma, const float *beta,
                              int rows, int cols, float eps, float *y, float *mean,
                              float *rstd);
    /* Backward of layernorm_forward from dy (rows, cols): ADDS dLoss/dx to
     * dx (so a residual stream's gradient accumulates in place) and
     * OVERWRITES dgamma (cols) and dbeta (cols) with the sums over rows.
     * With xhat = (x - mean) * rstd and g = dy * gamma:
     * dx += rstd * (g - mean_cols(g) - xhat * mean_cols(g * xhat)). */
    void (*layernorm_backward)(const float *dy, const float *x, const float *gamma,
                               const float *mean, const float *rstd, int rows, int cols,
                               float *dx, float *dgamma, float *dbeta);
    /* GELU, the exact (erf) form, PyTorch's nn.GELU() default (Hendrycks &
     * Gimpel 2016): y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) for n
     * values, then x is OVERWRITTEN with the derivative GELU'(x) = Phi(x)
     * + x * phi(x), which the backward needs instead of x (both come from
     * one evaluation of Phi and phi: the backward computes neither again).
     * x and y may not overlap. */
    void (*gelu_forward)(float *x, float *y, size_t n);
    /* dy *= dgelu in place: the GELU's backward, dgelu (n) the derivative
     * gelu_forward left in its input's place. */
    void (*gelu_backward)(float *dy, const float *dgelu, size_t n);
    /* Softmax of each row of x (rows, cols), in place (max subtracted
     * first). */
    void (*softmax_rows)(float *x, int rows, int cols);
    /* Backward of softmax_rows in place: dy (rows, cols) becomes
     * dx = y * (dy - sum_cols(dy * y)), y the softmax output. */
    void (*softmax_rows_backward)(float *dy, const float *y, int rows, int cols);
    /* Swaps the two middle axes: x (a, b, c, d) -> y (a, c, b, d),
     * y[i][k][j][l] = x[i][j][k][l]. Splits attention heads,
     * (n, tokens, heads, head_dim) -> (n, heads, tokens, head_dim), and
     * with b and c exchanged merges them back. x and y may not overlap. */
    void (*transpose_0213)(const float *x, int a, int b, int c, int d, float *y);
    /* Cuts images x (n, side, side) into non-overlapping p x p patches:
     * y (n, (side/p)^2, p*p), patch (pr, pc) at index pr * side/p + pc,
     * its pixels in (row, col) order: y[s][pr*g + pc][i*p + j] =
     * x[s][(pr*p + i) * side + pc*p + j], g = side / p. p divides side. */
    void (*patchify)(const float *x, int n, int side, int p, float *y);
    /* 2-D copy: for r < rows, dst[r * dst_stride + j] = src[r * src_stride
     * + j] for j < cols (strides in floats; src_stride 0 repeats one row,
     * as cudaMemcpy2D with a zero pitch would not). */
    void (*copy2d)(float *dst, long dst_stride, const float *src, long src_stride,
                   int rows, int cols);
    /* y[i] = 0 for i < n. */
    void (*zero)(float *y, size_t n);
    /* Fused attention of n samples x heads, q, k, v (n, T, ldq) in token
     * layout (head h of sample s: rows s T .. s T + T - 1, columns h hd ..
     * h hd + hd - 1): probs (n, heads, T, T) = softmax_rows(scale q k^T)
     * per head, and ctx = probs v in token layout likewise (rows ldc
     * apart). The same values as the batched path (the heads split,
     * sgemm_strided_batched, softmax_rows): each product element one FMA
     * chain over the inner dimension in order, times alpha at the end.
     * Returns 1 when done, 0 when the backend cannot take the shape
     * (nothing written; the caller runs the batched path); n = 0 asks
     * which, computing nothing. Optional: NULL on a backend without it
     * (cuda). */
    int (*attention_forward)(const float *q, const float *k, const float *v, int ldq, int n,
                             int heads, int T, int hd, float scale, float *probs, float *ctx,
                             int ldc);
    /* Its backward from dctx in token layout (rows ldd apart), q, k, v and
     * probs as the forward's: dq, dk, dv written in token layout (rows ldo
     * apart), dq = scale dS k, dk = scale dS^T q, dv = probs^T dctx, dS =
     * softmax_rows_backward(dctx v^T, probs); dprobs (n, heads, T, T)
     * scratch (left holding dS), or NULL: dS kept by the op for one head
     * at a time (the cpu: up to T = 64, where it returns 0 for NULL and
     * the caller passes a buffer). Returns as attention_forward. */
    int (*attention_backward)(const float *dctx, int ldd, const float *q, const float *k,
                              const float *v, int ldq, const float *probs, int n, int heads,
                              int T, int hd, float scale, float *dprobs, float *dq, float *dk,
                              float *dv, int ldo);
};

/* The backend registered under `name`, or NULL. */
const struct sb_backend_ops *sb_backend_find(const char *name);

/* The CPU backend (always present). */
extern const struct sb_backend_ops sb_backend_cpu;

/* Sets the compute threads of this process, n >= 1: the pool's
 * (cpu_pool.h), OpenBLAS's kept at 1. */
void sb_backend_cpu_set_threads(int n);

/* The compute threads this process uses now (the pool's). */
int sb_backend_cpu_threads(void);

/* Version string of the BLAS library ("OpenBLAS 0.3.21 ..."). */
const char *sb_backend_cpu_blas_version(void);

#endif
