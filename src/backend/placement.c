/* The placement rule: where every replica of a process runs; see
 * placement.h. Compiled in every build and free of CUDA calls. */
#include "backend/placement.h"

#include <stdlib.h>

#include "backend/cuda.h"

/* More members of a gpu_per_member communicator on this host than GPUs. */
static sb_status too_many_members(const struct sb_placement_request *q)
{
    int d = q->devices;
    if (q->replicas > 1) /* one process's threads (mirrored) */
        return sb_error(SB_ERR_USAGE, "--replicas %d on %d GPUs with --comm nccl: use at most "
                        "%d replicas, one GPU (CUDA_VISIBLE_DEVICES=0), or --comm mpi",
                        q->replicas, d, d);
    return sb_error(SB_ERR_USAGE,
                    "--comm nccl: %d ranks on this host but %d GPU%s (NCCL needs one GPU per "
                    "rank); use --comm mpi (ranks share a GPU through host memory) or at most "
                    "%d rank%s per host",
                    q->local_size, d, d == 1 ? "" : "s", d, d == 1 ? "" : "s");
}

sb_status sb_placement_decide(const struct sb_placement_request *q, struct sb_placement *out)
{
    *out = (struct sb_placement){0};
    int n = q->replicas > 0 ? q->replicas : 1;
    out->device = malloc((size_t)n * sizeof *out->device);
    if (!out->device) return sb_error(SB_ERR_NOMEM, "placement: out of memory");
    out->replicas = n;
    for (int i = 0; i < n; i++) out->device[i] = -1;
    if (q->host_memory) return SB_OK;
    if (q->devices < 1)
        return sb_error(SB_ERR_USAGE, "--device cuda: no CUDA device is visible on this host "
                        "(check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu)");
    for (int i = 0; i < n; i++) out->device[i] = (q->local_rank * n + i) % q->devices;
    long members = (long)q->local_size * n;
    if (!q->gpu_per_member || members <= q->devices) return SB_OK;
    if (q->local_size == 1 && q->devices == 1) { /* logical replicas on one GPU */
        out->shared_gpu = 1;
        return SB_OK;
    }
    return too_many_members(q);
}

void sb_placement_free(struct sb_placement *p)
{
    free(p->device);
    *p = (struct sb_placement){0};
}

sb_status sb_cuda_check_rank_placement(int gpu_per_rank, int ranks_on_host, int devices)
{
    if (!gpu_per_rank) return SB_OK; /* staged: ranks may share a GPU */
    struct sb_placement_request q = {.gpu_per_member = 1, .devices = devices,
                                     .local_size = ranks_on_host, .replicas = 1};
    struct sb_placement p;
    sb_status st = sb_placement_decide(&q, &p);
    sb_placement_free(&p);
    return st;
}
