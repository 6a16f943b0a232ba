/* Shared between the CUDA backend's translation units (C++ only): the
 * thread's context, the sticky error that void ops record, launch geometry.
 * Not part of the public interface; see cuda.h for that. */
#ifndef SB_CUDA_INTERNAL_H
#define SB_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* Threads per block for elementwise kernels. */
#define SB_CUDA_THREADS 256

/* The calling thread's stream, created on first use (device 0 unless
 * sb_cuda_set_device was called); 0 (the legacy stream) if creation failed,
 * in which case the failure is already recorded as the sticky error. */
cudaStream_t sb_cuda_thread_stream(void);

/* Records the first failure of a void op on this thread ("<what>: <why>");
 * the next sync() returns it as SB_ERR_DEVICE. Later failures are dropped
 * so that the root cause is reported. */
void sb_cuda_fail(const char *what, const char *why);

/* Checks the last kernel launch (configuration errors only; faults during
 * execution surface in sync()). */
void sb_cuda_check_launch(const char *kernel);

/* Blocks for n items at SB_CUDA_THREADS each, capped for grid-stride loops. */
static inline unsigned sb_cuda_blocks(size_t n)
{
    size_t b = (n + SB_CUDA_THREADS - 1) / SB_CUDA_THREADS;
    if (b == 0) b = 1;
    return (unsigned)(b < 65535u * 16u ? b : 65535u * 16u);
}

/* The cnn workload's ops (cuda_conv.cu); semantics in backend.h. */
void sb_cuda_im2col(const float *x, int n, int c, int h, int w, int k, float *cols);
void sb_cuda_col2im(const float *dcols, int n, int c, int h, int w, int k, float *dx);
void sb_cuda_transpose_batched(const float *x, int batch, int rows, int cols, float *y);
void sb_cuda_maxpool2_forward(const float *x, int n, int c, int h, int w, float *y,
                              int32_t *argmax);
void sb_cuda_maxpool2_backward(const float *dy, const int32_t *argmax, int n, int c,
                               int h, int w, float *dx);

/* The calling thread's cuBLAS handle, bound to its stream; NULL if the
 * context could not be created (the failure is recorded). */
cublasHandle_t sb_cuda_thread_blas(void);

/* The vit workload's ops (cuda_nn.cu); semantics in backend.h. */
extern "C" {
void sb_cuda_sgemm_strided_batched(int trans_a, int trans_b, int m, int n, int k, float alpha,
                                   const float *a, int lda, long stride_a, const float *b,
                                   int ldb, long stride_b, float beta, float *c, int ldc,
                                   long stride_c, int batch);
void sb_cuda_layernorm_forward(const float *x, const float *gamma, const float *beta, int rows,
                               int cols, float eps, float *y, float *mean, float *rstd);
void sb_cuda_layernorm_backward(const float *dy, const float *x, const float *gamma,
                                const float *mean, const float *rstd, int rows, int cols,
                                float *dx, float *dgamma, float *dbeta);
void sb_cuda_gelu_forward(const float *x, float *y, size_t n);
void sb_cuda_gelu_backward(float *dy, const float *x, size_t n);
void sb_cuda_softmax_rows(float *x, int rows, int cols);
void sb_cuda_softmax_rows_backward(float *dy, const float *y, int rows, int cols);
void sb_cuda_transpose_0213(const float *x, int a, int b, int c, int d, float *y);
void sb_cuda_patchify(const float *x, int n, int side, int p, float *y);
void sb_cuda_copy2d(float *dst, long dst_stride, const float *src, long src_stride, int rows,
                    int cols);
void sb_cuda_zero(float *y, size_t n);
}

#endif
