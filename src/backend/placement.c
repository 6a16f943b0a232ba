/* Where GPU ranks may go: the check that NCCL's one-GPU-per-rank rule holds
 * before a job of several processes starts. Compiled in every build and free
 * of CUDA calls, so the rule is unit-tested on machines without a GPU
 * (tests/unit/test_cuda_placement.c passes fake device counts). */
#include "backend/cuda.h"

#include <string.h>

sb_status sb_cuda_check_rank_placement(int gpu_per_rank, int ranks_on_host, int devices)
{
    if (!gpu_per_rank) return SB_OK; /* staged: ranks may share a GPU */
    if (devices < 1)
        return sb_error(SB_ERR_USAGE, "--device cuda: no CUDA device is visible on this host "
                        "(check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu)");
    if (ranks_on_host <= devices) return SB_OK;
    return sb_error(SB_ERR_USAGE,
                    "--comm nccl: %d ranks on this host but %d GPU%s (NCCL needs one GPU per "
                    "rank); use --comm mpi (ranks share a GPU through host memory) or at most "
                    "%d rank%s per host",
                    ranks_on_host, devices, devices == 1 ? "" : "s", devices,
                    devices == 1 ? "" : "s");
}
