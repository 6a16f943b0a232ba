/* Strategy "mirrored": N replicas in one process (like TensorFlow's
 * MirroredStrategy). Each replica is a thread with its own model,
 * optimizer state and batch buffers; the replicas share nothing but the
 * gradient all-reduce.
 *
 * The calling thread is replica 0; replicas 1..N-1 are persistent threads
 * that wait at a start barrier for the next job (create, broadcast, step,
 * evaluate, exit) and meet the caller at a done barrier. Each replica is
 * created, used and destroyed on its own thread, because on GPUs the thread
 * owns the device context, stream and cuBLAS handle (backend/cuda.h).
 *
 * Communicators: cpu: "local" (threads). cuda: replica r on GPU
 * r % (visible GPUs); --comm mpi: "staged" over "local" (host memory; any
 * number of replicas per GPU); --comm nccl: one replica per GPU through
 * ncclCommInitAll, or, with every replica on one GPU, a device-side
 * reduction without NCCL (mirrored_device.c). Several replicas on each of
 * several GPUs with --comm nccl is refused (usage error). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/nvtx.h"
#include "core/test_fault.h"
#include "strategies/shared/mirrored.h"
#include "strategies/shared/precision.h"

/* One replica's share of a job. Collectives are always entered, even after
 * a local failure, so that no replica is left waiting at a barrier. */
static void run_job(struct member *me)
{
    struct mirrored *mr = me->owner;
    const struct sb_config *cfg = mr->env->cfg;
    sb_status st = SB_OK;
    if (mr->job == JOB_CREATE) {
        me->status = sb_mirrored_create_replica(me);
        if (me->status) snprintf(me->message, sizeof me->message, "%s", sb_error_message());
        return;
    }
    if (mr->job == JOB_EXIT) {
        sb_mirrored_release_replica(me);
        me->status = SB_OK;
        return;
    }
    /* Every replica exists here: a failed create fails mirrored_init. */
    struct sb_model *m = me->replica->model;
    switch (mr->job) {
    case JOB_BROADCAST:
        st = mr->on_device ? sb_mirrored_device_share(me, 0)
                           : sb_comm_broadcast(me->comm, m->params, m->n_params, 0);
        break;
    case JOB_STEP: {
        /* Replica 0 runs inside the harness's step range; the others open
         * their own, so that their phases carry the step (core/nvtx.h). */
        if (me->index > 0) sb_nvtx_push("step", SB_NVTX_STEP, (uint64_t)mr->step);
        memset(&me->result, 0, sizeof me->result);
        st = sb_replica_gradients(me->replica, mr->global_idx + (size_t)me->index * cfg->batch,
                                  cfg->batch, sb_config_global_batch(cfg), NULL, NULL,
                                  &me->result);
        double t0 = sb_now_s();
        /* Entered even after a failure, so that no replica waits forever.
         * --precision bf16|fp16: the gradients are 16-bit, and so is their
         * all-reduce's result (2 bytes a value counted, as ddp's wire). */
        int fmt = SB_HALF_BF16;
        sb_status cst = mr->on_device ? sb_mirrored_device_share(me, 1)
                        : sb_precision_half(cfg, &fmt)
                            ? sb_comm_allreduce16(me->comm, (enum sb_half_format)fmt, m->grads,
                                                  m->n_params, NULL)
                            : sb_comm_allreduce(me->comm, m->grads, m->n_params);
        double comm_ms = 1e3 * (sb_now_s() - t0);
        if (!me->replica->device_comm) { /* cpu: host clocks; GPUs: events (replica.h) */
            me->result.phase_ms[SB_PHASE_COMM] += comm_ms;
            me->result.phase_ms[SB_PHASE_COMM_EXPOSED] += comm_ms;
        }
        if (!st) st = cst;
        if (!st) st = sb_replica_update(me->replica, m->grads, &me->result);
        if (me->index > 0) sb_nvtx_pop();
        break;
    }
    case JOB_EVALUATE: {
        int first, count;
        sb_split_range(mr->env->data->test.n, mr->n, me->index, &first, &count);
        st = sb_replica_evaluate(me->replica, first, count, &me->correct);
        break;
    }
    case JOB_CREATE:
    case JOB_EXIT:
        break;
    }
    me->status = st;
    if (st) snprintf(me->message, sizeof me->message, "%s", sb_error_message());
}

