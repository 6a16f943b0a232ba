/* Strategy "single": one replica in one process, no communication; the
 * baseline for speedup and efficiency. */
#include <stdlib.h>

#include "strategies/replica.h"

static int single_processes(const struct sb_config *cfg)
{
    (void)cfg;
    return 1;
}

static sb_status single_init(struct sb_strategy *s)
{
    struct sb_replica *r;
    SB_TRY(sb_replica_create(s->env, 1, &r));
    s->impl = r;
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

static sb_status single_reduce_sum(struct sb_strategy *s, double *vals, int n)
{
    (void)s, (void)vals, (void)n;
    return SB_OK;
}

static sb_status single_read_params(struct sb_strategy *s, float *host)
{
    struct sb_replica *r = s->impl;
    return s->env->be->download(host, r->model->params, r->model->n_params * sizeof(float));
}

static size_t single_n_params(const struct sb_strategy *s)
{
    const struct sb_replica *r = s->impl;
    return r->model->n_params;
}

static struct sb_comm *single_comm(struct sb_strategy *s)
{
    (void)s;
    return NULL;
}

static void single_destroy(struct sb_strategy *s) { sb_replica_destroy(s->impl); }

const struct sb_strategy_ops sb_strategy_single = {
    .name = "single",
    .summary = "one replica, no communication (the baseline)",
    .uses_mpi = 0,
    .processes = single_processes,
    .init = single_init,
    .step = single_step,
    .evaluate = single_evaluate,
    .reduce_sum = single_reduce_sum,
    .read_params = single_read_params,
    .n_params = single_n_params,
    .comm = single_comm,
    .destroy = single_destroy,
};
