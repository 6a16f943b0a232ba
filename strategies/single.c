/* Strategy "single": one replica in one process, no communication; the
 * baseline for speedup and efficiency. With --microbatches M it cuts each
 * batch into M micro-batches and accumulates their gradients in order
 * before the optimizer step: the reference a pipeline's M micro-batches
 * are held to (tests/integration/test_pipeline.py). */
#include <stddef.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/nvtx.h"
#include "strategies/shared/replica.h"

/* single's own flags (cfg->strategy_opts). */
struct single_opts {
    int microbatches; /* --microbatches M: gradients accumulated over M micro-batches */
};
_Static_assert(sizeof(struct single_opts) <= SB_STRATEGY_OPTS_BYTES, "single options");

static const struct sb_strategy_option single_options[] = {
    {"microbatches", "M", SB_OPTION_INT, offsetof(struct single_opts, microbatches), 1, 4096, 1,
     0, "microbatches", 0, "micro-batches per step (the batch is cut into M)", NULL},
    {0},
};

static int microbatches(const struct sb_config *cfg)
{
    return ((const struct single_opts *)(const void *)cfg->strategy_opts)->microbatches;
}

/* --microbatches must cut the batch evenly; M > 1 needs the workload's part
 * ops (accumulating backward) and the host path's split passes. */
static sb_status single_validate(const struct sb_config *cfg)
{
    int m = microbatches(cfg);
    if (m <= 1) return SB_OK;
    if (cfg->batch % m)
        return sb_error(SB_ERR_USAGE, "--microbatches: the batch of %d samples does not cut "
                        "into %d equal micro-batches", cfg->batch, m);
    const struct sb_workload_ops *w = sb_workload_find(cfg->workload);
    if (w && (!w->forward_part || !w->backward_part))
        return sb_error(SB_ERR_USAGE, "--microbatches: workload %s cannot accumulate "
                        "micro-batches (no part ops)", w->name);
    if (!cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--microbatches: --device cpu only for now");
    return SB_OK;
}

/* M micro-batches of the batch in slot 0 of the whole model, forward then
 * backward each, gradients accumulated from the second on, in order. */
static sb_status accumulate(struct sb_replica *r, const int32_t *idx, int batch, int m,
                            struct sb_step_result *out)
{
    struct sb_model *mod = r->model;
    int mb = batch / m;
    for (int k = 0; k < m; k++) {
        SB_TRY(sb_replica_data(r, 0, idx + (size_t)k * mb, mb, out));
        double t0 = sb_now_s();
        sb_nvtx_push("forward", SB_NVTX_FORWARD, (uint64_t)k);
        sb_status st = mod->ops->forward_part(mod, 0, r->slot[0].x, r->slot[0].y, mb,
                                              1.0f / (float)batch, r->loss_acc);
        if (!st) st = r->env->be->check();
        sb_nvtx_pop();
        SB_TRY(st);
        double t1 = sb_now_s();
        out->phase_ms[SB_PHASE_FORWARD] += 1e3 * (t1 - t0);
        out->samples += mb;
        sb_nvtx_push("backward", SB_NVTX_BACKWARD, (uint64_t)k);
        st = mod->ops->backward_part(mod, 0, NULL, NULL, k > 0, NULL, NULL);
        sb_nvtx_pop();
        SB_TRY(st);
        out->phase_ms[SB_PHASE_BACKWARD] += 1e3 * (sb_now_s() - t1);
    }
    return sb_replica_count_step(r, out);
}

static sb_status single_init(struct sb_strategy *s)
{
    struct sb_replica *r;
    SB_TRY(sb_replica_create(s->env, 1, &r));
    s->impl = r;
    s->replica = r;
    return SB_OK;
}

static sb_status single_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                             struct sb_step_result *out)
{
    (void)step;
    struct sb_replica *r = s->impl;
    int batch = s->env->cfg->batch, m = microbatches(s->env->cfg);
    if (m > 1) SB_TRY(accumulate(r, global_idx, batch, m, out));
    else SB_TRY(sb_replica_gradients(r, global_idx, batch, batch, NULL, NULL, out));
    return sb_replica_update(r, r->model->grads, out);
}

static sb_status single_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct sb_replica *r = s->impl;
    int n = s->env->data->test.n;
    long correct = 0;
    SB_TRY(sb_replica_evaluate(r, 0, n, &correct));
    *accuracy = (double)correct / n;
    return SB_OK;
}

static void single_destroy(struct sb_strategy *s) { sb_replica_destroy(s->impl); }

/* One replica: the consistency check has nothing to compare it with, but
 * runs (and its test hook works) the same way. */
static float *single_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct sb_replica *r = s->impl;
    *n = 1;
    return i == 0 ? r->model->params : NULL;
}

const struct sb_strategy_ops sb_strategy_single = {
    .name = "single",
    .summary = "one replica, no communication (the baseline)",
    .uses_mpi = 0,
    .max_replicas = 1,
    .baseline = 1,
    .cuda_graph = 1,
    .options = single_options,
    .options_size = sizeof(struct single_opts),
    .validate = single_validate,
    .init = single_init,
    .step = single_step,
    .evaluate = single_evaluate,
    .destroy = single_destroy,
    .replica_params = single_replica_params,
};
