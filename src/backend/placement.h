/* Where every replica runs: the one placement rule of the job, for every
 * strategy and backend. The harness decides it once per process before the
 * strategy's init (struct sb_strategy_env.placement) and strategies read
 * the result: ranks give their replica's GPU to the communicator registry
 * (sb_comm_world_create), mirrored its threads' GPUs to
 * sb_comm_threads_create. On a host-memory backend (cpu) every replica is
 * on the host (-1); the rule still runs, so that no strategy decides.
 * Pure: no CUDA call (the caller passes the visible device count), so the
 * rule is unit-tested without a GPU (tests/unit/test_cuda_placement.c). */
#ifndef SB_PLACEMENT_H
#define SB_PLACEMENT_H

#include "core/status.h"

/* What placement is decided from. */
struct sb_placement_request {
    int host_memory;    /* the backend's (backend.h): 1 = replicas on the host */
    int gpu_per_member; /* the communicator needs a GPU of its own per member
                         * (nccl: sb_comm_entry.gpu_per_member) */
    int devices;        /* GPUs visible on this host */
    int local_rank;     /* this process among the job's processes on its host */
    int local_size;     /* the job's processes on this host */
    int replicas;       /* replicas this process runs (mirrored's threads; 1 for a rank) */
};

/* The decision for one process. */
struct sb_placement {
    int replicas; /* entries of device */
    int *device;  /* (replicas): GPU of replica i, -1 = the host */
    /* 1 when several replicas of a gpu_per_member communicator share this
     * host's only GPU: they cannot be communicator members, so they are
     * reduced on the device (mirrored's logical devices). */
    int shared_gpu;
};

/* Decides where this process's replicas run. Host memory: every replica on
 * the host. A device backend: replica i of the process with local rank L on
 * GPU (L * replicas + i) % devices, so ranks of a host and the threads of
 * one process go round the visible GPUs. With gpu_per_member, NCCL refuses
 * two members on one GPU (ncclCommInitRank: "Duplicate GPU detected"), so
 * more replicas on a host than GPUs is a usage error naming --comm mpi,
 * except several replicas of one process on a host's only GPU (shared_gpu).
 * Errors: SB_ERR_USAGE (no GPU visible; more members than GPUs),
 * SB_ERR_NOMEM. Free out with sb_placement_free (also after an error). */
sb_status sb_placement_decide(const struct sb_placement_request *q, struct sb_placement *out);

/* Frees what sb_placement_decide allocated; safe on a zeroed struct. */
void sb_placement_free(struct sb_placement *p);

#endif
