/* The CUDA backend's loss and accuracy (backend.h: softmax_xent,
 * count_correct) and the per-row scratch their reductions use: the row
 * values are summed on the device in row order, so totals do not depend
 * on scheduling; only count_correct waits (its count lands in host
 * memory). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "backend/backend.h"
#include "backend/cuda.h"
}
#include "backend/cuda_internal.h"

#define GRID_STRIDE(i, n)                                                            \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

/* Grows the thread's per-row scratch to at least n doubles. */
static int ensure_scratch(size_t n)
{
    if (!sb_cuda_ensure_ctx()) return 0;
    if (sb_cuda_ctx.scratch_cap >= n) return 1;
    cudaFree(sb_cuda_ctx.scratch);
    sb_cuda_ctx.scratch = NULL;
    sb_cuda_ctx.scratch_cap = 0;
    cudaError_t e = cudaMalloc((void **)&sb_cuda_ctx.scratch, n * sizeof(double));
    if (e != cudaSuccess) {
        sb_cuda_fail("cudaMalloc (reduction scratch)", cudaGetErrorString(e));
        return 0;
    }
    sb_cuda_ctx.scratch_cap = n;
    return 1;
}

/* One warp per row: max, sum of exp, then the gradient; the row's loss
 * -log softmax[label] goes to row_loss[r] (double, summed in row order by
 * k_sum_rows so the total does not depend on scheduling). */
__global__ void k_softmax_xent(const float *logits, const uint8_t *labels, int rows, int cols,
                               float scale, float *dlogits, double *row_loss)
{
    int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const float *z = logits + (size_t)warp * cols;
    float *d = dlogits + (size_t)warp * cols;
    float zmax = -INFINITY;
    for (int c = lane; c < cols; c += 32) zmax = fmaxf(zmax, z[c]);
    for (int o = 16; o > 0; o /= 2) zmax = fmaxf(zmax, __shfl_xor_sync(0xffffffffu, zmax, o));
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32) sum += expf(z[c] - zmax);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.0f / sum;
    int label = labels[warp];
    for (int c = lane; c < cols; c += 32)
        d[c] = expf(z[c] - zmax) * inv * scale - (c == label ? scale : 0.0f);
    if (lane == 0) row_loss[warp] = (double)logf(sum) - (double)(z[label] - zmax);
}

/* hit[r] = 1 when the first arg-max of row r equals its label, else 0. */
__global__ void k_correct_rows(const float *logits, const uint8_t *labels, int rows, int cols,
                               double *hit)
{
    GRID_STRIDE(r, (size_t)rows)
    {
        const float *z = logits + r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (z[c] > z[best]) best = c;
        hit[r] = best == labels[r] ? 1.0 : 0.0;
    }
}

/* *out = sum of v[0..n) (accumulate = 0) or *out += that sum (1), by one
 * block: strided partial sums, then a tree. */
__global__ void k_sum_rows(const double *v, int n, double *out, int accumulate)
{
    __shared__ double part[SB_CUDA_THREADS];
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = accumulate ? *out + part[0] : part[0];
}

/* Sums the first `rows` scratch values on the device and waits for the one
 * double to reach host memory (evaluation only: count_correct). A failure
 * is recorded (sb_cuda_fail) and returns 0, which the caller's check()
 * then reports: a failed read is an error, never a zero. */
static double reduce_rows_to_host(int rows)
{
    k_sum_rows<<<1, SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(sb_cuda_ctx.scratch, rows,
                                                              sb_cuda_ctx.result_dev, 0);
    sb_cuda_check_launch("k_sum_rows");
    cudaError_t e = cudaMemcpyAsync(sb_cuda_ctx.result_host, sb_cuda_ctx.result_dev, sizeof(double),
                                    cudaMemcpyDeviceToHost, sb_cuda_ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(sb_cuda_ctx.stream);
    if (e != cudaSuccess) {
        sb_cuda_fail("reading a reduction back", cudaGetErrorString(e));
        return 0.0;
    }
    return *sb_cuda_ctx.result_host;
}

/* The loss stays on the device: the row losses are summed into *loss_acc
 * (device memory) by one more kernel; nothing waits. */
void sb_cuda_softmax_xent(const float *logits, const uint8_t *labels, int rows, int cols,
                          float scale, float *dlogits, double *loss_acc)
{
    if (rows <= 0 || !ensure_scratch((size_t)rows)) return;
    unsigned warps_per_block = SB_CUDA_THREADS / 32;
    unsigned blocks = ((unsigned)rows + warps_per_block - 1) / warps_per_block;
    k_softmax_xent<<<blocks, SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(
        logits, labels, rows, cols, scale, dlogits, sb_cuda_ctx.scratch);
    sb_cuda_check_launch("k_softmax_xent");
    k_sum_rows<<<1, SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(sb_cuda_ctx.scratch, rows, loss_acc,
                                                              1);
    sb_cuda_check_launch("k_sum_rows (loss)");
}

void sb_cuda_count_correct(const float *logits, const uint8_t *labels, int rows, int cols,
                           long *correct)
{
    *correct = 0;
    if (rows <= 0 || !ensure_scratch((size_t)rows)) return;
    k_correct_rows<<<sb_cuda_blocks((size_t)rows), SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(
        logits, labels, rows, cols, sb_cuda_ctx.scratch);
    sb_cuda_check_launch("k_correct_rows");
    *correct = (long)llround(reduce_rows_to_host(rows));
}

extern "C" sb_status sb_cuda_reserve_rows(size_t rows)
{
    if (ensure_scratch(rows)) return SB_OK;
    sb_status st = sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
    sb_cuda_ctx.error[0] = '\0'; /* returned here: not again from check() */
    return st;
}
