/* The CUDA backend: cuBLAS SGEMM and small kernels on one stream per thread.
 *
 * Every op enqueues on the calling thread's stream (cuda.h) and returns
 * without waiting, except the ones whose result lands in host memory
 * (download, count_correct), which wait for the stream; softmax_xent adds
 * its loss to a sum in device memory, so a training step never waits.
 * Ops that cannot return a status record the first failure of the thread
 * (sb_cuda_fail); check() (no wait) and sync() report it, and replicas call
 * check() twice per step (strategies/shared/replica.c).
 *
 * Row-major on a column-major library: a row-major (r, c) matrix is the
 * column-major (c, r) matrix of its transpose, so C = op(A) op(B) in
 * row-major is C^T = op(B)^T op(A)^T in column-major: call cuBLAS with the
 * operands swapped and m, n swapped; leading dimensions stay as given. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unordered_map>
#ifdef SB_HAVE_NVTX
#include <nvtx3/nvToolsExtCudaRt.h>
#endif

extern "C" {
#include "backend/backend.h"
#include "backend/cuda.h"
#include "data/mnist.h"
}
#include "backend/cuda_internal.h"
#include "backend/cuda_check.h"

/* ------------------------------------------------------------ thread context */

/* cuBLAS's workspace per thread (cublasSetWorkspace): 32 MiB, the cuBLAS
 * guide's recommendation for Hopper. */
#define SB_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)
/* The bias-gradient column reduction (k_bias_grad_partial): a block is a
 * tile of 32 columns x 8 thread rows; at most 64 row chunks; the partial
 * sums of at most BIAS_TARGET_BLOCKS blocks live in the thread's scratch. */
#define BIAS_TILE_COLS 32
#define BIAS_TILE_ROWS 8
#define BIAS_MAX_CHUNKS 64
#define BIAS_TARGET_BLOCKS 264 /* ~2 per SM on an H100 (132 SMs) */

struct thread_ctx {
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

static thread_local thread_ctx ctx = {-1, 0, 0, 0, 0, 0, 0, 0, 0, {0, 0}, {0, 0}, ""};

void sb_cuda_fail(const char *what, const char *why)
{
    if (!ctx.error[0]) snprintf(ctx.error, sizeof ctx.error, "%s: %s", what, why);
}

void sb_cuda_check_launch(const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) sb_cuda_fail(kernel, cudaGetErrorString(e));
}

static sb_status blas_check(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return SB_OK;
    return sb_error(SB_ERR_DEVICE, "%s: %s", what, cublasGetStatusString(s));
}

extern "C" void sb_cuda_release_thread(void)
{
    /* Errors while tearing down are ignored: nothing useful can follow. */
    if (ctx.device < 0) return; /* nothing to release; cudaFree(NULL) would create a context */
    cudaSetDevice(ctx.device);
    if (ctx.stream) cudaStreamSynchronize(ctx.stream); /* no work outlives its stream */
    if (ctx.blas) cublasDestroy(ctx.blas);
    if (ctx.stream) cudaStreamDestroy(ctx.stream);
    if (ctx.scratch) cudaFree(ctx.scratch);
    if (ctx.result_dev) cudaFree(ctx.result_dev);
    if (ctx.result_host) cudaFreeHost(ctx.result_host);
    if (ctx.bias_scratch) cudaFree(ctx.bias_scratch);
    if (ctx.blas_workspace) cudaFree(ctx.blas_workspace);
    for (int i = 0; i < 2; i++)
        if (ctx.half[i]) cudaFree(ctx.half[i]);
    ctx = thread_ctx{-1, 0, 0, 0, 0, 0, 0, 0, 0, {0, 0}, {0, 0}, ""};
}

static sb_status create_ctx(int device)
{
    SB_TRY(SB_CUDA_CHECK(cudaSetDevice(device), SB_ERR_DEVICE));
    ctx.device = device;
    SB_TRY(SB_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking),
                         SB_ERR_DEVICE));
#ifdef SB_HAVE_NVTX
    /* Nsight Systems then shows which replica's stream a kernel ran on. */
    char stream_name[48];
    snprintf(stream_name, sizeof stream_name, "stratbench compute (GPU %d)", device);
    nvtxNameCudaStreamA(ctx.stream, stream_name);
