/* What a graph-ready training step needs from CUDA beyond the backend ops:
 * batch indices taken on the device from the epoch's permutation, and
 * capture and replay of a whole step as a CUDA graph (--cuda-graph). See
 * the declarations in cuda.h and docs/gpu.md ("Graph-ready step"). */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda.h"
}
#include "backend/cuda_check.h"
#include "backend/cuda_internal.h"

/* idx[i] = perm[*pos + i] for i < n. */
__global__ void k_take_batch(int32_t *idx, const int32_t *perm, const int32_t *pos, int n)
{
    int base = *pos;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        idx[i] = perm[base + i];
}

/* *pos += stride, after k_take_batch has read it (stream order). */
__global__ void k_advance(int32_t *pos, int stride) { *pos += stride; }

extern "C" void sb_cuda_take_batch(int32_t *idx, const int32_t *perm, int32_t *pos, int n,
                                   int stride)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s || n <= 0) return;
    k_take_batch<<<sb_cuda_blocks((size_t)n), SB_CUDA_THREADS, 0, s>>>(idx, perm, pos, n);
    sb_cuda_check_launch("k_take_batch");
    k_advance<<<1, 1, 0, s>>>(pos, stride);
    sb_cuda_check_launch("k_advance");
}

/* Thread-local capture: other threads (mirrored's replicas, NCCL's) may
 * keep calling CUDA while this one captures. */
extern "C" sb_status sb_cuda_capture_begin(void)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return sb_error(SB_ERR_DEVICE, "cuda graph: no CUDA stream on this thread");
    return SB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                         SB_ERR_DEVICE);
}

extern "C" sb_status sb_cuda_capture_end(void **graph_exec)
{
    *graph_exec = NULL;
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return sb_error(SB_ERR_DEVICE, "cuda graph: no CUDA stream on this thread");
    cudaGraph_t graph = NULL;
    sb_status st = SB_CUDA_CHECK(cudaStreamEndCapture(s, &graph), SB_ERR_DEVICE);
    cudaGraphExec_t exec = NULL;
    if (!st) st = SB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0), SB_ERR_DEVICE);
    if (graph) cudaGraphDestroy(graph); /* the executable graph is independent of it */
    if (!st) *graph_exec = (void *)exec;
    return st;
}

extern "C" sb_status sb_cuda_graph_launch(void *graph_exec)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return sb_error(SB_ERR_DEVICE, "cuda graph: no CUDA stream on this thread");
    return SB_CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)graph_exec, s), SB_ERR_DEVICE);
}

extern "C" void sb_cuda_graph_destroy(void *graph_exec)
{
    if (graph_exec) cudaGraphExecDestroy((cudaGraphExec_t)graph_exec);
}
