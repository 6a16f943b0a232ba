/* Internal to strategy "mirrored" (mirrored.c: threads and jobs;
 * mirrored_device.c: the placement's devices, communicators and the device-side
 * reduction). Not a public interface. */
#ifndef SB_MIRRORED_H
#define SB_MIRRORED_H

#include <pthread.h>

#include "core/barrier.h"
#include "strategies/shared/replica.h"

enum job { JOB_CREATE, JOB_BROADCAST, JOB_STEP, JOB_EVALUATE, JOB_EXIT };

struct member {
    struct mirrored *owner;
    int index;
    int device;                 /* cuda: GPU of this replica; -1 on cpu */
    struct sb_replica *replica; /* created and destroyed on this member's thread */
    struct sb_comm *comm;       /* NULL with the device-side reduction */
    void *event;                /* device-side reduction: cudaEvent_t, this thread's */
    struct sb_step_result result;
    long correct;
    sb_status status;
    char message[512];
    pthread_t thread;
    int started;
};

struct mirrored {
    const struct sb_strategy_env *env;
    int n;
    struct member *members;
    struct sb_local_group *group;
    struct sb_barrier start, done;
    struct sb_barrier mid;      /* the device-side reduction's phases */
    int barriers_ready;
    int on_device;              /* every replica on one GPU, reduced without NCCL */
    enum job job;               /* written by replica 0 before `start` */
    int stalled;                /* a replica thread missed the done barrier's deadline:
                                 * the threads are left alone, the process is ending */
    const int32_t *global_idx;
    long step;                  /* the step a JOB_STEP runs (the replica threads' NVTX ranges) */
    double *compute_ms;         /* (n) each replica's compute time this step, for wait */
};

/* Takes each member's device from the job's placement (env->placement,
 * backend/placement.h: replica r on GPU r % count on cuda, shared_gpu when
 * several share a host's one GPU under nccl) and creates the communicators from the registry (sb_comm_threads_create; on
 * the calling thread; nothing here touches a GPU except ncclCommInitAll):
 * cpu: "local"; cuda + --comm mpi: "staged" over "local"; cuda + --comm
 * nccl: ncclCommInitAll over distinct GPUs, or, when every replica lands on
 * one GPU, none (mr->on_device = 1: the device-side reduction). Errors:
 * SB_ERR_INTERNAL when the placement has another replica count; those of
 * sb_comm_threads_create. */
sb_status sb_mirrored_create_comms(struct mirrored *mr);

/* On the member's own thread: selects its GPU (cuda), creates its replica
 * and, for the device-side reduction, its event. Errors: those of
 * sb_cuda_set_device, sb_replica_create, sb_cuda_event_create. */
sb_status sb_mirrored_create_replica(struct member *me);

/* On the member's own thread (or any thread once the threads are gone):
 * destroys its replica and event and releases the thread's CUDA context.
 * Safe when there is nothing to release. */
void sb_mirrored_release_replica(struct member *me);

/* The device-side reduction among replicas on one GPU, called by every
 * replica's thread together (collective over the `mid` barrier, entered
 * even after a local failure). sum_grads = 1: every replica's gradients
 * (n_params floats, device) become the sum over replicas; sum_grads = 0:
 * every replica's parameters become replica 0's (broadcast). Ordered by
 * events, never by host waits:
 *   1. each replica records its event after the work that wrote the buffer;
 *   2. replica 0's stream waits on every event and adds each replica's
 *      gradients into its own (sum_grads), then records its event;
 *   3. every other stream waits on replica 0's event, copies replica 0's
 *      buffer into its own and records its event;
 *   4. replica 0's stream waits on those events, so that its next write of
 *      the buffer (the next backward) follows every copy.
 * A barrier (core/barrier.h) separates the phases, so every record precedes the
 * waits on it (cudaStreamWaitEvent uses the last record at call time).
 * Errors: SB_ERR_DEVICE; SB_ERR_INTERNAL in a build without CUDA. */
sb_status sb_mirrored_device_share(struct member *me, int sum_grads);

#endif
