/* Tensor operations behind one interface, one implementation per device.
 *
 * A workload computes only through these ops, so the same model code runs on
 * the CPU (OpenBLAS SGEMM, plain C loops) and, later, CUDA (cuBLAS and
 * kernels). All matrices are row-major float32 in the backend's memory; the
 * shapes are given as (rows, cols). Ops that cannot fail return void; a
 * device backend reports asynchronous failures from sync(). */
#ifndef SB_BACKEND_H
#define SB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct sb_backend_ops {
    const char *name; /* "cpu", "cuda" */

    /* Memory in the backend's address space. alloc returns zeroed memory;
     * SB_ERR_NOMEM on failure. */
    sb_status (*alloc)(void **ptr, size_t bytes);
    void (*free)(void *ptr);
    /* Copies `bytes` from host memory to backend memory and back. */
    sb_status (*upload)(void *dst, const void *host_src, size_t bytes);
    sb_status (*download)(void *host_dst, const void *src, size_t bytes);
    /* Waits for queued work; returns the first asynchronous error. */
    sb_status (*sync)(void);

    /* C (m, n) = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T
     * (trans_a/trans_b non-zero for the transpose), row-major with leading
     * dimensions lda, ldb, ldc, as BLAS SGEMM. */
    void (*sgemm)(int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc);
    /* y (rows, cols) += bias (cols) broadcast over rows. */
    void (*add_bias)(float *y, const float *bias, int rows, int cols);
    /* y = max(y, 0) elementwise over n values, in place. */
    void (*relu_forward)(float *y, size_t n);
    /* dy = y > 0 ? dy : 0, where y is the ReLU output. */
    void (*relu_backward)(float *dy, const float *y, size_t n);
    /* db (cols) = sum over rows of dy (rows, cols). */
    void (*bias_grad)(float *db, const float *dy, int rows, int cols);
    /* Softmax cross-entropy of logits (rows, cols) against labels (rows):
     * writes dlogits = (softmax(logits) - onehot(labels)) * scale and returns
     * the sum over rows of -log softmax[label] in *loss_sum (host). */
    void (*softmax_xent)(const float *logits, const uint8_t *labels, int rows,
                         int cols, float scale, float *dlogits,
                         double *loss_sum);
    /* Number of rows whose arg-max over cols equals the label (host). */
    void (*count_correct)(const float *logits, const uint8_t *labels, int rows,
                          int cols, long *correct);
    /* SGD with momentum, PyTorch's form: v = mu * v + g; p -= lr * v. */
    void (*sgd_momentum)(float *p, float *v, const float *g, size_t n,
                         float lr, float mu);
    /* dst[i] = src[i] for i < n, both backend memory. */
    void (*copy)(float *dst, const float *src, size_t n);
    /* y[i] += x[i] for i < n (used by device-side reductions). */
    void (*add)(float *y, const float *x, size_t n);
    /* y[i] *= a for i < n. */
    void (*scale)(float *y, float a, size_t n);
};

/* The backend registered under `name`, or NULL. */
const struct sb_backend_ops *sb_backend_find(const char *name);

/* The CPU backend (always present). */
extern const struct sb_backend_ops sb_backend_cpu;

/* Sets the number of BLAS threads of this process (OpenBLAS); n >= 1. */
void sb_backend_cpu_set_threads(int n);

/* Version string of the BLAS library ("OpenBLAS 0.3.21 ..."). */
const char *sb_backend_cpu_blas_version(void);

#endif