#endif
    SB_TRY(blas_check(cublasCreate(&ctx.blas), "cublasCreate"));
    SB_TRY(blas_check(cublasSetStream(ctx.blas, ctx.stream), "cublasSetStream"));
    /* FP32 GEMMs, so results compare with the CPU backend: cublasSgemm
     * computes in FP32 in the default math mode; TF32 tensor cores are used
     * only when CUBLAS_TF32_TENSOR_OP_MATH is set, which we never do.
     * CUBLAS_PEDANTIC_MATH (standardised arithmetic in every phase, for
     * numerical studies, possibly slower) is therefore not needed; it can be
     * turned on with STRATBENCH_CUBLAS_PEDANTIC=1 to measure what it costs
     * (docs/gpu.md; not yet measured on a GPU). */
    const char *pedantic = getenv("STRATBENCH_CUBLAS_PEDANTIC");
    cublasMath_t mode = pedantic && strcmp(pedantic, "1") == 0 ? CUBLAS_PEDANTIC_MATH
                                                                : CUBLAS_DEFAULT_MATH;
    SB_TRY(blas_check(cublasSetMathMode(ctx.blas, mode), "cublasSetMathMode"));
    /* A workspace of our own, so cuBLAS never allocates inside a step
     * (which a CUDA graph capture would refuse); 32 MiB is the cuBLAS
     * guide's recommendation for Hopper. */
    SB_TRY(SB_CUDA_CHECK(cudaMalloc(&ctx.blas_workspace, SB_CUBLAS_WORKSPACE_BYTES),
                         SB_ERR_DEVICE));
    SB_TRY(blas_check(cublasSetWorkspace(ctx.blas, ctx.blas_workspace,
                                         SB_CUBLAS_WORKSPACE_BYTES), "cublasSetWorkspace"));
    SB_TRY(SB_CUDA_CHECK(cudaMalloc((void **)&ctx.result_dev, sizeof(double)), SB_ERR_DEVICE));
    SB_TRY(SB_CUDA_CHECK(cudaMallocHost((void **)&ctx.result_host, sizeof(double)), SB_ERR_DEVICE));
    SB_TRY(SB_CUDA_CHECK(cudaMalloc((void **)&ctx.bias_scratch,
                                    (size_t)BIAS_TARGET_BLOCKS * BIAS_TILE_COLS * sizeof(float)),
                         SB_ERR_DEVICE));
    return SB_OK;
}

extern "C" sb_status sb_cuda_set_device(int device)
{
    if (ctx.device == device && ctx.stream) {
        /* Re-assert it: code outside the backend (NCCL set-up and teardown,
         * cudaGetDeviceProperties callers) may have changed the thread's
         * current device, and kernels on ctx.stream must launch on its own. */
        return SB_CUDA_CHECK(cudaSetDevice(device), SB_ERR_DEVICE);
    }
    sb_cuda_release_thread();
    sb_status st = create_ctx(device);
    if (st) sb_cuda_release_thread(); /* all or nothing: a retry starts clean */
    return st;
}

/* Creates the context on device 0 for a thread that never chose one. */
static int ensure_ctx(void)
{
    if (ctx.stream) return 1;
    if (sb_cuda_set_device(0) != SB_OK) {
        sb_cuda_fail("cuda backend: thread set-up on device 0", sb_error_message());
        return 0;
    }
    return 1;
}

cudaStream_t sb_cuda_thread_stream(void) { return ensure_ctx() ? ctx.stream : 0; }

cublasHandle_t sb_cuda_thread_blas(void) { return ensure_ctx() ? ctx.blas : nullptr; }

extern "C" void *sb_cuda_stream(void) { return ensure_ctx() ? (void *)ctx.stream : NULL; }

extern "C" int sb_cuda_current_device(void) { return ctx.device; }

/* Grows the thread's per-row scratch to at least n doubles. */
static int ensure_scratch(size_t n)
{
    if (!ensure_ctx()) return 0;
    if (ctx.scratch_cap >= n) return 1;
    cudaFree(ctx.scratch);
    ctx.scratch = NULL;
    ctx.scratch_cap = 0;
    cudaError_t e = cudaMalloc((void **)&ctx.scratch, n * sizeof(double));
    if (e != cudaSuccess) {
        sb_cuda_fail("cudaMalloc (reduction scratch)", cudaGetErrorString(e));
        return 0;
    }
    ctx.scratch_cap = n;
    return 1;
}