static void *member_main(void *arg)
{
    struct member *me = arg;
    struct mirrored *mr = me->owner;
    char name[32];
    snprintf(name, sizeof name, "replica %d", me->index);
    sb_nvtx_name_thread(name);
    for (;;) {
        sb_barrier_wait(&mr->start);
        enum job job = mr->job;
        run_job(me);
        sb_barrier_wait(&mr->done);
        if (job == JOB_EXIT) return NULL;
    }
}

/* Runs `job` on all replicas (replica 0 on this thread) and returns the
 * first replica's failure, its message carried to this thread. Replica 0
 * waits for the others at most the watchdog's timeout after finishing its
 * own share (their exchanges have the same deadline, so a replica that has
 * not arrived by then is hung). */
static sb_status dispatch(struct mirrored *mr, enum job job)
{
    mr->job = job;
    sb_barrier_wait(&mr->start);
    run_job(&mr->members[0]);
    if (sb_barrier_wait_until(&mr->done, sb_watchdog_deadline(sb_now_s()), 0) != SB_OK) {
        mr->stalled = 1;
        if (mr->members[0].status) {
            sb_error_set_message(mr->members[0].message);
            return mr->members[0].status;
        }
        return sb_error(SB_ERR_COMM, "watchdog: mirrored replica threads did not finish "
                        "their work within %g s", sb_watchdog_timeout_s());
    }
    for (int i = 0; i < mr->n; i++) {
        if (mr->members[i].status) {
            sb_error_set_message(mr->members[i].message);
            return mr->members[i].status;
        }
    }
    return SB_OK;
}

/* pthread_create failed after `started` replica threads had started: they
 * wait at `start`, which counts all N. Shrinks the barriers to the threads
 * that exist, sends those the exit job and joins them, so that destroy()
 * finds no thread running. */
static void release_started(struct mirrored *mr, int started)
{
    sb_barrier_resize(&mr->start, started + 1);
    sb_barrier_resize(&mr->done, started + 1);
    sb_barrier_resize(&mr->mid, started + 1);
    mr->job = JOB_EXIT;
    sb_barrier_wait(&mr->start);
    sb_barrier_wait(&mr->done);
    for (int i = 1; i <= started; i++) {
        pthread_join(mr->members[i].thread, NULL);
        mr->members[i].started = 0;
    }
}

static void mirrored_destroy(struct sb_strategy *s)
{
    struct mirrored *mr = s->impl;
    if (!mr) return;
    /* A hung thread may still use its replica: free nothing (the process
     * is ending with the watchdog's error). */
    if (mr->stalled) return;
    int threads = 0;
    for (int i = 1; i < mr->n; i++) threads += mr->members[i].started;
    if (threads == mr->n - 1 && mr->barriers_ready) {
        /* destroy reports nothing, so the exit job's status is dropped; but a
         * thread that does not finish it by the watchdog's deadline has set
         * mr->stalled, and joining it would hang: free nothing, as above. */
        (void)dispatch(mr, JOB_EXIT);
        if (mr->stalled) return;
        for (int i = 1; i < mr->n; i++) pthread_join(mr->members[i].thread, NULL);
    }
    for (int i = 0; i < mr->n; i++) {
        sb_mirrored_release_replica(&mr->members[i]); /* those the threads did not free */
        sb_comm_destroy(mr->members[i].comm);
    }
    if (mr->barriers_ready) {
        sb_barrier_destroy(&mr->start);
        sb_barrier_destroy(&mr->done);
        sb_barrier_destroy(&mr->mid);
    }
    sb_local_group_destroy(mr->group);
    free(mr->members);
    free(mr->compute_ms);
    free(mr);
}

