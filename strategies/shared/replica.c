/* One replica; see replica.h. What both paths of the step share:
 * creating and freeing the replica and its slots, choosing its path once
 * (replica_path.h), checking the passes' arguments, counting steps and
 * reading the loss, evaluation. */
#include "strategies/shared/replica.h"

#include <math.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/nvtx.h"
#include "data/sampler.h"
#include "strategies/shared/replica_path.h"

void sb_replica_destroy(struct sb_replica *r)
{
    if (!r) return;
    const struct sb_backend_ops *be = r->env->be;
    if (r->path && r->path->release) r->path->release(r);
    if (r->model) r->model->ops->destroy(r->model);
    sb_optimizer_free(&r->opt);
    for (int k = 0; r->slot && k < r->slots; k++) {
        be->free(r->slot[k].x);
        be->free(r->slot[k].y);
    }
    free(r->slot);
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
    return sb_replica_create_slots(env, with_optimizer, 1, out);
}

/* Allocates r->slots batch buffers of max_batch samples each. */
static sb_status alloc_slots(struct sb_replica *r, int slots)
{
    const struct sb_backend_ops *be = r->env->be;
    if (!(r->slot = calloc((size_t)slots, sizeof *r->slot)))
        return sb_error(SB_ERR_NOMEM, "replica: out of memory");
    r->slots = slots;
    size_t in_dim = (size_t)r->model->in_dim;
    for (int k = 0; k < slots; k++) {
        SB_TRY(be->alloc((void **)&r->slot[k].x, (size_t)r->max_batch * in_dim * sizeof(float)));
        SB_TRY(be->alloc((void **)&r->slot[k].y, (size_t)r->max_batch));
    }
    return SB_OK;
}

/* The replica of sb_replica_create_slots (part NULL: the whole model) or
 * sb_replica_create_part (the part, its batches of at most max_batch). */
static sb_status create_replica(const struct sb_strategy_env *env, int with_optimizer,
                                int slots, const struct sb_part *part, int max_batch,
                                struct sb_replica **out);

sb_status sb_replica_create_slots(const struct sb_strategy_env *env, int with_optimizer,
                                  int slots, struct sb_replica **out)
{
    return create_replica(env, with_optimizer, slots, NULL, 0, out);
}

sb_status sb_replica_create_part(const struct sb_strategy_env *env, int with_optimizer,
                                 const struct sb_part *part, int max_batch,
                                 struct sb_replica **out)
{
    *out = NULL;
    if (!env->workload->create_part)
        return sb_error(SB_ERR_USAGE, "--workload: %s builds whole models only (no parts)",
                        env->workload->name);
    if (max_batch < 1)
        return sb_error(SB_ERR_INTERNAL, "replica: a part for batches of %d", max_batch);
    return create_replica(env, with_optimizer, part->slots, part, max_batch, out);
}