/* ------------------------------------------------------------ memory */

/* Bytes held through cu_alloc by every thread of the process, and the peak:
 * a map from pointer to size, so that cu_free knows what it releases. */
static std::mutex mem_mutex;
static std::unordered_map<void *, size_t> mem_sizes;
static size_t mem_current, mem_peak;

static void mem_track_alloc(void *ptr, size_t bytes)
{
    std::lock_guard<std::mutex> lock(mem_mutex);
    try {
        mem_sizes[ptr] = bytes;
    } catch (...) {
        return; /* bookkeeping only: an untracked block is not an error */
    }
    mem_current += bytes;
    if (mem_current > mem_peak) mem_peak = mem_current;
}

static void mem_track_free(void *ptr)
{
    std::lock_guard<std::mutex> lock(mem_mutex);
    auto it = mem_sizes.find(ptr);
    if (it == mem_sizes.end()) return;
    mem_current -= it->second;
    mem_sizes.erase(it);
}

extern "C" size_t sb_cuda_memory_peak_bytes(void)
{
    std::lock_guard<std::mutex> lock(mem_mutex);
    return mem_peak;
}

extern "C" size_t sb_cuda_memory_current_bytes(void)
{
    std::lock_guard<std::mutex> lock(mem_mutex);
    return mem_current;
}

static sb_status cu_alloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    if (!ensure_ctx())
        return sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
    size_t rounded = bytes ? bytes : 1;
    cudaError_t e = cudaMalloc(ptr, rounded);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return sb_error(SB_ERR_NOMEM, "cudaMalloc of %zu bytes: %s", bytes,
                        cudaGetErrorString(e));
    }
    mem_track_alloc(*ptr, rounded);
    /* Zeroed before returning, not just in this thread's stream order: the
     * block may next be used from another thread's stream (the device-side
     * reduction reads every replica's buffers on replica 0's stream, NCCL's
     * communication stream) with no event ordering it after the memset.
     * Allocation happens at set-up, so the wait costs nothing per step. */
    sb_status st = SB_CUDA_CHECK(cudaMemsetAsync(*ptr, 0, rounded, ctx.stream), SB_ERR_DEVICE);
    if (!st) st = SB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), SB_ERR_DEVICE);
    if (st) {
        mem_track_free(*ptr);
        cudaFree(*ptr);
        *ptr = NULL;
    }
    return st;
}

static void cu_free(void *ptr)
{
    if (!ptr) return;
    mem_track_free(ptr);
    cudaFree(ptr); /* implicitly synchronises the device */
}

/* Asynchronous on the thread's stream, and host_src may be reused or freed
 * on return (callers free the initial parameters at once): a copy from
 * pageable memory is staged through the driver's pinned buffers before
 * cudaMemcpyAsync returns (CUDA runtime API, "API synchronization
 * behavior"), but one from pinned memory (cudaMallocHost) is a DMA still in
 * flight, so for those this waits for the stream. */
static sb_status cu_upload(void *dst, const void *host_src, size_t bytes)
{
    if (!ensure_ctx()) return sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
    if (bytes == 0) return SB_OK;
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx.stream),
                         SB_ERR_DEVICE));
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, host_src) != cudaSuccess) {
        cudaGetLastError(); /* unknown to CUDA: pageable */
        return SB_OK;
    }
    if (attr.type != cudaMemoryTypeHost) return SB_OK;
    return SB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), SB_ERR_DEVICE);
}

/* Synchronous: host_dst holds the data on return. */
static sb_status cu_download(void *host_dst, const void *src, size_t bytes)
{
    if (!ensure_ctx()) return sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
    if (bytes == 0) return SB_OK;
    SB_TRY(SB_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream),
                         SB_ERR_DEVICE));
    return SB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), SB_ERR_DEVICE);
}

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

/* Non-blocking: the recorded failure of a void op, a launch error not yet
 * collected, or a fault of earlier work that the stream reports
 * (cudaStreamQuery never waits; cudaErrorNotReady = still running). */
