/* Conversion kernels of the 16-bit NCCL all-reduce (src/comm/nccl.c,
 * op allreduce16; src/comm/nccl_half.cu): device buffers, enqueued on
 * `stream` (a cudaStream_t), no wait. Round to nearest even, as
 * src/core/half.c on the host. Return 0 or the cudaError_t of the launch. */
#ifndef SB_NCCL_HALF_H
#define SB_NCCL_HALF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* h[i] = x[i] as fp16 (bf16 != 0: bf16), i < n. */
int sb_nccl_half_encode(const float *x, uint16_t *h, size_t n, int bf16, void *stream);
/* x[i] = h[i] as float, i < n. */
int sb_nccl_half_decode(const uint16_t *h, float *x, size_t n, int bf16, void *stream);

#ifdef __cplusplus
}
#endif

#endif
