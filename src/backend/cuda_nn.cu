/* The CUDA backend's transformer ops (the vit workload): strided batched
 * SGEMM through cuBLAS, LayerNorm, GELU (erf), row softmax and their
 * backwards, the head transpose, patchify, 2-D copy. Semantics and layouts
 * are those of backend.h. Row ops give one warp a row (shuffle
 * reductions); column sums (LayerNorm's dgamma, dbeta) give one block a
 * column with a shared-memory tree, so every result is deterministic (no
 * atomics). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "backend/backend.h"
}
#include "backend/cuda_internal.h"

#define GRID_STRIDE(i, n)                                                            \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                       \
    do {                                                                             \
        cudaStream_t s_ = sb_cuda_thread_stream();                                   \
        if (!s_ || (n) == 0) return;                                                 \
        kernel<<<sb_cuda_blocks(n), SB_CUDA_THREADS, 0, s_>>>(__VA_ARGS__);           \
        sb_cuda_check_launch(#kernel);                                               \
    } while (0)

/* Row kernels: a warp per row, SB_CUDA_THREADS / 32 rows per block. */
#define WARP 32
#define ROWS_PER_BLOCK (SB_CUDA_THREADS / WARP)

#define LAUNCH_ROWS(kernel, rows, ...)                                               \
    do {                                                                             \
        cudaStream_t s_ = sb_cuda_thread_stream();                                   \
        if (!s_ || (rows) <= 0) return;                                              \
        unsigned blocks_ = (unsigned)(((rows) + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK); \
        kernel<<<blocks_, SB_CUDA_THREADS, 0, s_>>>(__VA_ARGS__);                     \
        sb_cuda_check_launch(#kernel);                                               \
    } while (0)

__device__ static float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* ------------------------------------------------------------ GEMM */

extern "C" void sb_cuda_sgemm_strided_batched(int trans_a, int trans_b, int m, int n, int k,
                                              float alpha, const float *a, int lda,
                                              long stride_a, const float *b, int ldb,
                                              long stride_b, float beta, float *c, int ldc,
                                              long stride_c, int batch)
{
    cublasHandle_t h = sb_cuda_thread_blas();
    if (!h || batch <= 0) return;
    /* Row-major C_i (m, n) = column-major C_i^T (n, m) = op(B_i)^T op(A_i)^T. */
    cublasStatus_t s = cublasSgemmStridedBatched(
        h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
        &alpha, b, ldb, stride_b, a, lda, stride_a, &beta, c, ldc, stride_c, batch);
    if (s != CUBLAS_STATUS_SUCCESS)
        sb_cuda_fail("cublasSgemmStridedBatched", cublasGetStatusString(s));
}

/* ------------------------------------------------------------ LayerNorm */

__global__ void k_layernorm_forward(const float *x, const float *gamma, const float *beta,
                                    int rows, int cols, float eps, float *y, float *mean,
                                    float *rstd)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * cols;
    float *yr = y + (size_t)r * cols;
    float s = 0.0f;
    for (int c = lane; c < cols; c += WARP) s += xr[c];
    float mu = warp_sum(s) / cols, q = 0.0f;
    for (int c = lane; c < cols; c += WARP) q += (xr[c] - mu) * (xr[c] - mu);
    float rs = rsqrtf(warp_sum(q) / cols + eps);
    for (int c = lane; c < cols; c += WARP) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

/* dx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma. */
__global__ void k_layernorm_backward_dx(const float *dy, const float *x, const float *gamma,
                                        const float *mean, const float *rstd, int rows,
                                        int cols, float *dx)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (r >= rows) return;
    const float *dyr = dy + (size_t)r * cols, *xr = x + (size_t)r * cols;
    float *dxr = dx + (size_t)r * cols;
    float mu = mean[r], rs = rstd[r], sg = 0.0f, sgx = 0.0f;
    for (int c = lane; c < cols; c += WARP) {
        float g = dyr[c] * gamma[c];
        sg += g;
        sgx += g * (xr[c] - mu) * rs;
    }
    sg = warp_sum(sg) / cols;
    sgx = warp_sum(sgx) / cols;
    for (int c = lane; c < cols; c += WARP)
        dxr[c] += rs * (dyr[c] * gamma[c] - sg - (xr[c] - mu) * rs * sgx);
}

/* One block per column: dgamma[c] = sum_r dy * xhat, dbeta[c] = sum_r dy,
 * a fixed tree over the block's threads (deterministic). */
__global__ void k_layernorm_backward_params(const float *dy, const float *x, const float *mean,
                                            const float *rstd, int rows, int cols,
                                            float *dgamma, float *dbeta)
{
    __shared__ float sg[SB_CUDA_THREADS], sb[SB_CUDA_THREADS];
    int c = blockIdx.x;
    float g = 0.0f, b = 0.0f;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        float d = dy[(size_t)r * cols + c];
        g += d * (x[(size_t)r * cols + c] - mean[r]) * rstd[r];
        b += d;
    }
    sg[threadIdx.x] = g;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s) {
            sg[threadIdx.x] += sg[threadIdx.x + s];
            sb[threadIdx.x] += sb[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        dgamma[c] = sg[0];
        dbeta[c] = sb[0];
    }
}

extern "C" void sb_cuda_layernorm_forward(const float *x, const float *gamma, const float *beta,
                                          int rows, int cols, float eps, float *y, float *mean,
                                          float *rstd)
{
    LAUNCH_ROWS(k_layernorm_forward, rows, x, gamma, beta, rows, cols, eps, y, mean, rstd);
}

