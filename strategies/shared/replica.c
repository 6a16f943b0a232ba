/* One data-parallel replica; see replica.h. What both paths of the step
 * share: creating and freeing the replica, choosing its path once
 * (replica_path.h), counting steps and reading the loss, evaluation. */
#include "strategies/shared/replica.h"

#include <stdlib.h>

#include "data/sampler.h"
#include "strategies/shared/replica_path.h"

void sb_replica_destroy(struct sb_replica *r)
{
    if (!r) return;
    const struct sb_backend_ops *be = r->env->be;
    if (r->path && r->path->release) r->path->release(r);
    if (r->model) r->model->ops->destroy(r->model);
    sb_optimizer_free(&r->opt);
    be->free(r->x);
    be->free(r->y);
    free(r->eval_idx);
    be->free(r->loss_acc);
    free(r);
}

/* The path of the backend's memory (replica_path.h), or NULL when the
 * build has none (a device backend in a build without CUDA: never). */
static const struct sb_replica_path *path_for(const struct sb_backend_ops *be)
{
    return be->host_memory ? &sb_replica_host_path : SB_REPLICA_DEVICE_PATH;
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
    r->path = path_for(be);
    sb_status st = SB_OK;
    if (!r->path) {
        st = sb_error(SB_ERR_INTERNAL, "replica: device backend in a build without CUDA");
        goto fail;
    }
    r->max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    if ((st = env->workload->create(cfg, be, r->max_batch, &r->model))) goto fail;
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
    if (r->path->init && (st = r->path->init(r))) goto fail;
    *out = r;
    return SB_OK;
fail:
    sb_replica_destroy(r);
    return st;
}

int sb_replica_on_device(const struct sb_replica *r) { return r->path->on_device; }

/* Counts a step that ran and, on the epoch's last step or the --max-steps
 * step, adds the loss summed since the last read to res->loss_sum and
 * zeroes the sum. On a GPU the read is the step's only wait for the
 * device, once per epoch; a failed read is an error (never a loss of 0). */
static sb_status count_step(struct sb_replica *r, struct sb_step_result *res)
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
    int ran = 0;
    SB_TRY(r->path->gradients(r, idx, n, global_batch, ready, ctx, res, &ran));
    res->samples += n;
    /* A captured step has not run yet: counted (and its loss read, when
     * due) after its launch, in sb_replica_update. */
    return ran ? count_step(r, res) : SB_OK;
}

sb_status sb_replica_update(struct sb_replica *r, const float *grads,
                            struct sb_step_result *res)
{
    if (!r->opt.m)
        return sb_error(SB_ERR_INTERNAL, "replica: update without optimizer state");
    int ran = 0;
    SB_TRY(r->path->update(r, grads, res, &ran));
    return ran ? count_step(r, res) : SB_OK;
}

sb_status sb_replica_evaluate(struct sb_replica *r, int first, int count, long *correct)
{
    int chunk = r->env->cfg->eval_batch;
    long hits = 0;
    for (int o = first; o < first + count; o += chunk) {
        int k = first + count - o < chunk ? first + count - o : chunk;
        for (int i = 0; i < k; i++) r->eval_idx[i] = o + i;
        SB_TRY(r->path->gather_test(r, r->eval_idx, k));
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
