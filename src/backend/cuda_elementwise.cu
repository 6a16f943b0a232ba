/* The CUDA backend's elementwise ops (backend.h): bias, ReLU, the bias
 * gradient's column reduction, the optimizers (SGD with momentum, Adam),
 * copy, add, scale, 16-bit rounding, gradient unscaling and the batch
 * gather, as grid-stride kernels on the calling thread's stream (cuda.cu).
 * None waits, except unscale_check, whose flag the loss scaler reads. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

extern "C" {
#include "backend/backend.h"
#include "data/mnist.h"
}
#include "backend/cuda_internal.h"

#define GRID_STRIDE(i, n)                                                            \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                       \
    do {                                                                             \
        if (!sb_cuda_ensure_ctx()) return;                                           \
        if ((n) == 0) return;                                                        \
        kernel<<<sb_cuda_blocks(n), SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(__VA_ARGS__); \
        sb_cuda_check_launch(#kernel);                                               \
    } while (0)

/* Test-only fault injection, so that the error path of a step can be
 * exercised on a real GPU: with STRATBENCH_TEST_CUDA_FAULT=N (N >= 1) in
 * the environment, a thread's N-th optimizer call is launched with an
 * invalid block size, so it fails at launch exactly as a kernel without an
 * image for the GPU does (cudaErrorNoKernelImageForDevice), through
 * sb_cuda_check_launch. Read once per process; 0 = off. */
static long fault_at(void)
{
    static long at = -1;
    if (at < 0) {
        const char *v = getenv("STRATBENCH_TEST_CUDA_FAULT");
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        at = v && end != v && *end == '\0' && n > 0 ? n : 0;
    }
    return at;
}

__global__ void k_add_bias(float *y, const float *bias, size_t total, int cols)
{
    GRID_STRIDE(i, total) y[i] += bias[i % (size_t)cols];
}

