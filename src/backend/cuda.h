/* The CUDA backend's extras, callable from C: device selection, the
 * per-thread stream, and what the report says about the GPU stack.
 *
 * Every thread that runs backend ops on a GPU owns one CUDA stream and one
 * cuBLAS handle (thread-local): the backend ops take no stream argument and
 * enqueue on the calling thread's stream. Call sb_cuda_set_device() once on
 * each thread before its first op (mirrored: in each replica thread; ddp:
 * with the local rank); a thread that never calls it gets device 0 on its
 * first op. The functions below exist in every build: without CUDA,
 * sb_cuda_device_count() returns 0 and the others return SB_ERR_DEVICE. */
#ifndef SB_CUDA_H
#define SB_CUDA_H

#include <stddef.h>

#include "backend/backend.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process can use; 0 when the build has no
 * CUDA, no driver is installed or no device is visible (never fails). */
int sb_cuda_device_count(void);

/* Writes one line describing the GPU stack into buf (size n), e.g.
 * "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB) x 8; driver 12.4; runtime 12.4;
 * cuBLAS 12.4.5; NCCL 2.21.5", or "no CUDA device" / "built without CUDA". */
void sb_cuda_describe(char *buf, size_t n);

/* Model name of device `device` into buf (size n); "" when unavailable. */
void sb_cuda_device_name(int device, char *buf, size_t n);

#ifdef SB_HAVE_CUDA
/* The CUDA backend ("cuda"): cuBLAS SGEMM and kernels on the thread's
 * stream. Defined in cuda.cu. */
extern const struct sb_backend_ops sb_backend_cuda;

/* Makes `device` current for the calling thread and creates the thread's
 * stream and cuBLAS handle (again, if the thread switches device).
 * Errors: SB_ERR_DEVICE with the CUDA or cuBLAS message. */
sb_status sb_cuda_set_device(int device);

/* The calling thread's stream (a cudaStream_t, as void * so that this header
 * needs no CUDA header); creates it on device 0 if the thread has none.
 * NULL if that failed (the next sync() reports why). */
void *sb_cuda_stream(void);

/* The calling thread's current device, or -1 before sb_cuda_set_device or
 * the first op. */
int sb_cuda_current_device(void);

/* Destroys the calling thread's stream, cuBLAS handle and scratch buffers
 * (end of a replica thread); safe to call when there are none. */
void sb_cuda_release_thread(void);
#endif

#ifdef __cplusplus
}
#endif

#endif
