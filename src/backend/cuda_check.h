/* One way to turn a CUDA runtime error into a status, for every file that
 * calls CUDA (the backend's .cu files, the nccl and staged communicators,
 * both C and C++): SB_CUDA_CHECK(call, code) evaluates `call` (a
 * cudaError_t) and returns SB_OK, or records "<call text> at <file>:<line>:
 * <CUDA's message>" with sb_error() and returns `code` (SB_ERR_DEVICE for
 * backend work, SB_ERR_COMM for communication). The file:line says which
 * of the many calls failed, as nccl-tests' CUDACHECK does.
 *
 *     SB_TRY(SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_DEVICE));
 *
 * Only for builds with CUDA (SB_HAVE_CUDA). */
#ifndef SB_CUDA_CHECK_H
#define SB_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/status.h"
#ifdef __cplusplus
}
#endif

/* The function behind SB_CUDA_CHECK (call it through the macro). */
static inline sb_status sb_cuda_check_at(cudaError_t e, sb_status code, const char *what,
                                         const char *file, int line)
{
    if (e == cudaSuccess) return SB_OK;
    return sb_error(code, "%s at %s:%d: %s", what, file, line, cudaGetErrorString(e));
}

#define SB_CUDA_CHECK(call, code) sb_cuda_check_at((call), (code), #call, __FILE__, __LINE__)

#endif