static sb_status cu_check(void)
{
    if (!ensure_ctx()) return sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
    if (ctx.error[0]) {
        sb_status st = sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
        ctx.error[0] = '\0';
        return st;
    }
    SB_TRY(SB_CUDA_CHECK(cudaGetLastError(), SB_ERR_DEVICE));
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    SB_TRY(SB_CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &capturing), SB_ERR_DEVICE));
    if (capturing != cudaStreamCaptureStatusNone) return SB_OK; /* a query would end it */
    cudaError_t e = cudaStreamQuery(ctx.stream);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not an error: clear it for later checks */
        return SB_OK;
    }
    return SB_CUDA_CHECK(e, SB_ERR_DEVICE);
}

static sb_status cu_sync(void)
{
    if (!ensure_ctx()) return sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
    if (ctx.error[0]) {
        sb_status st = sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
        ctx.error[0] = '\0';
        return st;
    }
    SB_TRY(SB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), SB_ERR_DEVICE));
    return SB_CUDA_CHECK(cudaGetLastError(), SB_ERR_DEVICE);
}

/* ------------------------------------------------------------ GEMM */

static void cu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    if (!ensure_ctx()) return;
    /* Row-major C (m, n) = column-major C^T (n, m) = op(B)^T op(A)^T. */
    cublasStatus_t s = cublasSgemm(ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                                   a, lda, &beta, c, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) sb_cuda_fail("cublasSgemm", cublasGetStatusString(s));
}

/* Grows gemm_half's 16-bit copy `which` (0: A, 1: B) to n elements. A
 * step's first GEMMs allocate; later ones (and a captured graph) reuse. */
static int ensure_half(int which, size_t n)
{
    if (ctx.half_cap[which] >= n) return 1;
    cudaFree(ctx.half[which]);
    ctx.half[which] = NULL;
    ctx.half_cap[which] = 0;
    cudaError_t e = cudaMalloc(&ctx.half[which], n * sizeof(uint16_t));
    if (e != cudaSuccess) {
        sb_cuda_fail("cudaMalloc (16-bit GEMM inputs)", cudaGetErrorString(e));
        return 0;
    }
    ctx.half_cap[which] = n;
    return 1;
}

__global__ void k_to_half(const float *x, void *out, size_t n, int fmt);

/* 16-bit inputs, fp32 accumulation and output (backend.h): A and B
 * converted (round to nearest even: the values are 16-bit already, so
 * exactly), then cublasGemmEx with CUBLAS_COMPUTE_32F. Row-major as
 * cu_sgemm: C^T = op(B)^T op(A)^T in cuBLAS's column-major terms. */
static void cu_gemm_half(int fmt, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc)
{
    if (!ensure_ctx()) return;
    size_t na = (size_t)(trans_a ? k : m) * lda, nb = (size_t)(trans_b ? n : k) * ldb;
    if (!na || !nb || !ensure_half(0, na) || !ensure_half(1, nb)) return;
    k_to_half<<<sb_cuda_blocks(na), SB_CUDA_THREADS, 0, ctx.stream>>>(a, ctx.half[0], na, fmt);
    sb_cuda_check_launch("k_to_half");
    k_to_half<<<sb_cuda_blocks(nb), SB_CUDA_THREADS, 0, ctx.stream>>>(b, ctx.half[1], nb, fmt);
    sb_cuda_check_launch("k_to_half");
    cudaDataType_t t = fmt ? CUDA_R_16BF : CUDA_R_16F;
    cublasStatus_t s = cublasGemmEx(ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                    ctx.half[1], t, ldb, ctx.half[0], t, lda, &beta, c,
                                    CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) sb_cuda_fail("cublasGemmEx", cublasGetStatusString(s));
}

/* ------------------------------------------------------------ elementwise */

