/* One data-parallel replica; see replica.h. */
#include "strategies/shared/replica.h"

#include <stdlib.h>

#include "backend/cuda.h"
#include "core/clock.h"
#include "core/nvtx.h"
#include "data/sampler.h"
#include "strategies/shared/replica_device.h"

void sb_replica_destroy(struct sb_replica *r)
{
    if (!r) return;
    const struct sb_backend_ops *be = r->env->be;
    if (r->model) r->model->ops->destroy(r->model);
    sb_optimizer_free(&r->opt);
    be->free(r->x);
    be->free(r->y);
    free(r->eval_idx);
    be->free(r->dev_train_pixels);
    be->free(r->dev_train_labels);
    be->free(r->dev_test_pixels);
    be->free(r->dev_test_labels);
    be->free(r->dev_idx);
    be->free(r->loss_acc);
    if (!be->host_memory) sb_replica_device_free(r);
    free(r);
}

/* Copies one split (pixels and labels) into backend memory. */
static sb_status upload_split(const struct sb_backend_ops *be, const struct sb_split *sp,
                              uint8_t **pixels, uint8_t **labels)
{
    size_t px = (size_t)sp->n * (size_t)sp->rows * (size_t)sp->cols;
    SB_TRY(be->alloc((void **)pixels, px));
    SB_TRY(be->upload(*pixels, sp->pixels, px));
    SB_TRY(be->alloc((void **)labels, (size_t)sp->n));
    return be->upload(*labels, sp->labels, (size_t)sp->n);
}

/* Device backends: the dataset lives in device memory for the whole run
 * (55 MB for MNIST per replica), so a step uploads only its indices. */
static sb_status upload_dataset(struct sb_replica *r)
{
    const struct sb_backend_ops *be = r->env->be;
    const struct sb_mnist *d = r->env->data;
    SB_TRY(upload_split(be, &d->train, &r->dev_train_pixels, &r->dev_train_labels));
    SB_TRY(upload_split(be, &d->test, &r->dev_test_pixels, &r->dev_test_labels));
    SB_TRY(be->alloc((void **)&r->dev_idx, (size_t)r->max_batch * sizeof *r->dev_idx));
    return be->sync();
}

/* Gathers samples idx[0..n) (host indices) of `sp` into r->x, r->y. */
static sb_status gather(struct sb_replica *r, const struct sb_split *sp, const uint8_t *pixels,
                        const uint8_t *labels, const int32_t *idx, int n)
{
    if (!r->dev_idx) {
        /* CPU backend memory is host memory: gather straight into the batch. */
        sb_mnist_gather(sp, idx, n, r->x, r->y);
        return SB_OK;
    }
    const struct sb_backend_ops *be = r->env->be;
    /* n int32 (256 bytes for batch 64), asynchronous on the replica's stream. */
    SB_TRY(be->upload(r->dev_idx, idx, (size_t)n * sizeof *idx));
    be->gather(r->x, r->y, pixels, labels, r->dev_idx, n, sp->rows * sp->cols);
    return SB_OK;
}

sb_status sb_replica_create(const struct sb_strategy_env *env, int with_optimizer,
                            struct sb_replica **out)
{
    const struct sb_config *cfg = env->cfg;
    const struct sb_backend_ops *be = env->be;
    *out = NULL;
    struct sb_replica *r = calloc(1, sizeof *r);
    if (!r) return sb_error(SB_ERR_NOMEM, "replica: out of memory");
    r->env = env;
    r->max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    sb_status st = env->workload->create(cfg, be, r->max_batch, &r->model);
    if (st) goto fail;
    size_t in_dim = (size_t)r->model->in_dim;
    if ((st = be->alloc((void **)&r->x, (size_t)r->max_batch * in_dim * sizeof(float))) ||
        (st = be->alloc((void **)&r->y, (size_t)r->max_batch)))
        goto fail;
    if (with_optimizer && (st = sb_optimizer_init(&r->opt, be, cfg, r->model->n_params)))
        goto fail;
    if ((st = be->alloc((void **)&r->loss_acc, sizeof *r->loss_acc))) goto fail; /* zeroed */
    r->steps_per_epoch = sb_steps_per_epoch(env->data->train.n, sb_config_global_batch(cfg));
    r->eval_idx = malloc((size_t)cfg->eval_batch * sizeof *r->eval_idx);
    if (!r->eval_idx) {
        st = sb_error(SB_ERR_NOMEM, "replica: out of memory");
        goto fail;
    }
    if (!be->host_memory && ((st = upload_dataset(r)) || (st = sb_replica_device_init(r))))
        goto fail;
    *out = r;
    return SB_OK;
fail:
    sb_replica_destroy(r);
    return st;
}

