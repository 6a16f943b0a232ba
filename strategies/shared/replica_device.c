/* The device path of a replica's step (cuda): graph-ready, and with
 * --cuda-graph captured once and replayed. See replica_device.h, and
 * docs/gpu.md ("Graph-ready step").
 *
 * Graph-ready means: inside a step the host neither waits for the device
 * nor copies to it nor allocates. The epoch's permutation goes to the
 * device once per epoch; a step's batch indices are taken from it on the
 * device at a position kept in device memory (sb_cuda_take_batch), the
 * loss is summed in device memory (read once per epoch, replica.c), the
 * scratch of the reductions and cuBLAS's workspace exist from set-up, and
 * the phase timer's events were created at set-up. The only host waits
 * are the timer's read of the previous step's marks (it waits while the
 * device has not finished that step, so the host stays at most one step
 * ahead) and, once per epoch, the permutation upload and the loss read.
 *
 * --cuda-graph (single only): steps before the capture run eagerly (the
 * first one loads kernels and sizes cuBLAS); at the next step everything
 * the step enqueues, from taking the batch to the optimizer, is captured
 * into one CUDA graph (thread-local stream capture), which is then
 * launched for that step and for every later one. The batch indices come
 * from device memory that the graph's first kernel reads and advances, so
 * each replay trains on the next batch. */
#ifdef SB_HAVE_CUDA

#include <stdlib.h>

#include "backend/cuda.h"
#include "core/nvtx.h"
#include "data/sampler.h"
#include "strategies/shared/replica_device.h"

/* Phase timer marks of a device step (struct sb_replica.timer). */
enum {
    MARK_START = 0,   /* before the batch is taken */
    MARK_DATA_END,    /* batch indices taken, images gathered and normalised */
    MARK_FORWARD_END,
    MARK_BACKWARD_END,
    MARK_OPT_START,   /* after the strategy's synchronisation */
    MARK_OPT_END
};

sb_status sb_replica_device_init(struct sb_replica *r)
{
    const struct sb_backend_ops *be = r->env->be;
    size_t n = (size_t)r->env->data->train.n;
    SB_TRY(sb_cuda_reserve_rows((size_t)r->max_batch));
    SB_TRY(be->alloc((void **)&r->dev_perm, n * sizeof *r->dev_perm));
    SB_TRY(be->alloc((void **)&r->dev_pos, sizeof *r->dev_pos));
    r->host_perm = malloc(n * sizeof *r->host_perm);
    r->host_inv = malloc(n * sizeof *r->host_inv);
    if (!r->host_perm || !r->host_inv) return sb_error(SB_ERR_NOMEM, "replica: out of memory");
    return sb_cuda_timer_create(&r->timer);
}

void sb_replica_device_free(struct sb_replica *r)
{
    const struct sb_backend_ops *be = r->env->be;
    sb_cuda_graph_destroy(r->graph);
    be->free(r->dev_perm);
    be->free(r->dev_pos);
    free(r->host_perm);
    free(r->host_inv);
    sb_cuda_timer_destroy(r->timer);
}

/* Makes dev_perm hold the permutation of the epoch this step belongs to
 * (computed here from the seed, as the harness does: sampler.h; uploaded at
 * the epoch's first step) and *dev_pos the start of idx's slice in it. The
 * host knows where the slice is from the inverse permutation and checks
 * that idx[0..n) is that contiguous slice; *dev_pos is written only when it
 * is not where the previous step's advance left it (an epoch's first step).
 * Errors: SB_ERR_INTERNAL if idx is not a slice of the epoch's permutation;
 * the upload's. */
