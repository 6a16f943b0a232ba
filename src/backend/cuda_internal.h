/* Shared between the CUDA backend's translation units (C++ only): the
 * thread's context, the sticky error that void ops record, launch geometry.
 * Not part of the public interface; see cuda.h for that. */
#ifndef SB_CUDA_INTERNAL_H
#define SB_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "core/status.h"
}

/* Threads per block for elementwise kernels. */
#define SB_CUDA_THREADS 256

/* The bias-gradient column reduction (k_bias_grad_partial in
 * cuda_elementwise.cu): a block is a tile of 32 columns x 8 thread rows; at
 * most 64 row chunks; the partial sums of at most BIAS_TARGET_BLOCKS
 * blocks live in the thread's bias_scratch (allocated in cuda.cu). */
#define BIAS_TILE_COLS 32
#define BIAS_TILE_ROWS 8
#define BIAS_MAX_CHUNKS 64
#define BIAS_TARGET_BLOCKS 264 /* ~2 per SM on an H100 (132 SMs) */

/* A thread's CUDA context: made by sb_cuda_set_device (or on first use,
 * device 0), released by sb_cuda_release_thread (cuda.cu). */
struct sb_cuda_thread_ctx {
    int device;             /* -1 before the first op or set_device */
    cudaStream_t stream;
    cublasHandle_t blas;
    double *scratch;        /* (scratch_cap) per-row values for reductions, device */
    size_t scratch_cap;
    double *result_dev;     /* one reduced value, device */
    double *result_host;    /* one reduced value, pinned host */
    float *bias_scratch;    /* (BIAS_TARGET_BLOCKS * 32) partial column sums, device */
    void *blas_workspace;   /* (SB_CUBLAS_WORKSPACE_BYTES) cuBLAS's, device */
    void *half[2];          /* gemm_half's 16-bit copies of A and B, device */
    size_t half_cap[2];     /* their capacities, in 16-bit elements */
    char error[256];        /* first failure of a void op, "" if none */
};

/* The calling thread's context (defined in cuda.cu). */
extern thread_local sb_cuda_thread_ctx sb_cuda_ctx;

/* Makes the calling thread's context on device 0 if it has none yet: 1
 * when it has one, 0 when it could not be made (the failure is recorded as
 * the sticky error). Every op calls it before using sb_cuda_ctx. */
int sb_cuda_ensure_ctx(void);

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

/* The core ops of the backend table (cuda.cu); semantics in backend.h.
 * Memory (cuda_memory.cu): */
sb_status sb_cuda_alloc(void **ptr, size_t bytes);
void sb_cuda_free(void *ptr);
sb_status sb_cuda_upload(void *dst, const void *host_src, size_t bytes);
sb_status sb_cuda_download(void *host_dst, const void *src, size_t bytes);
/* GEMMs (cuda_gemm.cu): */
void sb_cuda_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);
void sb_cuda_gemm_half(int fmt, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc);
/* Elementwise ops and optimizers (cuda_elementwise.cu): */
void sb_cuda_add_bias(float *y, const float *bias, int rows, int cols);
void sb_cuda_relu_forward(float *y, size_t n);
void sb_cuda_relu_backward(float *dy, const float *y, size_t n);
void sb_cuda_bias_grad(float *db, const float *dy, int rows, int cols);
void sb_cuda_sgd_momentum(float *p, float *v, const float *g, size_t n, float lr, float mu);
void sb_cuda_adam(float *p, float *m, float *v, const float *g, size_t n, float b1, float b2,
                  float eps, float step_size, float bc2_sqrt);
void sb_cuda_discard(void *ptr, size_t bytes);
void sb_cuda_copy(float *dst, const float *src, size_t n);
void sb_cuda_add(float *y, const float *x, size_t n);
void sb_cuda_scale(float *y, float a, size_t n);
void sb_cuda_round_half(float *x, size_t n, int fmt);
void sb_cuda_unscale_check(float *x, float a, size_t n, int *found);
void sb_cuda_gather(float *x, uint8_t *y, const uint8_t *pixels, const uint8_t *labels,
                    const int32_t *idx, int n, int dim);
/* Loss and accuracy (cuda_loss.cu): */
void sb_cuda_softmax_xent(const float *logits, const uint8_t *labels, int rows, int cols,
                          float scale, float *dlogits, double *loss_acc);
void sb_cuda_count_correct(const float *logits, const uint8_t *labels, int rows, int cols,
                           long *correct);

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
void sb_cuda_gelu_forward(float *x, float *y, size_t n);
void sb_cuda_gelu_backward(float *dy, const float *dgelu, size_t n);
void sb_cuda_softmax_rows(float *x, int rows, int cols);
void sb_cuda_softmax_rows_backward(float *dy, const float *y, int rows, int cols);
void sb_cuda_transpose_0213(const float *x, int a, int b, int c, int d, float *y);
void sb_cuda_patchify(const float *x, int n, int side, int p, float *y);
void sb_cuda_copy2d(float *dst, long dst_stride, const float *src, long src_stride, int rows,
                    int cols);
void sb_cuda_zero(float *y, size_t n);
}

#endif