#define GRID_STRIDE(i, n)                                                            \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                       \
    do {                                                                             \
        if (!ensure_ctx()) return;                                                   \
        if ((n) == 0) return;                                                        \
        kernel<<<sb_cuda_blocks(n), SB_CUDA_THREADS, 0, ctx.stream>>>(__VA_ARGS__);   \
        sb_cuda_check_launch(#kernel);                                               \
    } while (0)

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

/* out[i] = x[i] as fmt (0: __half, 1: __nv_bfloat16), round to nearest even. */
__global__ void k_to_half(const float *x, void *out, size_t n, int fmt)
{
    GRID_STRIDE(i, n)
    {
        if (fmt) ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn(x[i]);
        else ((__half *)out)[i] = __float2half_rn(x[i]);
    }
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

static void cu_add_bias(float *y, const float *bias, int rows, int cols)
{
    size_t total = (size_t)rows * cols;
    LAUNCH(k_add_bias, total, y, bias, total, cols);
}

static void cu_relu_forward(float *y, size_t n) { LAUNCH(k_relu_forward, n, y, n); }

static void cu_relu_backward(float *dy, const float *y, size_t n)
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

static void cu_bias_grad(float *db, const float *dy, int rows, int cols)
{
    if (!ensure_ctx() || cols <= 0) return;
    int chunks = rows > 0 ? bias_chunks(rows, cols) : 1;
    dim3 grid((unsigned)((cols + BIAS_TILE_COLS - 1) / BIAS_TILE_COLS), (unsigned)chunks);
    dim3 block(BIAS_TILE_COLS, BIAS_TILE_ROWS);
    float *out = chunks == 1 ? db : ctx.bias_scratch;
    k_bias_grad_partial<<<grid, block, 0, ctx.stream>>>(dy, rows, cols, out);
    sb_cuda_check_launch("k_bias_grad_partial");
    if (chunks > 1) LAUNCH(k_bias_grad_final, (size_t)cols, ctx.bias_scratch, chunks, cols, db);
}

static void cu_sgd_momentum(float *p, float *v, const float *g, size_t n, float lr, float mu)
{
    static thread_local long calls;
    if (fault_at() && ++calls == fault_at()) { /* test-only: see fault_at() */
        if (!ensure_ctx() || n == 0) return;
        k_sgd_momentum<<<1, 4096, 0, ctx.stream>>>(p, v, g, n, lr, mu); /* > 1024 threads */
        sb_cuda_check_launch("k_sgd_momentum (STRATBENCH_TEST_CUDA_FAULT)");
        return;
    }
    LAUNCH(k_sgd_momentum, n, p, v, g, n, lr, mu);
}

static void cu_adam(float *p, float *m, float *v, const float *g, size_t n, float b1, float b2,
                    float eps, float step_size, float bc2_sqrt)
{
    LAUNCH(k_adam, n, p, m, v, g, n, b1, b2, eps, step_size, bc2_sqrt);
}

/* Device memory stays allocated: a partial cudaFree does not exist. */
static void cu_discard(void *ptr, size_t bytes)
{
    (void)ptr;
    (void)bytes;
}

static void cu_copy(float *dst, const float *src, size_t n)
{
    if (!ensure_ctx() || n == 0 || dst == src) return;
    cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    ctx.stream);
    if (e != cudaSuccess) sb_cuda_fail("cudaMemcpyAsync (copy)", cudaGetErrorString(e));
}

static void cu_add(float *y, const float *x, size_t n) { LAUNCH(k_add, n, y, x, n); }

static void cu_scale(float *y, float a, size_t n) { LAUNCH(k_scale, n, y, a, n); }

static void cu_round_half(float *x, size_t n, int fmt) { LAUNCH(k_round_half, n, x, n, fmt); }

/* The flag lives in the pinned result buffer's int view: one launch, one
 * read back (the step waits for it, as the loss scaler's decision must). */
static void cu_unscale_check(float *x, float a, size_t n, int *found)
{
    if (!ensure_ctx() || n == 0) return;
    int *flag = (int *)ctx.result_dev;
    cudaError_t e = cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream);
    if (e == cudaSuccess) {
        k_unscale_check<<<sb_cuda_blocks(n), SB_CUDA_THREADS, 0, ctx.stream>>>(x, a, n, flag);
        sb_cuda_check_launch("k_unscale_check");
        e = cudaMemcpyAsync(ctx.result_host, flag, sizeof(int), cudaMemcpyDeviceToHost,
                            ctx.stream);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx.stream);
    if (e != cudaSuccess) {
        sb_cuda_fail("unscaling the gradients", cudaGetErrorString(e));
        return;
    }
    if (*(int *)ctx.result_host) *found = 1;
}

static void cu_gather(float *x, uint8_t *y, const uint8_t *pixels, const uint8_t *labels,
                      const int32_t *idx, int n, int dim)
{
    LAUNCH(k_gather, (size_t)n * dim, x, y, pixels, labels, idx, n, dim);
}