extern "C" void sb_cuda_layernorm_backward(const float *dy, const float *x, const float *gamma,
                                           const float *mean, const float *rstd, int rows,
                                           int cols, float *dx, float *dgamma, float *dbeta)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s || rows <= 0 || cols <= 0) return;
    k_layernorm_backward_params<<<cols, SB_CUDA_THREADS, 0, s>>>(dy, x, mean, rstd, rows, cols,
                                                                 dgamma, dbeta);
    sb_cuda_check_launch("k_layernorm_backward_params");
    LAUNCH_ROWS(k_layernorm_backward_dx, rows, dy, x, gamma, mean, rstd, rows, cols, dx);
}

/* ------------------------------------------------------------ GELU */

/* y = GELU(x), then x = GELU'(x) (backend.h) */
__global__ void k_gelu_forward(float *x, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i], cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
        y[i] = v * cdf;
        x[i] = cdf + v * 0.3989422804014327f * expf(-0.5f * v * v);
    }
}

__global__ void k_gelu_backward(float *dy, const float *dgelu, size_t n)
{
    GRID_STRIDE(i, n) dy[i] *= dgelu[i];
}

extern "C" void sb_cuda_gelu_forward(float *x, float *y, size_t n)
{
    LAUNCH(k_gelu_forward, n, x, y, n);
}

extern "C" void sb_cuda_gelu_backward(float *dy, const float *dgelu, size_t n)
{
    LAUNCH(k_gelu_backward, n, dy, dgelu, n);
}

/* ------------------------------------------------------------ softmax */

__global__ void k_softmax_rows(float *x, int rows, int cols)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (r >= rows) return;
    float *xr = x + (size_t)r * cols;
    float mx = -INFINITY;
    for (int c = lane; c < cols; c += WARP) mx = fmaxf(mx, xr[c]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int c = lane; c < cols; c += WARP) {
        xr[c] = expf(xr[c] - mx);
        s += xr[c];
    }
    float inv = 1.0f / warp_sum(s);
    for (int c = lane; c < cols; c += WARP) xr[c] *= inv;
}

__global__ void k_softmax_rows_backward(float *dy, const float *y, int rows, int cols)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (r >= rows) return;
    float *dr = dy + (size_t)r * cols;
    const float *yr = y + (size_t)r * cols;
    float dot = 0.0f;
    for (int c = lane; c < cols; c += WARP) dot += dr[c] * yr[c];
    dot = warp_sum(dot);
    for (int c = lane; c < cols; c += WARP) dr[c] = yr[c] * (dr[c] - dot);
}

extern "C" void sb_cuda_softmax_rows(float *x, int rows, int cols)
{
    LAUNCH_ROWS(k_softmax_rows, rows, x, rows, cols);
}

extern "C" void sb_cuda_softmax_rows_backward(float *dy, const float *y, int rows, int cols)
{
    LAUNCH_ROWS(k_softmax_rows_backward, rows, dy, y, rows, cols);
}

/* ------------------------------------------------------------ reshapes */

/* y (a, c, b, d) from x (a, b, c, d): one thread per output element. */
__global__ void k_transpose_0213(const float *x, int a, int b, int c, int d, float *y)
{
    size_t total = (size_t)a * b * c * d;
    GRID_STRIDE(i, total)
    {
        int l = (int)(i % d);
        size_t rest = i / d;
        int j = (int)(rest % b);
        rest /= b;
        int k = (int)(rest % c);
        size_t ii = rest / c;
        y[i] = x[((ii * b + j) * c + k) * d + l];
    }
}

/* y (n, g*g, p*p) from x (n, side, side), g = side / p. */
__global__ void k_patchify(const float *x, int n, int side, int p, float *y)
{
    int g = side / p, pp = p * p;
    size_t total = (size_t)n * side * side;
    GRID_STRIDE(i, total)
    {
        int within = (int)(i % pp);
        size_t rest = i / pp;
        int patch = (int)(rest % ((size_t)g * g));
        size_t s = rest / ((size_t)g * g);
        int row = (patch / g) * p + within / p, col = (patch % g) * p + within % p;
        y[i] = x[(s * side + row) * side + col];
    }
}

__global__ void k_copy2d(float *dst, long dst_stride, const float *src, long src_stride,
                         int rows, int cols)
{
    size_t total = (size_t)rows * cols;
    GRID_STRIDE(i, total)
    {
        size_t r = i / cols, j = i % cols;
        dst[r * dst_stride + j] = src[r * src_stride + j];
    }
}

extern "C" void sb_cuda_transpose_0213(const float *x, int a, int b, int c, int d, float *y)
{
    LAUNCH(k_transpose_0213, (size_t)a * b * c * d, x, a, b, c, d, y);
}

extern "C" void sb_cuda_patchify(const float *x, int n, int side, int p, float *y)
{
    LAUNCH(k_patchify, (size_t)n * side * side, x, n, side, p, y);
}

extern "C" void sb_cuda_copy2d(float *dst, long dst_stride, const float *src, long src_stride,
                               int rows, int cols)
{
    LAUNCH(k_copy2d, (size_t)rows * cols, dst, dst_stride, src, src_stride, rows, cols);
}

extern "C" void sb_cuda_zero(float *y, size_t n)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s || n == 0) return;
    cudaError_t e = cudaMemsetAsync(y, 0, n * sizeof *y, s);
    if (e != cudaSuccess) sb_cuda_fail("cudaMemsetAsync", cudaGetErrorString(e));
}
