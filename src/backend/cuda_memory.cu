/* The CUDA backend's memory (backend.h: alloc, free, upload, download):
 * cudaMalloc'd blocks, zeroed before use, counted process-wide for the
 * memory report (cuda.h: sb_cuda_memory_peak_bytes), and the copies
 * between host and device on the calling thread's stream (cuda.cu). */
#include <cuda_runtime.h>
#include <mutex>
#include <stdio.h>
#include <unordered_map>

extern "C" {
#include "backend/backend.h"
#include "backend/cuda.h"
}
#include "backend/cuda_internal.h"
#include "backend/cuda_check.h"

/* Bytes held through sb_cuda_alloc by every thread of the process, and the peak:
 * a map from pointer to size, so that sb_cuda_free knows what it releases. */
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

sb_status sb_cuda_alloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    if (!sb_cuda_ensure_ctx())
        return sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
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
    sb_status st =
        SB_CUDA_CHECK(cudaMemsetAsync(*ptr, 0, rounded, sb_cuda_ctx.stream), SB_ERR_DEVICE);
    if (!st) st = SB_CUDA_CHECK(cudaStreamSynchronize(sb_cuda_ctx.stream), SB_ERR_DEVICE);
    if (st) {
        mem_track_free(*ptr);
        cudaFree(*ptr);
        *ptr = NULL;
    }
    return st;
}

void sb_cuda_free(void *ptr)
{
    if (!ptr) return;
    mem_track_free(ptr);
    /* cudaFree implicitly synchronises the device. A failure (a block freed
     * twice, not from cudaMalloc) is the thread's sticky error, named here:
     * left as the runtime's last error, the next unrelated check would
     * report it as its own (seen on an H200: a test's double free surfaced
     * as "cudaGetLastError() ... invalid argument" in a later sync). */
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) {
        cudaGetLastError();
        sb_cuda_fail("cudaFree", cudaGetErrorString(e));
    }
}

/* Asynchronous on the thread's stream, and host_src may be reused or freed
 * on return (callers free the initial parameters at once): a copy from
 * pageable memory is staged through the driver's pinned buffers before
 * cudaMemcpyAsync returns (CUDA runtime API, "API synchronization
 * behavior"), but one from pinned memory (cudaMallocHost) is a DMA still in
 * flight, so for those this waits for the stream. */
sb_status sb_cuda_upload(void *dst, const void *host_src, size_t bytes)
{
    if (!sb_cuda_ensure_ctx())
        return sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
    if (bytes == 0) return SB_OK;
    SB_TRY(SB_CUDA_CHECK(
        cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, sb_cuda_ctx.stream),
        SB_ERR_DEVICE));
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, host_src) != cudaSuccess) {
        cudaGetLastError(); /* unknown to CUDA: pageable */
        return SB_OK;
    }
    if (attr.type != cudaMemoryTypeHost) return SB_OK;
    return SB_CUDA_CHECK(cudaStreamSynchronize(sb_cuda_ctx.stream), SB_ERR_DEVICE);
}

/* Synchronous: host_dst holds the data on return. */
sb_status sb_cuda_download(void *host_dst, const void *src, size_t bytes)
{
    if (!sb_cuda_ensure_ctx())
        return sb_error(SB_ERR_DEVICE, "cuda backend: %s", sb_cuda_ctx.error);
    if (bytes == 0) return SB_OK;
    SB_TRY(SB_CUDA_CHECK(
        cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, sb_cuda_ctx.stream),
        SB_ERR_DEVICE));
    return SB_CUDA_CHECK(cudaStreamSynchronize(sb_cuda_ctx.stream), SB_ERR_DEVICE);
}
