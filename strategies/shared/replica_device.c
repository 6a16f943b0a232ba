/* The device path of a replica's step (cuda; replica_path.h): the data
 * set uploaded once, graph-ready steps, phases timed by CUDA events, and
 * with --cuda-graph the step captured once and replayed (the capture's
 * state is the backend's struct sb_cuda_step_graph). See docs/gpu.md
 * ("Graph-ready step").
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
 * each replay trains on the next batch.
 *
 * The passes are functions here (enqueue_data, _forward, _backward) but
 * run only fused (sb_replica_gradients), with one slot. Offering them as
 * the path's ops means one mark pair per pass and slot, a batch position
 * per micro-batch and a capture that spans a schedule's passes; until then
 * sb_replica_data, _forward and _backward refuse the device path
 * (replica.c). */
#ifdef SB_HAVE_CUDA

#include <stdlib.h>

#include "backend/cuda.h"
#include "core/nvtx.h"
#include "data/sampler.h"
#include "strategies/shared/replica_path.h"

/* The device path's state (struct sb_replica.dev). */
struct sb_replica_device {
    /* The train and test splits uploaded once at create, raw uint8, and the
     * current batch's indices, so a step copies nothing from the host. */
    uint8_t *train_pixels, *train_labels; /* (60000, 784), (60000) */
    uint8_t *test_pixels, *test_labels;   /* (10000, 784), (10000) */
    int32_t *idx;                         /* (max_batch) */
    /* The epoch's permutation is uploaded once per epoch; a step's indices
     * are taken from it on the device at *pos, which the step advances by
     * the global batch. */
    int32_t *perm;                 /* (train.n) this epoch's permutation */
    int32_t *pos;                  /* (1) where this replica's next slice starts */
    int32_t *host_perm, *host_inv; /* (train.n) host copies: the permutation, its inverse */
    int perm_epoch;                /* epoch that perm holds; 0 = none yet */
    long next_pos;                 /* *pos as the host expects it at the next step */
    struct sb_cuda_timer *timer;   /* the phases' events on the stream */
    struct sb_cuda_step_graph *graph; /* --cuda-graph: the captured step */
    int replayed; /* this step ran as a graph launch: update has nothing to do */
};

/* Phase timer marks of a device step (struct sb_replica_device.timer). */
enum {
    MARK_START = 0,   /* before the batch is taken */
    MARK_DATA_END,    /* batch indices taken, images gathered and normalised */
    MARK_FORWARD_END,
    MARK_BACKWARD_END,
    MARK_OPT_START,   /* after the strategy's synchronisation */
    MARK_OPT_END
};

/* Copies one split (pixels and labels) into device memory. */
static sb_status upload_split(const struct sb_backend_ops *be, const struct sb_split *sp,
                              uint8_t **pixels, uint8_t **labels)
{
    size_t px = (size_t)sp->n * (size_t)sp->rows * (size_t)sp->cols;
    SB_TRY(be->alloc((void **)pixels, px));
    SB_TRY(be->upload(*pixels, sp->pixels, px));
    SB_TRY(be->alloc((void **)labels, (size_t)sp->n));
    return be->upload(*labels, sp->labels, (size_t)sp->n);
}

/* The data set lives in device memory for the whole run (55 MB for MNIST
 * per replica), so a step uploads nothing; then the reduction scratch,
 * permutation buffers, position, phase timer and step graph. */
static sb_status init(struct sb_replica *r)
{
    const struct sb_backend_ops *be = r->env->be;
    const struct sb_mnist *data = r->env->data;
    struct sb_replica_device *d = calloc(1, sizeof *d);
    if (!d) return sb_error(SB_ERR_NOMEM, "replica: out of memory");
    r->dev = d;
    SB_TRY(upload_split(be, &data->train, &d->train_pixels, &d->train_labels));
    SB_TRY(upload_split(be, &data->test, &d->test_pixels, &d->test_labels));
    SB_TRY(be->alloc((void **)&d->idx, (size_t)r->max_batch * sizeof *d->idx));
    SB_TRY(be->sync());
    size_t n = (size_t)data->train.n;
    SB_TRY(sb_cuda_reserve_rows((size_t)r->max_batch));
    SB_TRY(be->alloc((void **)&d->perm, n * sizeof *d->perm));
    SB_TRY(be->alloc((void **)&d->pos, sizeof *d->pos));
    d->host_perm = malloc(n * sizeof *d->host_perm);
    d->host_inv = malloc(n * sizeof *d->host_inv);
    if (!d->host_perm || !d->host_inv) return sb_error(SB_ERR_NOMEM, "replica: out of memory");
    SB_TRY(sb_cuda_timer_create(&d->timer));
    return sb_cuda_step_graph_create(&d->graph);
}

