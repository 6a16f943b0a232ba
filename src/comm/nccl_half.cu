/* fp32 <-> fp16/bf16 kernels for the 16-bit NCCL all-reduce; see
 * nccl_half.h. Built with CUDA (every .cu is); used only with NCCL. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "comm/nccl_half.h"

static __global__ void encode(const float *x, uint16_t *h, size_t n, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (bf16) {
            __nv_bfloat16 v = __float2bfloat16_rn(x[i]);
            h[i] = *reinterpret_cast<uint16_t *>(&v);
        } else {
            __half v = __float2half_rn(x[i]);
            h[i] = *reinterpret_cast<uint16_t *>(&v);
        }
    }
}

static __global__ void decode(const uint16_t *h, float *x, size_t n, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint16_t w = h[i];
        x[i] = bf16 ? __bfloat162float(*reinterpret_cast<__nv_bfloat16 *>(&w))
                    : __half2float(*reinterpret_cast<__half *>(&w));
    }
}

/* A grid-stride launch shape: at most 1024 blocks of 256 threads. */
static unsigned blocks_for(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

extern "C" int sb_nccl_half_encode(const float *x, uint16_t *h, size_t n, int bf16, void *stream)
{
    if (n == 0) return 0;
    encode<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(x, h, n, bf16);
    return (int)cudaGetLastError();
}

extern "C" int sb_nccl_half_decode(const uint16_t *h, float *x, size_t n, int bf16, void *stream)
{
    if (n == 0) return 0;
    decode<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(h, x, n, bf16);
    return (int)cudaGetLastError();
}
