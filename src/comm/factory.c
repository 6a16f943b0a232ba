/* Picks the communicator of a multi-process strategy from the device and
 * --comm: MPI between CPU ranks; NCCL, or MPI staged through pinned host
 * memory, between GPU ranks; on CPU, --allreduce picks the mpi
 * communicator's all-reduce algorithm. See comm.h. */
#include <string.h>

#include "backend/cuda.h"
#include "comm/comm.h"
#include "core/config.h"

sb_status sb_comm_world_create(const struct sb_config *cfg, const void *mpi_comm,
                               int local_rank, struct sb_comm **out)
{
    *out = NULL;
    if (strcmp(cfg->device, "cuda") != 0) {
        /* --allreduce (validated by the CLI; "" = auto): the algorithm of
         * the mpi communicator's non-blocking all-reduces. */
        enum sb_allreduce_algo algo = SB_ALLREDUCE_AUTO;
        if (cfg->allreduce[0] && sb_allreduce_algo_parse(cfg->allreduce, &algo) != 0)
            return sb_error(SB_ERR_USAGE, "--allreduce: unknown algorithm '%s'", cfg->allreduce);
        SB_TRY(sb_comm_mpi_create(mpi_comm, out));
        (*out)->allreduce_algo = algo;
        return SB_OK;
    }
#ifdef SB_HAVE_CUDA
    int count = sb_cuda_device_count();
    if (count == 0)
        return sb_error(SB_ERR_USAGE, "--device cuda: no CUDA device is visible to local "
                        "rank %d", local_rank);
    int device = local_rank % count;
    if (strcmp(cfg->comm, "mpi") == 0) {
        /* Select the GPU first: the staging copies use this thread's stream.
         * A rank that fails here still joins the collective MPI_Comm_dup
         * and then the agreement, so no rank waits for it (docs/gpu.md). */
        sb_status local = sb_cuda_set_device(device);
        struct sb_comm *inner = NULL;
        SB_TRY(sb_comm_mpi_create(mpi_comm, &inner));
        sb_status st = sb_comm_agree(inner, local, "its GPU set-up");
        if (st) {
            sb_comm_destroy(inner);
            return st;
        }
        return sb_comm_staged_create(inner, out);
    }
#ifdef SB_HAVE_NCCL
    return sb_comm_nccl_create(mpi_comm, device, out); /* selects the device itself */
#else
    return sb_error(SB_ERR_USAGE, "--comm nccl: this build has no NCCL (install libnccl-dev "
                    "and re-run ./configure.py, or use --comm mpi)");
#endif
#else
    (void)local_rank;
    return sb_error(SB_ERR_USAGE, "--device cuda: this build has no CUDA (re-run "
                    "./configure.py where the CUDA toolkit is installed)");
#endif
}
