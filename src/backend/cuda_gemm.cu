/* The CUDA backend's GEMMs (backend.h: sgemm, gemm_half): cuBLAS SGEMM,
 * and cublasGemmEx on 16-bit copies of the inputs with fp32 accumulation,
 * on the calling thread's handle and stream (cuda.cu).
 *
 * Row-major on a column-major library: a row-major (r, c) matrix is the
 * column-major (c, r) matrix of its transpose, so C = op(A) op(B) in
 * row-major is C^T = op(B)^T op(A)^T in column-major: call cuBLAS with the
 * operands swapped and m, n swapped; leading dimensions stay as given. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/backend.h"
}
#include "backend/cuda_internal.h"

#define GRID_STRIDE(i, n)                                                            \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

void sb_cuda_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc)
{
    if (!sb_cuda_ensure_ctx()) return;
    /* Row-major C (m, n) = column-major C^T (n, m) = op(B)^T op(A)^T. */
    cublasStatus_t s = cublasSgemm(sb_cuda_ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                                   a, lda, &beta, c, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) sb_cuda_fail("cublasSgemm", cublasGetStatusString(s));
}

/* Grows gemm_half's 16-bit copy `which` (0: A, 1: B) to n elements. A
 * step's first GEMMs allocate; later ones (and a captured graph) reuse. */
static int ensure_half(int which, size_t n)
{
    if (sb_cuda_ctx.half_cap[which] >= n) return 1;
    cudaFree(sb_cuda_ctx.half[which]);
    sb_cuda_ctx.half[which] = NULL;
    sb_cuda_ctx.half_cap[which] = 0;
    cudaError_t e = cudaMalloc(&sb_cuda_ctx.half[which], n * sizeof(uint16_t));
    if (e != cudaSuccess) {
        sb_cuda_fail("cudaMalloc (16-bit GEMM inputs)", cudaGetErrorString(e));
        return 0;
    }
    sb_cuda_ctx.half_cap[which] = n;
    return 1;
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

/* 16-bit inputs, fp32 accumulation and output (backend.h): A and B
 * converted (round to nearest even: the values are 16-bit already, so
 * exactly), then cublasGemmEx with CUBLAS_COMPUTE_32F. Row-major as
 * sb_cuda_sgemm: C^T = op(B)^T op(A)^T in cuBLAS's column-major terms. */
void sb_cuda_gemm_half(int fmt, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc)
{
    if (!sb_cuda_ensure_ctx()) return;
    size_t na = (size_t)(trans_a ? k : m) * lda, nb = (size_t)(trans_b ? n : k) * ldb;
    if (!na || !nb || !ensure_half(0, na) || !ensure_half(1, nb)) return;
    k_to_half<<<sb_cuda_blocks(na), SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(
        a, sb_cuda_ctx.half[0], na, fmt);
    sb_cuda_check_launch("k_to_half");
    k_to_half<<<sb_cuda_blocks(nb), SB_CUDA_THREADS, 0, sb_cuda_ctx.stream>>>(
        b, sb_cuda_ctx.half[1], nb, fmt);
    sb_cuda_check_launch("k_to_half");
    cudaDataType_t t = fmt ? CUDA_R_16BF : CUDA_R_16F;
    cublasStatus_t s = cublasGemmEx(sb_cuda_ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                    sb_cuda_ctx.half[1], t, ldb, sb_cuda_ctx.half[0], t, lda, &beta,
                                    c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) sb_cuda_fail("cublasGemmEx", cublasGetStatusString(s));
}