static void release(struct sb_replica *r)
{
    struct sb_replica_device *d = r->dev;
    if (!d) return;
    const struct sb_backend_ops *be = r->env->be;
    sb_cuda_step_graph_destroy(d->graph);
    be->free(d->train_pixels);
    be->free(d->train_labels);
    be->free(d->test_pixels);
    be->free(d->test_labels);
    be->free(d->idx);
    be->free(d->perm);
    be->free(d->pos);
    free(d->host_perm);
    free(d->host_inv);
    sb_cuda_timer_destroy(d->timer);
    free(d);
    r->dev = NULL;
}

/* Makes d->perm hold the permutation of the epoch this step belongs to
 * (computed here from the seed, as the harness does: sampler.h; uploaded at
 * the epoch's first step) and *d->pos the start of idx's slice in it. The
 * host knows where the slice is from the inverse permutation and checks
 * that idx[0..n) is that contiguous slice; *d->pos is written only when it
 * is not where the previous step's advance left it (an epoch's first step).
 * Errors: SB_ERR_INTERNAL if idx is not a slice of the epoch's permutation;
 * the upload's. */
static sb_status place_batch(struct sb_replica *r, const int32_t *idx, int n, int global_batch)
{
    const struct sb_backend_ops *be = r->env->be;
    struct sb_replica_device *d = r->dev;
    int total = r->env->data->train.n;
    int epoch = (int)(r->steps / r->steps_per_epoch) + 1;
    if (epoch != d->perm_epoch) {
        sb_epoch_permutation(r->env->cfg->seed, epoch, d->host_perm, total);
        for (int i = 0; i < total; i++) d->host_inv[d->host_perm[i]] = i;
        /* Pageable source: the copy is staged before this returns (and
         * waits for the stream first): once per epoch. */
        SB_TRY(be->upload(d->perm, d->host_perm, (size_t)total * sizeof *d->host_perm));
        d->perm_epoch = epoch;
        d->next_pos = -1;
    }
    if (n <= 0 || idx[0] < 0 || idx[0] >= total)
        return sb_error(SB_ERR_INTERNAL, "replica: batch of %d indices starting at %d", n,
                        n > 0 ? idx[0] : -1);
    long pos = d->host_inv[idx[0]];
    for (int k = 0; k < n; k++)
        if (pos + k >= total || d->host_perm[pos + k] != idx[k])
            return sb_error(SB_ERR_INTERNAL, "replica: the step's indices are not a slice of "
                            "epoch %d's permutation (sampler.h)", epoch);
    if (pos != d->next_pos) {
        int32_t p = (int32_t)pos;
        SB_TRY(be->upload(d->pos, &p, sizeof p));
    }
    d->next_pos = pos + global_batch;
    return SB_OK;
}

/* Adds the previous step's device time from mark a to mark b to phase p
 * (nothing when that step did not record both marks). */
static sb_status add_previous(struct sb_replica_device *d, int a, int b, enum sb_phase p,
                              struct sb_step_result *res)
{
    double ms = -1.0;
    SB_TRY(sb_cuda_timer_previous_ms(d->timer, a, b, &ms));
    if (ms >= 0.0 && res) res->phase_ms[p] += ms;
    return SB_OK;
}

/* Records mark `mark` unless this step is being captured (a record inside
 * the graph would replay into the same event every step). */
static sb_status mark(struct sb_replica_device *d, int mark)
{
    return sb_cuda_step_graph_capturing(d->graph) ? SB_OK : sb_cuda_timer_mark(d->timer, mark);
}

/* Launches the captured step, the marks around the launch timing it as a
 * whole (the graph's phases are not split: docs/gpu.md). */
