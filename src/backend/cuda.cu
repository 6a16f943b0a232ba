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
 * This file: the thread's context (device, stream, cuBLAS handle, scratch),
 * the sticky error, check() and sync(), and the ops table. The ops are in
 * cuda_memory.cu (alloc, free, copies to and from the host), cuda_gemm.cu,
 * cuda_elementwise.cu (bias, ReLU, optimizers, ...), cuda_loss.cu, and for
 * the cnn and the vit cuda_conv.cu and cuda_nn.cu. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef SB_HAVE_NVTX
#include <nvtx3/nvToolsExtCudaRt.h>
#endif

extern "C" {
#include "backend/backend.h"
#include "backend/cuda.h"
}
#include "backend/cuda_internal.h"
#include "backend/cuda_check.h"

/* ------------------------------------------------------------ thread context */

/* cuBLAS's workspace per thread (cublasSetWorkspace): 32 MiB, the cuBLAS
 * guide's recommendation for Hopper. */
#define SB_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

thread_local sb_cuda_thread_ctx sb_cuda_ctx = {-1, 0, 0, 0, 0, 0, 0, 0, 0, {0, 0}, {0, 0}, ""};

void sb_cuda_fail(const char *what, const char *why)
{
    if (!sb_cuda_ctx.error[0])
        snprintf(sb_cuda_ctx.error, sizeof sb_cuda_ctx.error, "%s: %s", what, why);
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
    if (sb_cuda_ctx.device < 0)
        return; /* nothing to release; cudaFree(NULL) would create a context */
    cudaSetDevice(sb_cuda_ctx.device);
    if (sb_cuda_ctx.stream)
        cudaStreamSynchronize(sb_cuda_ctx.stream); /* no work outlives its stream */
    if (sb_cuda_ctx.blas) cublasDestroy(sb_cuda_ctx.blas);
    if (sb_cuda_ctx.stream) cudaStreamDestroy(sb_cuda_ctx.stream);
    if (sb_cuda_ctx.scratch) cudaFree(sb_cuda_ctx.scratch);
    if (sb_cuda_ctx.result_dev) cudaFree(sb_cuda_ctx.result_dev);
    if (sb_cuda_ctx.result_host) cudaFreeHost(sb_cuda_ctx.result_host);
    if (sb_cuda_ctx.bias_scratch) cudaFree(sb_cuda_ctx.bias_scratch);
    if (sb_cuda_ctx.blas_workspace) cudaFree(sb_cuda_ctx.blas_workspace);
    for (int i = 0; i < 2; i++)
        if (sb_cuda_ctx.half[i]) cudaFree(sb_cuda_ctx.half[i]);
    sb_cuda_ctx = sb_cuda_thread_ctx{-1, 0, 0, 0, 0, 0, 0, 0, 0, {0, 0}, {0, 0}, ""};
}

static sb_status create_ctx(int device)
{
    SB_TRY(SB_CUDA_CHECK(cudaSetDevice(device), SB_ERR_DEVICE));
    sb_cuda_ctx.device = device;
    SB_TRY(SB_CUDA_CHECK(cudaStreamCreateWithFlags(&sb_cuda_ctx.stream, cudaStreamNonBlocking),
                         SB_ERR_DEVICE));
#ifdef SB_HAVE_NVTX
    /* Nsight Systems then shows which replica's stream a kernel ran on. */
    char stream_name[48];
    snprintf(stream_name, sizeof stream_name, "stratbench compute (GPU %d)", device);
    nvtxNameCudaStreamA(sb_cuda_ctx.stream, stream_name);
#endif
    SB_TRY(blas_check(cublasCreate(&sb_cuda_ctx.blas), "cublasCreate"));
    SB_TRY(blas_check(cublasSetStream(sb_cuda_ctx.blas, sb_cuda_ctx.stream), "cublasSetStream"));
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
    SB_TRY(blas_check(cublasSetMathMode(sb_cuda_ctx.blas, mode), "cublasSetMathMode"));
    /* A workspace of our own, so cuBLAS never allocates inside a step
     * (which a CUDA graph capture would refuse); 32 MiB is the cuBLAS
     * guide's recommendation for Hopper. */
    SB_TRY(SB_CUDA_CHECK(cudaMalloc(&sb_cuda_ctx.blas_workspace, SB_CUBLAS_WORKSPACE_BYTES),
                         SB_ERR_DEVICE));
    SB_TRY(blas_check(cublasSetWorkspace(sb_cuda_ctx.blas, sb_cuda_ctx.blas_workspace,
                                         SB_CUBLAS_WORKSPACE_BYTES), "cublasSetWorkspace"));
    SB_TRY(SB_CUDA_CHECK(cudaMalloc((void **)&sb_cuda_ctx.result_dev, sizeof(double)),
                         SB_ERR_DEVICE));
    SB_TRY(SB_CUDA_CHECK(cudaMallocHost((void **)&sb_cuda_ctx.result_host, sizeof(double)),
                         SB_ERR_DEVICE));
    SB_TRY(SB_CUDA_CHECK(cudaMalloc((void **)&sb_cuda_ctx.bias_scratch,
                                    (size_t)BIAS_TARGET_BLOCKS * BIAS_TILE_COLS * sizeof(float)),
                         SB_ERR_DEVICE));
    return SB_OK;
}