static sb_status create_replica(const struct sb_strategy_env *env, int with_optimizer,
                                int slots, const struct sb_part *part, int max_batch,
                                struct sb_replica **out)
{
    const struct sb_config *cfg = env->cfg;
    const struct sb_backend_ops *be = env->be;
    *out = NULL;
    struct sb_replica *r = calloc(1, sizeof *r);
    if (!r) return sb_error(SB_ERR_NOMEM, "replica: out of memory");
    r->env = env;
    sb_loss_scaler_init(&r->scaler, cfg);
    r->path = path_for(be);
    r->forwarded = -1;
    sb_status st = SB_OK;
    if (!r->path) {
        st = sb_error(SB_ERR_INTERNAL, "replica: device backend in a build without CUDA");
        goto fail;
    }
    if (slots < 1 || (slots > 1 && !r->path->data)) {
        st = sb_error(SB_ERR_INTERNAL, "replica: %d slots on the %s path", slots,
                      r->path->on_device ? "device" : "host");
        goto fail;
    }
    r->max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    if (part) r->max_batch = max_batch;
    if ((st = part ? env->workload->create_part(cfg, be, r->max_batch, part, &r->model)
                   : env->workload->create(cfg, be, r->max_batch, &r->model)))
        goto fail;
    if ((st = alloc_slots(r, slots))) goto fail;
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

/* *sl = the slot a pass names. Errors: SB_ERR_INTERNAL naming the pass for
 * a slot out of range or a path without split passes (the device path). */
static sb_status pass_slot(struct sb_replica *r, int slot, const char *pass,
                           struct sb_replica_slot **sl)
{
    if (!r->path->data)
        return sb_error(SB_ERR_INTERNAL, "replica: the %s pass runs on the host path only "
                        "(the device path fuses the passes: sb_replica_gradients)", pass);
    if (slot < 0 || slot >= r->slots)
        return sb_error(SB_ERR_INTERNAL, "replica: %s pass of slot %d, the replica has %d",
                        pass, slot, r->slots);
    *sl = &r->slot[slot];
    return SB_OK;
}

sb_status sb_replica_data(struct sb_replica *r, int slot, const int32_t *idx, int n,
                          struct sb_step_result *res)
{
    struct sb_replica_slot *sl = NULL;
    SB_TRY(pass_slot(r, slot, "data", &sl));
    if (n < 1 || n > r->max_batch)
        return sb_error(SB_ERR_INTERNAL, "replica: data pass of %d samples (1..%d)", n,
                        r->max_batch);
    sl->n = 0;
    SB_TRY(r->path->data(r, sl, idx, n, res));
    sb_precision_round(r->env->cfg, r->env->be, sl->x, (size_t)n * (size_t)r->model->in_dim);
    sl->n = n;
    return SB_OK;
}

sb_status sb_replica_forward(struct sb_replica *r, int slot, int global_batch,
                             struct sb_step_result *res)
{
    struct sb_replica_slot *sl = NULL;
    SB_TRY(pass_slot(r, slot, "forward", &sl));
    if (sl->n < 1)
        return sb_error(SB_ERR_INTERNAL, "replica: forward of slot %d before its data", slot);
    /* The workload's whole-model forward keeps one batch's activations, so
     * only slot 0 has a place for them; its part ops (forward_part with a
     * slot) would take any slot here. */
    if (slot != 0)
        return sb_error(SB_ERR_INTERNAL, "replica: forward of slot %d: the workload keeps "
                        "one batch's activations (slot 0)", slot);
    r->forwarded = -1;
    SB_TRY(r->path->forward(r, sl, global_batch, res));
    r->forwarded = slot;
    res->samples += sl->n;
    return SB_OK;
}

/* The test hook of precision.h: +inf into the first gradient, as an fp16
 * overflow would put it, before the layer holding it is reported ready
 * (where a strategy reduces during backward) or after backward. */
struct inject {
    struct sb_replica *r;
    sb_grad_ready_fn ready;
    void *ctx;
};

static void write_inf(struct sb_replica *r)
{
    const float inf = INFINITY;
    (void)r->env->be->upload(r->model->grads, &inf, sizeof inf);
}

static void inject_ready(void *ctx, size_t offset, size_t count)
{
    struct inject *in = ctx;
    if (offset == 0) write_inf(in->r);
    in->ready(in->ctx, offset, count);
}

sb_status sb_replica_backward(struct sb_replica *r, int slot, sb_grad_ready_fn ready, void *ctx,
                              int accumulate, struct sb_step_result *res)
{
    struct sb_replica_slot *sl = NULL;
    SB_TRY(pass_slot(r, slot, "backward", &sl));
    if (r->forwarded != slot)
        return sb_error(SB_ERR_INTERNAL, "replica: backward of slot %d, whose forward did not "
                        "run last", slot);
    /* The whole-model backward overwrites the gradients; accumulating
     * micro-batches needs the workload's backward_part(accumulate). */
    if (accumulate)
        return sb_error(SB_ERR_INTERNAL, "replica: backward with accumulate: the workload's "
                        "backward overwrites the gradients");
    r->forwarded = -1;
    if (!sb_precision_inject_inf(r->steps)) return r->path->backward(r, sl, ready, ctx, res);
    struct inject in = {r, ready, ctx};
    SB_TRY(r->path->backward(r, sl, ready ? inject_ready : NULL, &in, res));
    if (!ready) write_inf(r);
    return SB_OK;
}

void sb_replica_test_inject_inf(struct sb_replica *r)
{
    if (sb_precision_inject_inf(r->steps)) write_inf(r);
}

double sb_replica_bubble_begin(void)
{
    sb_nvtx_push_phase("bubble", SB_NVTX_BUBBLE);
    return sb_now_s();
}

void sb_replica_bubble_end(double t0, struct sb_step_result *res)
{
    double t1 = sb_now_s();
    sb_nvtx_pop();
    res->phase_ms[SB_PHASE_BUBBLE] += 1e3 * (t1 - t0);
}

sb_status sb_replica_gradients(struct sb_replica *r, const int32_t *idx, int n,
                               int global_batch, sb_grad_ready_fn ready, void *ctx,
                               struct sb_step_result *res)
{
    if (!r->path->gradients) { /* a path of split passes (the host path) */
        SB_TRY(sb_replica_data(r, 0, idx, n, res));
        SB_TRY(sb_replica_forward(r, 0, global_batch, res));
        SB_TRY(sb_replica_backward(r, 0, ready, ctx, 0, res));
        return sb_replica_count_step(r, res);
    }
    int ran = 0;
    SB_TRY(r->path->gradients(r, idx, n, global_batch, ready, ctx, res, &ran));
    res->samples += n;
    /* A captured step has not run yet: counted (and its loss read, when
     * due) after its launch, in sb_replica_update. */
    return ran ? sb_replica_count_step(r, res) : SB_OK;
}

sb_status sb_replica_unscale(struct sb_replica *r, const float *grads, int *found_inf)
{
    *found_inf = 0;
    if (!r->scaler.enabled) return SB_OK;
    /* The gradients are the caller's buffers, unscaled in place. */
    sb_loss_scaler_unscale(&r->scaler, r->env->be, (float *)grads, r->opt.n, found_inf);
    return r->env->be->check();
}

sb_status sb_replica_update_decided(struct sb_replica *r, const float *grads, int found_inf,
                                    struct sb_step_result *res)
{
    if (!r->opt.m)
        return sb_error(SB_ERR_INTERNAL, "replica: update without optimizer state");
    if (sb_loss_scaler_update(&r->scaler, found_inf)) return SB_OK; /* skipped */
    int ran = 0;
    SB_TRY(r->path->update(r, grads, res, &ran));
    return ran ? sb_replica_count_step(r, res) : SB_OK;
}

sb_status sb_replica_update(struct sb_replica *r, const float *grads,
                            struct sb_step_result *res)
{
    if (!r->opt.m)
        return sb_error(SB_ERR_INTERNAL, "replica: update without optimizer state");
    int found_inf = 0;
    SB_TRY(sb_replica_unscale(r, grads, &found_inf));
    return sb_replica_update_decided(r, grads, found_inf, res);
}

sb_status sb_replica_evaluate(struct sb_replica *r, int first, int count, long *correct)
{
    int chunk = r->env->cfg->eval_batch;
    long hits = 0;
    for (int o = first; o < first + count; o += chunk) {
        int k = first + count - o < chunk ? first + count - o : chunk;
        for (int i = 0; i < k; i++) r->eval_idx[i] = o + i;
        SB_TRY(r->path->gather_test(r, r->eval_idx, k));
        sb_precision_round(r->env->cfg, r->env->be, r->slot[0].x,
                           (size_t)k * (size_t)r->model->in_dim);
        long c = 0;
        SB_TRY(r->model->ops->predict(r->model, r->slot[0].x, r->slot[0].y, k, &c));
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
