/* The CUDA backend's convolution and pooling ops (the cnn workload):
 * im2col, its adjoint col2im, batched transpose, 2x2 max-pooling. Semantics
 * and layouts are those of backend.h; each kernel writes every output
 * element from one thread, so results are deterministic (col2im gathers
 * rather than scatters, so it needs no atomics). */
#include <cuda_runtime.h>
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

/* cols (n*oh*ow, c*k*k): one thread per element. */
__global__ void k_im2col(const float *x, int n, int c, int h, int w, int k, float *cols)
{
    int oh = h - k + 1, ow = w - k + 1, ck = c * k * k;
    size_t total = (size_t)n * oh * ow * ck;
    GRID_STRIDE(i, total)
    {
        int col = (int)(i % ck);
        size_t row = i / ck;
        int ox = (int)(row % ow), oy = (int)((row / ow) % oh), s = (int)(row / ((size_t)ow * oh));
        int kx = col % k, ky = (col / k) % k, ch = col / (k * k);
        cols[i] = x[(((size_t)s * c + ch) * h + oy + ky) * w + ox + kx];
    }
}

/* dx (n, c, h, w): one thread per element, summing the dcols entries that
 * im2col copied from it, in (ky, kx) order. */
__global__ void k_col2im(const float *dcols, int n, int c, int h, int w, int k, float *dx)
{
    int oh = h - k + 1, ow = w - k + 1, ck = c * k * k;
    size_t total = (size_t)n * c * h * w;
    GRID_STRIDE(i, total)
    {
        int xx = (int)(i % w), yy = (int)((i / w) % h), ch = (int)((i / ((size_t)w * h)) % c);
        int s = (int)(i / ((size_t)w * h * c));
        float acc = 0.0f;
        for (int ky = 0; ky < k; ky++) {
            int oy = yy - ky;
            if (oy < 0 || oy >= oh) continue;
            for (int kx = 0; kx < k; kx++) {
                int ox = xx - kx;
                if (ox < 0 || ox >= ow) continue;
                size_t row = ((size_t)s * oh + oy) * ow + ox;
                acc += dcols[row * ck + (ch * k + ky) * k + kx];
            }
        }
        dx[i] = acc;
    }
}

/* y (batch, cols, rows) from x (batch, rows, cols): one thread per output. */
__global__ void k_transpose(const float *x, int batch, int rows, int cols, float *y)
{
    size_t total = (size_t)batch * rows * cols;
    GRID_STRIDE(o, total)
    {
        int r = (int)(o % rows);
        int cc = (int)((o / rows) % cols);
        size_t b = o / ((size_t)rows * cols);
        y[o] = x[(b * rows + r) * cols + cc];
    }
}

/* One thread per output; first maximum in row-major window order wins. */
__global__ void k_maxpool_fwd(const float *x, int n, int c, int h, int w, float *y,
                              int32_t *argmax)
{
    int ph = h / 2, pw = w / 2;
    size_t total = (size_t)n * c * ph * pw;
    GRID_STRIDE(o, total)
    {
        int px = (int)(o % pw), py = (int)((o / pw) % ph);
        size_t plane = o / ((size_t)pw * ph); /* s * c + ch */
        size_t base = plane * h * w;
        size_t best = base + (size_t)(2 * py) * w + 2 * px;
        for (int dy = 0; dy < 2; dy++)
            for (int dxx = 0; dxx < 2; dxx++) {
                size_t at = base + (size_t)(2 * py + dy) * w + 2 * px + dxx;
                if (x[at] > x[best]) best = at;
            }
        y[o] = x[best];
        argmax[o] = (int32_t)best;
    }
}

/* Pooling windows do not overlap, so each dx element receives at most one
 * dy value: a plain store after the zeroing, no atomics. */
__global__ void k_maxpool_bwd(const float *dy, const int32_t *argmax, size_t total, float *dx)
{
    GRID_STRIDE(o, total) dx[argmax[o]] += dy[o];
}

void sb_cuda_im2col(const float *x, int n, int c, int h, int w, int k, float *cols)
{
    size_t total = (size_t)n * (h - k + 1) * (w - k + 1) * c * k * k;
    LAUNCH(k_im2col, total, x, n, c, h, w, k, cols);
}

void sb_cuda_col2im(const float *dcols, int n, int c, int h, int w, int k, float *dx)
{
    size_t total = (size_t)n * c * h * w;
    LAUNCH(k_col2im, total, dcols, n, c, h, w, k, dx);
}

void sb_cuda_transpose_batched(const float *x, int batch, int rows, int cols, float *y)
{
    size_t total = (size_t)batch * rows * cols;
    LAUNCH(k_transpose, total, x, batch, rows, cols, y);
}

void sb_cuda_maxpool2_forward(const float *x, int n, int c, int h, int w, float *y,
                              int32_t *argmax)
{
    size_t total = (size_t)n * c * (h / 2) * (w / 2);
    LAUNCH(k_maxpool_fwd, total, x, n, c, h, w, y, argmax);
}

void sb_cuda_maxpool2_backward(const float *dy, const int32_t *argmax, int n, int c, int h,
                               int w, float *dx)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return;
    cudaError_t e = cudaMemsetAsync(dx, 0, (size_t)n * c * h * w * sizeof(float), s);
    if (e != cudaSuccess) {
        sb_cuda_fail("cudaMemsetAsync (maxpool2_backward)", cudaGetErrorString(e));
        return;
    }
    size_t total = (size_t)n * c * (h / 2) * (w / 2);
    LAUNCH(k_maxpool_bwd, total, dy, argmax, total, dx);
}