static sb_status mirrored_init(struct sb_strategy *s)
{
    const struct sb_config *cfg = s->env->cfg;
    struct mirrored *mr = calloc(1, sizeof *mr);
    if (!mr) return sb_error(SB_ERR_NOMEM, "mirrored: out of memory");
    s->impl = mr;
    mr->env = s->env;
    mr->n = cfg->replicas;
    mr->members = calloc((size_t)mr->n, sizeof *mr->members);
    mr->compute_ms = calloc((size_t)mr->n, sizeof *mr->compute_ms);
    if (!mr->members || !mr->compute_ms) return sb_error(SB_ERR_NOMEM, "mirrored: out of memory");
    /* OpenBLAS's thread count is per process: with one thread per replica,
     * each GEMM runs on its replica's thread alone. */
    if (mr->n > 1 && s->env->be->set_threads) s->env->be->set_threads(1);
    for (int i = 0; i < mr->n; i++) {
        mr->members[i].owner = mr;
        mr->members[i].index = i;
        mr->members[i].device = -1;
    }
    SB_TRY(sb_mirrored_create_comms(mr));
    SB_TRY(sb_barrier_init(&mr->start, mr->n));
    if (sb_barrier_init(&mr->done, mr->n)) {
        sb_barrier_destroy(&mr->start);
        return sb_error(SB_ERR_INTERNAL, "mirrored: cannot create barriers");
    }
    if (sb_barrier_init(&mr->mid, mr->n)) {
        sb_barrier_destroy(&mr->start);
        sb_barrier_destroy(&mr->done);
        return sb_error(SB_ERR_INTERNAL, "mirrored: cannot create barriers");
    }
    mr->barriers_ready = 1;
    for (int i = 1; i < mr->n; i++) {
        int rc = sb_test_fault("thread-create", i) ? EAGAIN :
                 pthread_create(&mr->members[i].thread, NULL, member_main, &mr->members[i]);
        if (rc != 0) {
            release_started(mr, i - 1);
            return sb_error(SB_ERR_INTERNAL, "mirrored: cannot start replica thread %d of %d: "
                            "%s (the limit on processes, ulimit -u, or memory)", i, mr->n - 1,
                            strerror(rc));
        }
        mr->members[i].started = 1;
    }
    SB_TRY(dispatch(mr, JOB_CREATE));
    /* The harness reads replica 0's parameters (on this thread, its GPU's)
     * and counts replica 0's communicator. */
    s->replica = mr->members[0].replica;
    /* One process: no s->world. Replicas sharing one GPU have no
     * communicator (mirrored_device.c reduces on the device): none counted. */
    if (mr->members[0].comm) s->comms[s->n_comms++] = mr->members[0].comm;
    return dispatch(mr, JOB_BROADCAST);
}

static sb_status mirrored_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                               struct sb_step_result *out)
{
    struct mirrored *mr = s->impl;
    mr->global_idx = global_idx;
    mr->step = step;
    SB_TRY(dispatch(mr, JOB_STEP));
    /* Phases are replica 0's; loss and samples cover every replica. Wait is
     * how long replica 0 idles at the all-reduce for the slowest replica's
     * compute (data + h2d + forward + backward), as the harness derives it
     * across MPI ranks (reports/README.md); it is part of comm's time. */
    memcpy(out->phase_ms, mr->members[0].result.phase_ms, sizeof out->phase_ms);
    out->compute_wall_s = mr->members[0].result.compute_wall_s;
    out->compute_cpu_s = mr->members[0].result.compute_cpu_s;
    for (int i = 0; i < mr->n; i++) {
        mr->compute_ms[i] = sb_phase_compute_ms(mr->members[i].result.phase_ms);
        out->loss_sum += mr->members[i].result.loss_sum;
        out->samples += mr->members[i].result.samples;
    }
    out->phase_ms[SB_PHASE_WAIT] = sb_phase_wait_ms(mr->compute_ms, mr->n, 0);
    return SB_OK;
}

static sb_status mirrored_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct mirrored *mr = s->impl;
    SB_TRY(dispatch(mr, JOB_EVALUATE));
    long correct = 0;
    for (int i = 0; i < mr->n; i++) correct += mr->members[i].correct;
    *accuracy = (double)correct / s->env->data->test.n;
    return SB_OK;
}

/* Every replica thread's parameters (read between steps, while the
 * threads wait for the next job). */
static float *mirrored_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct mirrored *mr = s->impl;
    *n = mr->n;
    return i >= 0 && i < mr->n ? mr->members[i].replica->model->params : NULL;
}

/* One entry per replica thread of this process. */
static int mirrored_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    const struct mirrored *mr = s->impl;
    int k = 0;
    for (int i = 0; i < mr->n && k < cap; i++)
        if (mr->members[i].replica) sb_memory_entry_of_replica(s, mr->members[i].replica, i,
                                                               &out[k++]);
    return k;
}

const struct sb_strategy_ops sb_strategy_mirrored = {
    .name = "mirrored",
    .summary = "N replicas in one process, one thread (and GPU) each (TF MirroredStrategy)",
    .uses_mpi = 0,
    .init = mirrored_init,
    .step = mirrored_step,
    .evaluate = mirrored_evaluate,
    .destroy = mirrored_destroy,
    .replica_params = mirrored_replica_params,
    .memory = mirrored_memory,
};
