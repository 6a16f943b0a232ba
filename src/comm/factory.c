/* Picks the communicator of a multi-process strategy from the device:
 * NCCL between GPUs, MPI between CPU ranks. See comm.h. */
#include <string.h>

#include "backend/cuda.h"
#include "comm/comm.h"
#include "core/config.h"

sb_status sb_comm_world_create(const struct sb_config *cfg, const void *mpi_comm,
                               int local_rank, struct sb_comm **out)
{
    *out = NULL;
    if (strcmp(cfg->device, "cuda") != 0) return sb_comm_mpi_create(mpi_comm, out);
#ifdef SB_HAVE_NCCL
    int count = sb_cuda_device_count();
    if (count == 0)
        return sb_error(SB_ERR_USAGE, "--device cuda: no CUDA device is visible to rank %d",
                        local_rank);
    return sb_comm_nccl_create(mpi_comm, local_rank % count, out);
#else
    (void)local_rank;
    return sb_error(SB_ERR_USAGE, "--device cuda: this build has no NCCL for multi-process "
                    "strategies (install libnccl-dev and re-run ./configure.py)");
#endif
}