extern "C" sb_status sb_cuda_set_device(int device)
{
    if (sb_cuda_ctx.device == device && sb_cuda_ctx.stream) {
        /* Re-assert it: code outside the backend (NCCL set-up and teardown,
         * cudaGetDeviceProperties callers) may have changed the thread's
         * current device, and kernels on the thread's stream must launch
         * on its own. */
        return SB_CUDA_CHECK(cudaSetDevice(device), SB_ERR_DEVICE);
    }
    sb_cuda_release_thread();
    sb_status st = create_ctx(device);
    if (st) sb_cuda_release_thread(); /* all or nothing: a retry starts clean */
    return st;
}

int sb_cuda_ensure_ctx(void)
{
    if (sb_cuda_ctx.stream) return 1;
    if (sb_cuda_set_device(0) != SB_OK) {
        sb_cuda_fail("cuda backend: thread set-up on device 0", sb_error_message());
        return 0;
    }
    return 1;
}

cudaStream_t sb_cuda_thread_stream(void) { return sb_cuda_ensure_ctx() ? sb_cuda_ctx.stream : 0; }

cublasHandle_t sb_cuda_thread_blas(void)
{
    return sb_cuda_ensure_ctx() ? sb_cuda_ctx.blas : nullptr;
}

extern "C" void *sb_cuda_stream(void)
{
    return sb_cuda_ensure_ctx() ? (void *)sb_cuda_ctx.stream : NULL;
}

extern "C" int sb_cuda_current_device(void) { return sb_cuda_ctx.device; }

/* ------------------------------------------------------------ check and sync */

/* Non-blocking: the recorded failure of a void op, a launch error not yet
 * collected, or a fault of earlier work that the stream reports
 * (cudaStreamQuery never waits; cudaErrorNotReady = still running). */
static sb_status cu_check(void)
{
    if (!sb_cuda_ensure_ctx())
        return sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
    if (sb_cuda_ctx.error[0]) {
        sb_status st = sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
        sb_cuda_ctx.error[0] = '\0';
        return st;
    }
    SB_TRY(SB_CUDA_CHECK(cudaGetLastError(), SB_ERR_DEVICE));
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    SB_TRY(SB_CUDA_CHECK(cudaStreamIsCapturing(sb_cuda_ctx.stream, &capturing), SB_ERR_DEVICE));
    if (capturing != cudaStreamCaptureStatusNone) return SB_OK; /* a query would end it */
    cudaError_t e = cudaStreamQuery(sb_cuda_ctx.stream);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not an error: clear it for later checks */
        return SB_OK;
    }
    return SB_CUDA_CHECK(e, SB_ERR_DEVICE);
}

static sb_status cu_sync(void)
{
    if (!sb_cuda_ensure_ctx())
        return sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
    if (sb_cuda_ctx.error[0]) {
        sb_status st = sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
        sb_cuda_ctx.error[0] = '\0';
        return st;
    }
    SB_TRY(SB_CUDA_CHECK(cudaStreamSynchronize(sb_cuda_ctx.stream), SB_ERR_DEVICE));
    return SB_CUDA_CHECK(cudaGetLastError(), SB_ERR_DEVICE);
}

/* ------------------------------------------------------------ the ops table */

/* Designated initialisers in declaration order (a GNU extension in C++17). */
extern "C" const struct sb_backend_ops sb_backend_cuda = {
    .name = "cuda",
    .host_memory = 0,
    .set_threads = nullptr,
    .alloc = sb_cuda_alloc,
    .free = sb_cuda_free,
    .upload = sb_cuda_upload,
    .download = sb_cuda_download,
    .sync = cu_sync,
    .check = cu_check,
    .sgemm = sb_cuda_sgemm,
    .gemm_half = sb_cuda_gemm_half,
    .add_bias = sb_cuda_add_bias,
    .relu_forward = sb_cuda_relu_forward,
    .relu_backward = sb_cuda_relu_backward,
    .bias_grad = sb_cuda_bias_grad,
    .softmax_xent = sb_cuda_softmax_xent,
    .count_correct = sb_cuda_count_correct,
    .sgd_momentum = sb_cuda_sgd_momentum,
    .adam = sb_cuda_adam,
    .discard = sb_cuda_discard,
    .copy = sb_cuda_copy,
    .add = sb_cuda_add,
    .scale = sb_cuda_scale,
    .round_half = sb_cuda_round_half,
    .unscale_check = sb_cuda_unscale_check,
    .gather = sb_cuda_gather,
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