static sb_status place_batch(struct sb_replica *r, const int32_t *idx, int n, int global_batch)
{
    const struct sb_backend_ops *be = r->env->be;
    int total = r->env->data->train.n;
    int epoch = (int)(r->steps / r->steps_per_epoch) + 1;
    if (epoch != r->perm_epoch) {
        sb_epoch_permutation(r->env->cfg->seed, epoch, r->host_perm, total);
        for (int i = 0; i < total; i++) r->host_inv[r->host_perm[i]] = i;
        /* Pageable source: the copy is staged before this returns (and
         * waits for the stream first): once per epoch. */
        SB_TRY(be->upload(r->dev_perm, r->host_perm, (size_t)total * sizeof *r->host_perm));
        r->perm_epoch = epoch;
        r->next_pos = -1;
    }
    if (n <= 0 || idx[0] < 0 || idx[0] >= total)
        return sb_error(SB_ERR_INTERNAL, "replica: batch of %d indices starting at %d", n,
                        n > 0 ? idx[0] : -1);
    long pos = r->host_inv[idx[0]];
    for (int k = 0; k < n; k++)
        if (pos + k >= total || r->host_perm[pos + k] != idx[k])
            return sb_error(SB_ERR_INTERNAL, "replica: the step's indices are not a slice of "
                            "epoch %d's permutation (sampler.h)", epoch);
    if (pos != r->next_pos) {
        int32_t p = (int32_t)pos;
        SB_TRY(be->upload(r->dev_pos, &p, sizeof p));
    }
    r->next_pos = pos + global_batch;
    return SB_OK;
}

/* Adds the previous step's device time from mark a to mark b to phase p
 * (nothing when that step did not record both marks). */
static sb_status add_previous(struct sb_replica *r, int a, int b, enum sb_phase p,
                              struct sb_step_result *res)
{
    double ms = -1.0;
    SB_TRY(sb_cuda_timer_previous_ms(r->timer, a, b, &ms));
    if (ms >= 0.0 && res) res->phase_ms[p] += ms;
    return SB_OK;
}

/* Records mark `mark` unless this step is being captured (a record inside
 * the graph would replay into the same event every step). */
static sb_status mark(struct sb_replica *r, int mark)
{
    return r->capturing ? SB_OK : sb_cuda_timer_mark(r->timer, mark);
}

/* A replayed step: the graph does everything from taking the batch to the
 * optimizer; the marks around the launch time it as a whole. */
static sb_status replay(struct sb_replica *r, int n, struct sb_step_result *res)
{
    SB_TRY(sb_cuda_timer_mark(r->timer, MARK_START));
    SB_TRY(sb_cuda_graph_launch(r->graph));
    SB_TRY(sb_cuda_timer_mark(r->timer, MARK_OPT_END));
    SB_TRY(r->env->be->check());
    /* Read only to wait while the device is more than a step behind (the
     * graph's phases are not split: docs/gpu.md). */
    SB_TRY(add_previous(r, MARK_START, MARK_OPT_END, SB_PHASE_COUNT, NULL));
    r->replayed = 1;
    res->samples += n;
    return sb_replica_count_step(r, res);
}