/* ------------------------------------------------------------ loss and accuracy */

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
    k_sum_rows<<<1, SB_CUDA_THREADS, 0, ctx.stream>>>(ctx.scratch, rows, ctx.result_dev, 0);
    sb_cuda_check_launch("k_sum_rows");
    cudaError_t e = cudaMemcpyAsync(ctx.result_host, ctx.result_dev, sizeof(double),
                                    cudaMemcpyDeviceToHost, ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx.stream);
    if (e != cudaSuccess) {
        sb_cuda_fail("reading a reduction back", cudaGetErrorString(e));
        return 0.0;
    }
    return *ctx.result_host;
}

/* The loss stays on the device: the row losses are summed into *loss_acc
 * (device memory) by one more kernel; nothing waits. */
static void cu_softmax_xent(const float *logits, const uint8_t *labels, int rows, int cols,
                            float scale, float *dlogits, double *loss_acc)
{
    if (rows <= 0 || !ensure_scratch((size_t)rows)) return;
    unsigned warps_per_block = SB_CUDA_THREADS / 32;
    unsigned blocks = ((unsigned)rows + warps_per_block - 1) / warps_per_block;
    k_softmax_xent<<<blocks, SB_CUDA_THREADS, 0, ctx.stream>>>(logits, labels, rows, cols,
                                                                scale, dlogits, ctx.scratch);
    sb_cuda_check_launch("k_softmax_xent");
    k_sum_rows<<<1, SB_CUDA_THREADS, 0, ctx.stream>>>(ctx.scratch, rows, loss_acc, 1);
    sb_cuda_check_launch("k_sum_rows (loss)");
}

static void cu_count_correct(const float *logits, const uint8_t *labels, int rows, int cols,
                             long *correct)
{
    *correct = 0;
    if (rows <= 0 || !ensure_scratch((size_t)rows)) return;
    k_correct_rows<<<sb_cuda_blocks((size_t)rows), SB_CUDA_THREADS, 0, ctx.stream>>>(
        logits, labels, rows, cols, ctx.scratch);
    sb_cuda_check_launch("k_correct_rows");
    *correct = (long)llround(reduce_rows_to_host(rows));
}

extern "C" sb_status sb_cuda_reserve_rows(size_t rows)
{
    if (ensure_scratch(rows)) return SB_OK;
    sb_status st = sb_error(SB_ERR_DEVICE, "cuda backend: %s", ctx.error);
    ctx.error[0] = '\0'; /* returned here: not again from check() */
    return st;
}

/* ------------------------------------------------------------ the ops table */

/* Designated initialisers in declaration order (a GNU extension in C++17). */
extern "C" const struct sb_backend_ops sb_backend_cuda = {
    .name = "cuda",
    .host_memory = 0,
    .set_threads = nullptr,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .sync = cu_sync,
    .check = cu_check,
    .sgemm = cu_sgemm,
    .gemm_half = cu_gemm_half,
    .add_bias = cu_add_bias,
    .relu_forward = cu_relu_forward,
    .relu_backward = cu_relu_backward,
    .bias_grad = cu_bias_grad,
    .softmax_xent = cu_softmax_xent,
    .count_correct = cu_count_correct,
    .sgd_momentum = cu_sgd_momentum,
    .adam = cu_adam,
    .discard = cu_discard,
    .copy = cu_copy,
    .add = cu_add,
    .scale = cu_scale,
    .round_half = cu_round_half,
    .unscale_check = cu_unscale_check,
    .gather = cu_gather,
    .im2col = sb_cuda_im2col,
    .col2im = sb_cuda_col2im,
    .transpose_batched = sb_cuda_transpose_batched,
    .maxpool2_forward = sb_cuda_maxpool2_forward,
    .maxpool2_backward = sb_cuda_maxpool2_backward,
    .sgemm_strided_batched = sb_cuda_sgemm_strided_batched,
    .layernorm_forward = sb_cuda_layernorm_forward,
    .layernorm_backward = sb_cuda_layernorm_backward,
    .gelu_forward = sb_cuda_gelu_forward,
    .gelu_backward = sb_cuda_gelu_backward,
    .softmax_rows = sb_cuda_softmax_rows,
    .softmax_rows_backward = sb_cuda_softmax_rows_backward,
    .transpose_0213 = sb_cuda_transpose_0213,
    .patchify = sb_cuda_patchify,
    .copy2d = sb_cuda_copy2d,
    .zero = sb_cuda_zero,
};