/* Counts the step and, on the epoch's last step or the --max-steps step,
 * adds the loss summed since the last read to res->loss_sum and zeroes the
 * sum. On a GPU the read is the step's only wait for the device, once per
 * epoch; a failed read is an error (never a loss of 0). */
sb_status sb_replica_count_step(struct sb_replica *r, struct sb_step_result *res)
{
    const struct sb_config *cfg = r->env->cfg;
    r->steps++;
    int epoch_end = r->steps % r->steps_per_epoch == 0;
    if (!epoch_end && !(cfg->max_steps && r->steps == cfg->max_steps)) return SB_OK;
    const struct sb_backend_ops *be = r->env->be;
    double sum = 0.0;
    const double zero = 0.0;
    SB_TRY(be->download(&sum, r->loss_acc, sizeof sum));
    SB_TRY(be->upload(r->loss_acc, &zero, sizeof zero));
    res->loss_sum += sum;
    return SB_OK;
}

sb_status sb_replica_gradients(struct sb_replica *r, const int32_t *idx, int n,
                               int global_batch, sb_grad_ready_fn ready, void *ctx,
                               struct sb_step_result *res)
{
    if (r->timer) return sb_replica_device_gradients(r, idx, n, global_batch, ready, ctx, res);
    struct sb_model *m = r->model;
    double t0 = sb_now_s();
    sb_nvtx_push("data", SB_NVTX_DATA, 0);
    sb_status gst = gather(r, &r->env->data->train, r->dev_train_pixels,
                           r->dev_train_labels, idx, n);
    sb_nvtx_pop();
    if (gst) return gst;
    double t1 = sb_now_s();

    sb_nvtx_push("forward", SB_NVTX_FORWARD, 0);
    sb_status st = m->ops->forward(m, r->x, r->y, n, 1.0f / (float)global_batch, r->loss_acc);
    if (!st) st = r->env->be->check();
    sb_nvtx_pop();
    if (st) return st;
    double t2 = sb_now_s();

    sb_nvtx_push("backward", SB_NVTX_BACKWARD, 0);
    st = m->ops->backward(m, ready, ctx);
    sb_nvtx_pop();
    if (st) return st;
    double t3 = sb_now_s();

    res->phase_ms[SB_PHASE_DATA] += 1e3 * (t1 - t0);
    res->phase_ms[SB_PHASE_FORWARD] += 1e3 * (t2 - t1);
    res->phase_ms[SB_PHASE_BACKWARD] += 1e3 * (t3 - t2);
    res->samples += n;
    return sb_replica_count_step(r, res);
}

sb_status sb_replica_update(struct sb_replica *r, const float *grads,
                            struct sb_step_result *res)
{
    if (!r->opt.m)
        return sb_error(SB_ERR_INTERNAL, "replica: update without optimizer state");
    if (r->timer) return sb_replica_device_update(r, grads, res);
    double t0 = sb_now_s();
    sb_nvtx_push("optimizer", SB_NVTX_OPTIMIZER, 0);
    sb_optimizer_step(&r->opt, r->model->params, grads);
    sb_status st = r->env->be->check();
    sb_nvtx_pop();
    res->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (sb_now_s() - t0);
    return st;
}

sb_status sb_replica_evaluate(struct sb_replica *r, int first, int count, long *correct)
{
    const struct sb_split *test = &r->env->data->test;
    int chunk = r->env->cfg->eval_batch;
    long hits = 0;
    for (int o = first; o < first + count; o += chunk) {
        int k = first + count - o < chunk ? first + count - o : chunk;
        for (int i = 0; i < k; i++) r->eval_idx[i] = o + i;
        SB_TRY(gather(r, test, r->dev_test_pixels, r->dev_test_labels, r->eval_idx, k));
        long c = 0;
        SB_TRY(r->model->ops->predict(r->model, r->x, r->y, k, &c));
        SB_TRY(r->env->be->check()); /* a failed count reads as 0: report it instead */
        hits += c;
    }
    *correct = hits;
    return SB_OK;
}

void sb_split_range(int n, int parts, int part, int *first, int *count)
{
    int base = n / parts, extra = n % parts;
    *first = part * base + (part < extra ? part : extra);
    *count = base + (part < extra ? 1 : 0);
}
