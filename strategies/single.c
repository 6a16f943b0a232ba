/* Strategy "single": one replica in one process, no communication; the
 * baseline for speedup and efficiency. */
#include <stdlib.h>

#include "strategies/shared/replica.h"

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
    int batch = s->env->cfg->batch;
    SB_TRY(sb_replica_gradients(r, global_idx, batch, batch, NULL, NULL, out));
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
    .init = single_init,
    .step = single_step,
    .evaluate = single_evaluate,
    .destroy = single_destroy,
    .replica_params = single_replica_params,
};
