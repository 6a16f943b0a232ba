/* The CPU backend's transformer ops (cpu_nn.c), for the ops table in
 * cpu.c. Semantics, shapes and sources are those of backend.h. */
#ifndef SB_CPU_NN_H
#define SB_CPU_NN_H

#include <stddef.h>

/* Loops cblas_sgemm over the batch (OpenBLAS 0.3.21 has no batched SGEMM). */
void sb_cpu_sgemm_strided_batched(int trans_a, int trans_b, int m, int n, int k, float alpha,
                                  const float *a, int lda, long stride_a, const float *b,
                                  int ldb, long stride_b, float beta, float *c, int ldc,
                                  long stride_c, int batch);
/* Row statistics accumulate in double. */
void sb_cpu_layernorm_forward(const float *x, const float *gamma, const float *beta, int rows,
                              int cols, float eps, float *y, float *mean, float *rstd);
void sb_cpu_layernorm_backward(const float *dy, const float *x, const float *gamma,
                               const float *mean, const float *rstd, int rows, int cols,
                               float *dx, float *dgamma, float *dbeta);
/* y (rows, cols) += bias (cols) on every row; db (cols) = column sums of
 * dy (rows, cols), in row order (backend.h's add_bias and bias_grad). */
void sb_cpu_add_bias(float *y, const float *bias, int rows, int cols);
void sb_cpu_bias_grad(float *db, const float *dy, int rows, int cols);
void sb_cpu_gelu_forward(float *x, float *y, size_t n);
void sb_cpu_gelu_backward(float *dy, const float *dgelu, size_t n);
void sb_cpu_softmax_rows(float *x, int rows, int cols);
void sb_cpu_softmax_rows_backward(float *dy, const float *y, int rows, int cols);
void sb_cpu_transpose_0213(const float *x, int a, int b, int c, int d, float *y);
void sb_cpu_patchify(const float *x, int n, int side, int p, float *y);
void sb_cpu_copy2d(float *dst, long dst_stride, const float *src, long src_stride, int rows,
                   int cols);
void sb_cpu_zero(float *y, size_t n);
/* Fused attention (cpu_attention.c): 1 when done (n = 0: when it would
 * be), 0 when the shape or the CPU is beyond it (nothing written). */
int sb_cpu_attention_forward(const float *q, const float *k, const float *v, int ldq, int n,
                             int heads, int T, int hd, float scale, float *probs, float *ctx,
                             int ldc);
int sb_cpu_attention_backward(const float *dctx, int ldd, const float *q, const float *k,
                              const float *v, int ldq, const float *probs, int n, int heads,
                              int T, int hd, float scale, float *dprobs, float *dq, float *dk,
                              float *dv, int ldo);

#endif
