/* Strategy "mirrored": where replicas live (the job's placement) and how
 * they talk: communicators and the device-side reduction of replicas sharing one GPU
 * (ReductionToOneDevice, as TensorFlow's logical devices reduce). See
 * mirrored.h. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "core/nvtx.h"
#include "strategies/shared/mirrored.h"
#include "strategies/shared/precision.h"

sb_status sb_mirrored_create_comms(struct mirrored *mr)
{
    const struct sb_config *cfg = mr->env->cfg;
    const struct sb_placement *p = mr->env->placement; /* the harness's: replica i on device[i] */
    if (p->replicas != mr->n)
        return sb_error(SB_ERR_INTERNAL, "mirrored: %d replicas placed, %d run", p->replicas,
                        mr->n);
    for (int i = 0; i < mr->n; i++) mr->members[i].device = p->device[i];
    if (p->shared_gpu) { /* every replica on the host's one GPU: reduced on the device */
        mr->on_device = 1;
        return SB_OK;
    }
    size_t members = mr->n > 0 ? (size_t)mr->n : 1;
    int *devices = malloc(members * sizeof *devices);
    struct sb_comm **comms = calloc(members, sizeof *comms);
    sb_status st = SB_OK;
    if (!devices || !comms) st = sb_error(SB_ERR_NOMEM, "mirrored: out of memory");
    for (int i = 0; !st && i < mr->n; i++) devices[i] = mr->members[i].device;
    if (!st) st = sb_comm_threads_create(cfg, mr->n, devices, &mr->group, comms);
    for (int i = 0; comms && i < mr->n; i++) mr->members[i].comm = comms[i]; /* freed by destroy */
    free(devices);
    free(comms);
    return st;
}

sb_status sb_mirrored_create_replica(struct member *me)
{
#ifdef SB_HAVE_CUDA
    if (me->device >= 0) SB_TRY(sb_cuda_set_device(me->device));
#endif
    SB_TRY(sb_replica_create(me->owner->env, 1, &me->replica));
#ifdef SB_HAVE_CUDA
    if (me->device >= 0) me->replica->device_comm = 1; /* comm timed by events */
    if (me->owner->on_device) SB_TRY(sb_cuda_event_create(&me->event));
#endif
    return SB_OK;
}

void sb_mirrored_release_replica(struct member *me)
{
    sb_replica_destroy(me->replica);
    me->replica = NULL;
#ifdef SB_HAVE_CUDA
    sb_cuda_event_destroy(me->event);
    me->event = NULL;
    if (me->device >= 0) sb_cuda_release_thread();
#endif
}

#ifdef SB_HAVE_CUDA
static void mid_barrier(struct mirrored *mr) { sb_barrier_wait(&mr->mid); }

/* The buffer the device-side reduction works on: gradients when summing,
 * parameters when broadcasting. */
static float *share_buf(const struct member *m, int sum_grads)
{
    return sum_grads ? m->replica->model->grads : m->replica->model->params;
}
#endif

sb_status sb_mirrored_device_share(struct member *me, int sum_grads)
{
#ifndef SB_HAVE_CUDA
    (void)me, (void)sum_grads;
    return sb_error(SB_ERR_INTERNAL, "mirrored: device-side reduction without CUDA");
#else
    struct mirrored *mr = me->owner;
    const struct sb_backend_ops *be = mr->env->be;
    struct member *lead = &mr->members[0];
    int leader = me->index == 0;
    float *buf = share_buf(me, sum_grads);
    size_t n = me->replica->model->n_params;
    /* A comm range with the bytes each replica's buffer holds, as the
     * communicators' wrappers open around an all-reduce or broadcast. */
    sb_nvtx_push_bytes(sum_grads ? "allreduce.device" : "broadcast.device", SB_NVTX_COMM,
                       n * sizeof *buf);
    /* Each member keeps its first error but still passes every barrier. */
    sb_status st = sb_cuda_event_record(me->event); /* 1: buf written */
    mid_barrier(mr);
    if (leader) { /* 2: sum into replica 0's buf on its stream */
        for (int r = 1; r < mr->n && !st; r++) {
            st = sb_cuda_stream_wait_event(mr->members[r].event);
            if (!st && sum_grads) be->add(buf, share_buf(&mr->members[r], 1), n);
        }
        /* --precision bf16|fp16: the sum rounded once to 16 bits, as the
         * threads' 16-bit all-reduce on the CPU does (local.c: fp32 sums in
         * replica order, rounded once), so both paths make the same update;
         * a no-op at fp32. */
        if (!st && sum_grads) sb_precision_round(mr->env->cfg, be, buf, n);
        if (!st) st = sb_cuda_event_record(me->event);
    }
    mid_barrier(mr);
    if (!leader && !st) { /* 3: copy replica 0's result */
        st = sb_cuda_stream_wait_event(lead->event);
        if (!st) be->copy(buf, share_buf(lead, sum_grads), n);
        if (!st) st = sb_cuda_event_record(me->event);
    }
    mid_barrier(mr);
    for (int r = 1; leader && r < mr->n && !st; r++) /* 4: next write after the copies */
        st = sb_cuda_stream_wait_event(mr->members[r].event);
    sb_nvtx_pop();
    return st;
#endif
}
