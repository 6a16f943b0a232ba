/* What a graph-ready training step needs from CUDA beyond the backend ops:
 * batch indices taken on the device from the epoch's permutation, and
 * capture and replay of a whole step as a CUDA graph (--cuda-graph: the
 * capture's state is a struct sb_cuda_step_graph, so a caller keeps no
 * graph handle or capture flag of its own). See
 * the declarations in cuda.h and docs/gpu.md ("Graph-ready step"). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

/* The state of one --cuda-graph step (cuda.h): the executable graph once
 * captured, and whether a capture is open on the owner's stream. */
struct sb_cuda_step_graph {
    cudaGraphExec_t exec; /* NULL until a capture ended and was instantiated */
    int capturing;
};

extern "C" sb_status sb_cuda_step_graph_create(struct sb_cuda_step_graph **out)
{
    *out = (struct sb_cuda_step_graph *)calloc(1, sizeof **out);
    return *out ? SB_OK : sb_error(SB_ERR_NOMEM, "cuda graph: out of memory");
}

extern "C" void sb_cuda_step_graph_destroy(struct sb_cuda_step_graph *g)
{
    if (!g) return;
    if (g->capturing) sb_cuda_step_graph_abort(g);
    if (g->exec) cudaGraphExecDestroy(g->exec);
    free(g);
}

extern "C" int sb_cuda_step_graph_ready(const struct sb_cuda_step_graph *g)
{
    return g->exec != NULL;
}

extern "C" int sb_cuda_step_graph_capturing(const struct sb_cuda_step_graph *g)
{
    return g->capturing;
}

/* Thread-local capture: other threads (mirrored's replicas, NCCL's) may
 * keep calling CUDA while this one captures. */
extern "C" sb_status sb_cuda_step_graph_begin(struct sb_cuda_step_graph *g)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return sb_error(SB_ERR_DEVICE, "cuda graph: no CUDA stream on this thread");
    SB_TRY(SB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                         SB_ERR_DEVICE));
    g->capturing = 1;
    return SB_OK;
}

/* Ends the open capture; *graph the captured graph (NULL on failure). */
static sb_status end_capture(struct sb_cuda_step_graph *g, cudaGraph_t *graph)
{
    *graph = NULL;
    g->capturing = 0;
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return sb_error(SB_ERR_DEVICE, "cuda graph: no CUDA stream on this thread");
    return SB_CUDA_CHECK(cudaStreamEndCapture(s, graph), SB_ERR_DEVICE);
}

extern "C" sb_status sb_cuda_step_graph_end(struct sb_cuda_step_graph *g)
{
    cudaGraph_t graph = NULL;
    sb_status st = end_capture(g, &graph);
    cudaGraphExec_t exec = NULL;
    if (!st) st = SB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0), SB_ERR_DEVICE);
    if (graph) cudaGraphDestroy(graph); /* the executable graph is independent of it */
    if (!st) g->exec = exec;
    return st;
}

extern "C" void sb_cuda_step_graph_abort(struct sb_cuda_step_graph *g)
{
    /* The failure that ended the step stays the one reported, even when
     * ending the (then invalid) capture fails too. */
    char kept[1024];
    snprintf(kept, sizeof kept, "%s", sb_error_message());
    cudaGraph_t graph = NULL;
    if (end_capture(g, &graph)) sb_error_set_message(kept);
    if (graph) cudaGraphDestroy(graph);
}

extern "C" sb_status sb_cuda_step_graph_launch(struct sb_cuda_step_graph *g)
{
    cudaStream_t s = sb_cuda_thread_stream();
    if (!s) return sb_error(SB_ERR_DEVICE, "cuda graph: no CUDA stream on this thread");
    return SB_CUDA_CHECK(cudaGraphLaunch(g->exec, s), SB_ERR_DEVICE);
}