static sb_status launch(struct sb_replica *r)
{
    struct sb_replica_device *d = r->dev;
    SB_TRY(sb_cuda_timer_mark(d->timer, MARK_START));
    SB_TRY(sb_cuda_step_graph_launch(d->graph));
    SB_TRY(sb_cuda_timer_mark(d->timer, MARK_OPT_END));
    return r->env->be->check();
}

/* A replayed step: the graph does everything from taking the batch to the
 * optimizer. */
static sb_status replay(struct sb_replica *r)
{
    SB_TRY(launch(r));
    /* Read only to wait while the device is more than a step behind. */
    SB_TRY(add_previous(r->dev, MARK_START, MARK_OPT_END, SB_PHASE_COUNT, NULL));
    r->dev->replayed = 1;
    return SB_OK;
}

/* The previous step's marks: these reads wait only while the device has
 * not finished the previous step, so the host runs at most one step ahead
 * and never waits for the step it is issuing. */
static sb_status add_previous_phases(struct sb_replica *r, struct sb_step_result *res)
{
    struct sb_replica_device *d = r->dev;
    SB_TRY(add_previous(d, MARK_START, MARK_DATA_END, SB_PHASE_DATA, res));
    SB_TRY(add_previous(d, MARK_DATA_END, MARK_FORWARD_END, SB_PHASE_FORWARD, res));
    SB_TRY(add_previous(d, MARK_FORWARD_END, MARK_BACKWARD_END, SB_PHASE_BACKWARD, res));
    SB_TRY(add_previous(d, MARK_OPT_START, MARK_OPT_END, SB_PHASE_OPTIMIZER, res));
    if (r->device_comm) {
        SB_TRY(add_previous(d, MARK_BACKWARD_END, MARK_OPT_START, SB_PHASE_COMM, res));
        SB_TRY(add_previous(d, MARK_BACKWARD_END, MARK_OPT_START, SB_PHASE_COMM_EXPOSED, res));
    }
    return SB_OK;
}

/* The passes of a device step, each enqueued (or, while capturing,
 * recorded) on the replica's stream between its two timer marks and inside
 * its NVTX range, on slot sl: enqueue_gradients runs the three in a row.
 * They are not the path's data/forward/backward ops yet (replica_path.h:
 * NULL here): the timer has one mark per phase of a step, which a second
 * slot's pass would overwrite; the data pass takes the step's whole slice
 * of the epoch's permutation (*d->pos advances by the global batch); and
 * --cuda-graph captures from the data pass to the optimizer of one step
 * (docs/design.md, "Replica passes"). */

/* Data: the step's batch indices taken on the device, the images gathered,
 * normalised and (16-bit precision) rounded into sl. */
static sb_status enqueue_data(struct sb_replica *r, struct sb_replica_slot *sl, int n,
                              int global_batch)
{
    const struct sb_backend_ops *be = r->env->be;
    const struct sb_split *sp = &r->env->data->train;
    struct sb_replica_device *d = r->dev;
    sb_nvtx_push_phase("data", SB_NVTX_DATA);
    sb_status st = mark(d, MARK_START);
    if (!st) {
        sb_cuda_take_batch(d->idx, d->perm, d->pos, n, global_batch);
        be->gather(sl->x, sl->y, d->train_pixels, d->train_labels, d->idx,
                   n, sp->rows * sp->cols);
        sb_precision_round(r->env->cfg, be, sl->x, (size_t)n * sp->rows * sp->cols);
        st = mark(d, MARK_DATA_END);
    }
    sb_nvtx_pop();
    return st;
}

/* Forward of sl's batch, its loss added to r->loss_acc on the device. */
static sb_status enqueue_forward(struct sb_replica *r, struct sb_replica_slot *sl, int n,
                                 int global_batch)
{
    const struct sb_backend_ops *be = r->env->be;
    struct sb_model *m = r->model;
    sb_nvtx_push_phase("forward", SB_NVTX_FORWARD);
    sb_status st = m->ops->forward(m, sl->x, sl->y, n,
                                   sb_loss_scaler_factor(&r->scaler) / (float)global_batch,
                                   r->loss_acc);
    if (!st) st = be->check();
    if (!st) st = mark(r->dev, MARK_FORWARD_END);
    sb_nvtx_pop();
    return st;
}

/* Backward of the last forward (the whole model keeps one batch's
 * activations), `ready` called as layers finish. */