__global__ void k_relu_forward(float *y, size_t n)
{
    GRID_STRIDE(i, n) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

__global__ void k_relu_backward(float *dy, const float *y, size_t n)
{
    GRID_STRIDE(i, n) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* Column sums of dy (rows, cols), a reduction over rows per column: block
 * (x, y) owns columns [32x, 32x + 32) and row chunk y of gridDim.y; its
 * 32 x 8 threads read a row's 32 columns side by side (coalesced), each
 * thread row summing every 8th row of the chunk, then the 8 partial sums of
 * a column meet in shared memory. out[y * cols + c] = the chunk's sum (out
 * = db directly when gridDim.y = 1). Fixed order: deterministic. Replaces
 * one thread per column, which gave the cnn's conv1 six threads summing
 * 36,864 rows each. */
__global__ void k_bias_grad_partial(const float *dy, int rows, int cols, float *out)
{
    __shared__ float part[BIAS_TILE_ROWS][BIAS_TILE_COLS + 1];
    int c = blockIdx.x * BIAS_TILE_COLS + threadIdx.x;
    int per_chunk = (rows + gridDim.y - 1) / gridDim.y;
    int r0 = blockIdx.y * per_chunk, r1 = min(rows, r0 + per_chunk);
    float s = 0.0f;
    if (c < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += BIAS_TILE_ROWS) s += dy[(size_t)r * cols + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = 0.0f;
        for (int i = 0; i < BIAS_TILE_ROWS; i++) t += part[i][threadIdx.x];
        out[(size_t)blockIdx.y * cols + c] = t;
    }
}

/* db[c] = sum over the chunks of partial[j * cols + c], in chunk order. */
__global__ void k_bias_grad_final(const float *partial, int chunks, int cols, float *db)
{
    GRID_STRIDE(c, (size_t)cols)
    {
        float t = 0.0f;
        for (int j = 0; j < chunks; j++) t += partial[(size_t)j * cols + c];
        db[c] = t;
    }
}

__global__ void k_sgd_momentum(float *p, float *v, const float *g, size_t n, float lr, float mu)
{
    GRID_STRIDE(i, n)
    {
        float vi = mu * v[i] + g[i];
        v[i] = vi;
        p[i] -= lr * vi;
    }
}

__global__ void k_adam(float *p, float *m, float *v, const float *g, size_t n, float b1,
                       float b2, float eps, float step_size, float bc2_sqrt)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

__global__ void k_add(float *y, const float *x, size_t n) { GRID_STRIDE(i, n) y[i] += x[i]; }

__global__ void k_scale(float *y, float a, size_t n) { GRID_STRIDE(i, n) y[i] *= a; }

/* fmt 0: fp16, 1: bf16 (core/half.h's enum), round to nearest even. */
__global__ void k_round_half(float *x, size_t n, int fmt)
{
    GRID_STRIDE(i, n)
    x[i] = fmt ? __bfloat162float(__float2bfloat16_rn(x[i])) : __half2float(__float2half_rn(x[i]));
}

/* *flag = 1 where any x[i] is not finite; x[i] *= a. */
__global__ void k_unscale_check(float *x, float a, size_t n, int *flag)
{
    GRID_STRIDE(i, n)
    {
        if (!isfinite(x[i])) *flag = 1;
        x[i] *= a;
    }
}

__global__ void k_gather(float *x, uint8_t *y, const uint8_t *pixels, const uint8_t *labels,
                         const int32_t *idx, int n, int dim)
{
    GRID_STRIDE(i, (size_t)n * dim)
    {
        size_t s = i / (size_t)dim, j = i % (size_t)dim;
        size_t src = (size_t)idx[s];
        /* Same float expression as sb_mnist_gather: bit-identical values. */
        x[i] = ((float)pixels[src * dim + j] / 255.0f - SB_MNIST_MEAN) / SB_MNIST_STD;
        if (j == 0) y[s] = labels[src];
    }
}

void sb_cuda_add_bias(float *y, const float *bias, int rows, int cols)
{
    size_t total = (size_t)rows * cols;
    LAUNCH(k_add_bias, total, y, bias, total, cols);
}

void sb_cuda_relu_forward(float *y, size_t n) { LAUNCH(k_relu_forward, n, y, n); }

void sb_cuda_relu_backward(float *dy, const float *y, size_t n)
{
    LAUNCH(k_relu_backward, n, dy, y, n);
}

/* Row chunks for the column reduction: enough blocks to fill the GPU when
 * there are few columns, at least 64 rows per chunk, and partial sums that
 * fit the thread's bias scratch (BIAS_TARGET_BLOCKS x 32 floats). */
static int bias_chunks(int rows, int cols)
{
    int xblocks = (cols + BIAS_TILE_COLS - 1) / BIAS_TILE_COLS;
    int chunks = BIAS_TARGET_BLOCKS / xblocks;
    if (chunks > rows / 64) chunks = rows / 64;
    if (chunks > BIAS_MAX_CHUNKS) chunks = BIAS_MAX_CHUNKS;
    return chunks < 1 ? 1 : chunks;
}

void sb_cuda_bias_grad(float *db, const float *dy, int rows, int cols)
{
    if (!sb_cuda_ensure_ctx() || cols <= 0) return;
    int chunks = rows > 0 ? bias_chunks(rows, cols) : 1;
    dim3 grid((unsigned)((cols + BIAS_TILE_COLS - 1) / BIAS_TILE_COLS), (unsigned)chunks);
    dim3 block(BIAS_TILE_COLS, BIAS_TILE_ROWS);
    float *out = chunks == 1 ? db : sb_cuda_ctx.bias_scratch;
    k_bias_grad_partial<<<grid, block, 0, sb_cuda_ctx.stream>>>(dy, rows, cols, out);
    sb_cuda_check_launch("k_bias_grad_partial");
    if (chunks > 1)
        LAUNCH(k_bias_grad_final, (size_t)cols, sb_cuda_ctx.bias_scratch, chunks, cols, db);
}

void sb_cuda_sgd_momentum(float *p, float *v, const float *g, size_t n, float lr, float mu)
{
    static thread_local long calls;
    if (fault_at() && ++calls == fault_at()) { /* test-only: see fault_at() */
        if (!sb_cuda_ensure_ctx() || n == 0) return;
        k_sgd_momentum<<<1, 4096, 0, sb_cuda_ctx.stream>>>(p, v, g, n, lr, mu); /* > 1024 threads */
        sb_cuda_check_launch("k_sgd_momentum (STRATBENCH_TEST_CUDA_FAULT)");
        return;
    }
    LAUNCH(k_sgd_momentum, n, p, v, g, n, lr, mu);
}

void sb_cuda_adam(float *p, float *m, float *v, const float *g, size_t n, float b1, float b2,
                  float eps, float step_size, float bc2_sqrt)
{
    LAUNCH(k_adam, n, p, m, v, g, n, b1, b2, eps, step_size, bc2_sqrt);
}

/* Device memory stays allocated: a partial cudaFree does not exist. */
void sb_cuda_discard(void *ptr, size_t bytes)
{
    (void)ptr;
    (void)bytes;
}

void sb_cuda_copy(float *dst, const float *src, size_t n)
{
    if (!sb_cuda_ensure_ctx() || n == 0 || dst == src) return;
    cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    sb_cuda_ctx.stream);
    if (e != cudaSuccess) sb_cuda_fail("cudaMemcpyAsync (copy)", cudaGetErrorString(e));
}

void sb_cuda_add(float *y, const float *x, size_t n) { LAUNCH(k_add, n, y, x, n); }

void sb_cuda_scale(float *y, float a, size_t n) { LAUNCH(k_scale, n, y, a, n); }

void sb_cuda_round_half(float *x, size_t n, int fmt) { LAUNCH(k_round_half, n, x, n, fmt); }

/* The flag lives in the pinned result buffer's int view: one launch, one
 * read back (the step waits for it, as the loss scaler's decision must). */
void sb_cuda_unscale_check(float *x, float a, size_t n, int *found)
{
    if (!sb_cuda_ensure_ctx() || n == 0) return;
    int *flag = (int *)sb_cuda_ctx.result_dev;
    cudaError_t e = cudaMemsetAsync(flag, 0, sizeof(int), sb_cuda_ctx.stream);
    if (e == cudaSuccess) {
        k_unscale_check<<<sb_cuda_blocks(n), SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(x, a, n,
                                                                                       flag);
        sb_cuda_check_launch("k_unscale_check");
        e = cudaMemcpyAsync(sb_cuda_ctx.result_host, flag, sizeof(int), cudaMemcpyDeviceToHost,
                            sb_cuda_ctx.stream);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(sb_cuda_ctx.stream);
    if (e != cudaSuccess) {
        sb_cuda_fail("unscaling the gradients", cudaGetErrorString(e));
        return;
    }
    if (*(int *)sb_cuda_ctx.result_host) *found = 1;
}

void sb_cuda_gather(float *x, uint8_t *y, const uint8_t *pixels, const uint8_t *labels,
                    const int32_t *idx, int n, int dim)
{
    LAUNCH(k_gather, (size_t)n * dim, x, y, pixels, labels, idx, n, dim);
}