static sb_status gradients(struct sb_replica *r, int n, int global_batch,
                           sb_grad_ready_fn ready, void *ctx, struct sb_step_result *res)
{
    const struct sb_backend_ops *be = r->env->be;
    const struct sb_split *sp = &r->env->data->train;
    struct sb_model *m = r->model;
    sb_nvtx_push("data", SB_NVTX_DATA, 0);
    sb_status st = mark(r, MARK_START);
    if (!st) {
        sb_cuda_take_batch(r->dev_idx, r->dev_perm, r->dev_pos, n, global_batch);
        be->gather(r->x, r->y, r->dev_train_pixels, r->dev_train_labels, r->dev_idx, n,
                   sp->rows * sp->cols);
        st = mark(r, MARK_DATA_END);
    }
    sb_nvtx_pop();
    if (st) return st;

    sb_nvtx_push("forward", SB_NVTX_FORWARD, 0);
    st = m->ops->forward(m, r->x, r->y, n, 1.0f / (float)global_batch, r->loss_acc);
    if (!st) st = be->check();
    if (!st) st = mark(r, MARK_FORWARD_END);
    sb_nvtx_pop();
    if (st) return st;

    sb_nvtx_push("backward", SB_NVTX_BACKWARD, 0);
    st = m->ops->backward(m, ready, ctx);
    if (!st) st = mark(r, MARK_BACKWARD_END);
    sb_nvtx_pop();
    if (st || r->capturing) return st;

    /* The previous step's marks: these reads wait only while the device
     * has not finished the previous step, so the host runs at most one step
     * ahead and never waits for the step it is issuing. */
    SB_TRY(add_previous(r, MARK_START, MARK_DATA_END, SB_PHASE_DATA, res));
    SB_TRY(add_previous(r, MARK_DATA_END, MARK_FORWARD_END, SB_PHASE_FORWARD, res));
    SB_TRY(add_previous(r, MARK_FORWARD_END, MARK_BACKWARD_END, SB_PHASE_BACKWARD, res));
    SB_TRY(add_previous(r, MARK_OPT_START, MARK_OPT_END, SB_PHASE_OPTIMIZER, res));
    if (r->device_comm) {
        SB_TRY(add_previous(r, MARK_BACKWARD_END, MARK_OPT_START, SB_PHASE_COMM, res));
        SB_TRY(add_previous(r, MARK_BACKWARD_END, MARK_OPT_START, SB_PHASE_COMM_EXPOSED, res));
    }
    return SB_OK;
}

sb_status sb_replica_device_gradients(struct sb_replica *r, const int32_t *idx, int n,
                                      int global_batch, sb_grad_ready_fn ready, void *ctx,
                                      struct sb_step_result *res)
{
    sb_cuda_timer_begin_step(r->timer);
    SB_TRY(place_batch(r, idx, n, global_batch));
    if (r->graph) return replay(r, n, res);
    if (r->env->cfg->cuda_graph && r->steps >= 1) { /* capture this step */
        SB_TRY(sb_cuda_capture_begin());
        r->capturing = 1;
    }
    sb_status st = gradients(r, n, global_batch, ready, ctx, res);
    if (st && r->capturing) { /* leave the stream usable for the error path */
        void *g = NULL;
        sb_cuda_capture_end(&g);
        sb_cuda_graph_destroy(g);
        r->capturing = 0;
    }
    SB_TRY(st);
    res->samples += n;
    /* A captured step has not run yet: counted (and its loss read, when
     * due) after its launch, in sb_replica_device_update. */
    return r->capturing ? SB_OK : sb_replica_count_step(r, res);
}

sb_status sb_replica_device_update(struct sb_replica *r, const float *grads,
                                   struct sb_step_result *res)
{
    const struct sb_backend_ops *be = r->env->be;
    if (r->replayed) { /* the graph's last kernels were this optimizer step */
        r->replayed = 0;
        return SB_OK;
    }
    sb_nvtx_push("optimizer", SB_NVTX_OPTIMIZER, 0);
    sb_status st = mark(r, MARK_OPT_START);
    if (!st) {
        sb_optimizer_step(&r->opt, r->model->params, grads);
        st = mark(r, MARK_OPT_END);
    }
    if (!st) st = be->check();
    sb_nvtx_pop();
    if (st || !r->capturing) return st;
    /* The end of the captured step: instantiate the graph, then run it for
     * this step, timed as a replayed step is. */
    r->capturing = 0;
    SB_TRY(sb_cuda_capture_end(&r->graph));
    SB_TRY(be->check());
    SB_TRY(sb_cuda_timer_mark(r->timer, MARK_START));
    SB_TRY(sb_cuda_graph_launch(r->graph));
    SB_TRY(sb_cuda_timer_mark(r->timer, MARK_OPT_END));
    SB_TRY(be->check());
    return sb_replica_count_step(r, res);
}

#endif /* SB_HAVE_CUDA */