static sb_status enqueue_backward(struct sb_replica *r, sb_grad_ready_fn ready, void *ctx)
{
    struct sb_model *m = r->model;
    sb_nvtx_push_phase("backward", SB_NVTX_BACKWARD);
    sb_status st = m->ops->backward(m, ready, ctx);
    if (!st) st = mark(r->dev, MARK_BACKWARD_END);
    sb_nvtx_pop();
    return st;
}

/* The data, forward and backward of one step on slot 0 (the fused step),
 * then the previous step's phases unless capturing. */
static sb_status enqueue_gradients(struct sb_replica *r, int n, int global_batch,
                                   sb_grad_ready_fn ready, void *ctx,
                                   struct sb_step_result *res)
{
    SB_TRY(enqueue_data(r, &r->slot[0], n, global_batch));
    SB_TRY(enqueue_forward(r, &r->slot[0], n, global_batch));
    sb_status st = enqueue_backward(r, ready, ctx);
    if (st || sb_cuda_step_graph_capturing(r->dev->graph)) return st;
    return add_previous_phases(r, res);
}

static sb_status gradients(struct sb_replica *r, const int32_t *idx, int n, int global_batch,
                           sb_grad_ready_fn ready, void *ctx, struct sb_step_result *res,
                           int *ran)
{
    struct sb_replica_device *d = r->dev;
    *ran = 0;
    sb_cuda_timer_begin_step(d->timer);
    SB_TRY(place_batch(r, idx, n, global_batch));
    if (sb_cuda_step_graph_ready(d->graph)) {
        SB_TRY(replay(r));
        *ran = 1;
        return SB_OK;
    }
    if (r->env->cfg->cuda_graph && r->steps >= 1) /* capture this step */
        SB_TRY(sb_cuda_step_graph_begin(d->graph));
    sb_status st = enqueue_gradients(r, n, global_batch, ready, ctx, res);
    if (st && sb_cuda_step_graph_capturing(d->graph)) /* leave the stream usable */
        sb_cuda_step_graph_abort(d->graph);
    SB_TRY(st);
    /* A captured step has not run yet: it runs at the end of update. */
    *ran = !sb_cuda_step_graph_capturing(d->graph);
    return SB_OK;
}

static sb_status update(struct sb_replica *r, const float *grads, struct sb_step_result *res,
                        int *ran)
{
    (void)res; /* the device's phases are read at the next step */
    const struct sb_backend_ops *be = r->env->be;
    struct sb_replica_device *d = r->dev;
    *ran = 0;
    if (d->replayed) { /* the graph's last kernels were this optimizer step */
        d->replayed = 0;
        return SB_OK;
    }
    sb_status st = mark(d, MARK_OPT_START);
    if (!st) {
        sb_optimizer_step(&r->opt, r->model->params, grads);
        st = mark(d, MARK_OPT_END);
    }
    if (!st) st = be->check();
    if (st && sb_cuda_step_graph_capturing(d->graph)) /* leave the stream usable, as in */
        sb_cuda_step_graph_abort(d->graph);            /* gradients */
    if (st || !sb_cuda_step_graph_capturing(d->graph)) return st;
    /* The end of the captured step: instantiate the graph, then run it for
     * this step, timed as a replayed step is. */
    SB_TRY(sb_cuda_step_graph_end(d->graph));
    SB_TRY(be->check());
    SB_TRY(launch(r));
    *ran = 1;
    return SB_OK;
}

/* n int32 (256 bytes for batch 64), asynchronous on the replica's stream. */
static sb_status gather_test(struct sb_replica *r, const int32_t *idx, int n)
{
    const struct sb_backend_ops *be = r->env->be;
    const struct sb_split *sp = &r->env->data->test;
    struct sb_replica_device *d = r->dev;
    SB_TRY(be->upload(d->idx, idx, (size_t)n * sizeof *idx));
    be->gather(r->slot[0].x, r->slot[0].y, d->test_pixels, d->test_labels, d->idx, n,
               sp->rows * sp->cols);
    return SB_OK;
}

const struct sb_replica_path sb_replica_device_path = {
    .on_device = 1,
    .init = init,
    .release = release,
    .gradients = gradients,
    .update = update,
    .gather_test = gather_test,
};

#endif /* SB_HAVE_CUDA */
