/* Making "nccl" communicators (see nccl.c): over the ranks of an MPI
 * communicator (rank 0 makes an ncclUniqueId and broadcasts it over MPI,
 * then every rank calls ncclCommInitRank: NCCL user guide, "Creating a
 * communicator"), one member per GPU in one process (ncclCommInitAll), and
 * by splitting one (ncclCommSplit: NCCL user guide, "Creating more
 * communicators"). */
#ifdef SB_HAVE_NCCL

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "backend/cuda_check.h"
#include "comm/comm.h"
#include "comm/nccl_impl.h"
#include "job/job_mpi.h"

sb_status sb_comm_nccl_create(const struct sb_job *job, int device, struct sb_comm **out)
{
    MPI_Comm world = sb_job_comm(job);
    return sb_comm_nccl_create_mpi(&world, device, out);
}

sb_status sb_comm_nccl_create_mpi(const void *mpi_comm, int device, struct sb_comm **out)
{
    *out = NULL;
    MPI_Comm world = *(const MPI_Comm *)mpi_comm;
    int rank = 0, size = 0;
    if (MPI_Comm_rank(world, &rank) != MPI_SUCCESS || MPI_Comm_size(world, &size) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: MPI_Comm_rank/size failed");
    /* The backend's thread context and the NCCL communicator must share the
     * device: select it before anything else touches the GPU. A failure here
     * on one rank is shared with all (the MPI_Allreduce below) before any
     * rank enters ncclCommInitRank, which would wait for the missing rank. */
    sb_status local = sb_cuda_set_device(device);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0 && !local) local = sb_nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, world) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: MPI_Bcast of the ncclUniqueId failed");
    int failed = local != SB_OK, any_failed = 0;
    if (MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, world) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: MPI_Allreduce of the set-up status failed");
    if (local) return local;
    if (any_failed)
        return sb_error(SB_ERR_COMM, "nccl bootstrap: another rank failed to set up its GPU");
    struct sb_comm *c;
    SB_TRY(sb_nccl_member_new(device, &c));
    sb_status st = sb_nccl_check(ncclCommInitRank(&sb_nccl_impl(c)->comm, size, id, rank),
                                 "ncclCommInitRank");
    if (st) {
        sb_nccl_destroy(c);
        return st;
    }
    c->rank = rank;
    c->size = size;
    *out = c;
    return SB_OK;
}

sb_status sb_comm_nccl_create_all(int n, const int *devices, struct sb_comm **out)
{
    for (int i = 0; i < n; i++) out[i] = NULL;
    ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
    if (!comms) return sb_error(SB_ERR_NOMEM, "nccl communicator: out of memory");
    /* ncclCommInitAll visits every device; put the caller's back, so that a
     * thread that already has a backend context keeps launching on it. */
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    sb_status st = sb_nccl_check(ncclCommInitAll(comms, n, devices), "ncclCommInitAll");
    if (previous >= 0) cudaSetDevice(previous);
    for (int i = 0; i < n && !st; i++) {
        st = sb_nccl_member_new(devices[i], &out[i]);
        if (st) break;
        sb_nccl_impl(out[i])->comm = comms[i];
        comms[i] = NULL;
        out[i]->rank = i;
        out[i]->size = n;
    }
    if (st) {
        for (int i = 0; i < n; i++) {
            sb_comm_destroy(out[i]);
            out[i] = NULL;
            if (comms[i]) ncclCommDestroy(comms[i]);
        }
    }
    free(comms);
    return st;
}

/* ncclCommSplit with the parent's configuration (config NULL): the
 * members with the same color form the new communicator on the parent's
 * device, ranked by key, ties by parent rank. NCCL has no split by host:
 * color < 0 (which NCCL would read as NCCL_SPLIT_NOCOLOR, "not a member")
 * is refused. Collective over c (every member calls it; NCCL blocks until
 * all have). */
sb_status sb_nccl_split(struct sb_comm *c, int color, int key, struct sb_comm **out)
{
    *out = NULL;
    if (color < 0)
        return sb_error(SB_ERR_USAGE, "nccl: no split by host (NCCL has no shared-memory "
                        "split): split the MPI communicator and make one over its members");
    struct nccl_impl *m = sb_nccl_impl(c);
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s)); /* the parent's device, current */
    struct sb_comm *n;
    SB_TRY(sb_nccl_member_new(m->device, &n));
    sb_status st = sb_nccl_check(ncclCommSplit(m->comm, color, key, &sb_nccl_impl(n)->comm, NULL),
                                 "ncclCommSplit");
    if (!st)
        st = sb_nccl_check(ncclCommUserRank(sb_nccl_impl(n)->comm, &n->rank), "ncclCommUserRank");
    if (!st) st = sb_nccl_check(ncclCommCount(sb_nccl_impl(n)->comm, &n->size), "ncclCommCount");
    if (st) {
        sb_nccl_destroy(n);
        return st;
    }
    *out = n;
    return SB_OK;
}

#endif /* SB_HAVE_NCCL */
