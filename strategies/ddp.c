/* Strategy "ddp": one MPI rank per replica (like PyTorch
 * DistributedDataParallel). Each rank computes the gradient of its slice of
 * the global batch; the gradients are summed with an all-reduce, so every
 * rank applies the same mean gradient and the replicas stay identical. */
#include <stdlib.h>

#include "core/clock.h"
#include "strategies/replica.h"

struct ddp {
    struct sb_replica *replica;
    struct sb_comm *comm;
};

static int ddp_processes(const struct sb_config *cfg) { return cfg->replicas; }

static void ddp_destroy(struct sb_strategy *s)
{
    struct ddp *d = s->impl;
    if (!d) return;
    sb_replica_destroy(d->replica);
    sb_comm_destroy(d->comm);
    free(d);
}

static sb_status ddp_init(struct sb_strategy *s)
{
    struct ddp *d = calloc(1, sizeof *d);
    if (!d) return sb_error(SB_ERR_NOMEM, "ddp: out of memory");
    s->impl = d;
    SB_TRY(sb_comm_mpi_create(s->env->mpi_world, &d->comm));
    SB_TRY(sb_replica_create(s->env, 1, &d->replica));
    struct sb_model *m = d->replica->model;
    return sb_comm_broadcast(d->comm, m->params, m->n_params, 0);
}

static sb_status ddp_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                          struct sb_step_result *out)
{
    (void)step;
    struct ddp *d = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    struct sb_model *m = d->replica->model;
    int rank = d->comm->rank;
    SB_TRY(sb_replica_gradients(d->replica, global_idx + (size_t)rank * cfg->batch,
                                cfg->batch, sb_config_global_batch(cfg), NULL, NULL, out));
    double t0 = sb_now_s();
    SB_TRY(sb_comm_allreduce(d->comm, m->grads, m->n_params));
    double comm_ms = 1e3 * (sb_now_s() - t0);
    out->phase_ms[SB_PHASE_COMM] += comm_ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += comm_ms; /* no overlap yet */
    return sb_replica_update(d->replica, m->grads, out);
}

static sb_status ddp_evaluate(struct sb_strategy *s, double *accuracy)
{
    /* Replicas are identical: each rank scores a shard of the test set. */
    struct ddp *d = s->impl;
    int n = s->env->data->test.n, first, count;
    sb_split_range(n, d->comm->size, d->comm->rank, &first, &count);
    long correct = 0;
    SB_TRY(sb_replica_evaluate(d->replica, first, count, &correct));
    double total = (double)correct;
    SB_TRY(sb_comm_allreduce_f64(d->comm, &total, 1));
    *accuracy = total / n;
    return SB_OK;
}

static sb_status ddp_reduce_sum(struct sb_strategy *s, double *vals, int n)
{
    struct ddp *d = s->impl;
    return sb_comm_allreduce_f64(d->comm, vals, (size_t)n);
}

static sb_status ddp_read_params(struct sb_strategy *s, float *host)
{
    struct ddp *d = s->impl;
    struct sb_model *m = d->replica->model;
    return s->env->be->download(host, m->params, m->n_params * sizeof(float));
}

static size_t ddp_n_params(const struct sb_strategy *s)
{
    const struct ddp *d = s->impl;
    return d->replica->model->n_params;
}

static struct sb_comm *ddp_comm(struct sb_strategy *s)
{
    struct ddp *d = s->impl;
    return d->comm;
}

const struct sb_strategy_ops sb_strategy_ddp = {
    .name = "ddp",
    .summary = "one MPI rank per replica, gradients all-reduced (PyTorch DDP)",
    .uses_mpi = 1,
    .processes = ddp_processes,
    .init = ddp_init,
    .step = ddp_step,
    .evaluate = ddp_evaluate,
    .reduce_sum = ddp_reduce_sum,
    .read_params = ddp_read_params,
    .n_params = ddp_n_params,
    .comm = ddp_comm,
    .destroy = ddp_destroy,
};
