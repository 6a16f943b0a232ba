/* Strategy "central": a parameter server over MPI point-to-point messages.
 *
 * Workers compute the gradient of their slice and push it to the server
 * rank (world rank 0); the server sums the pushes in worker order, steps the
 * optimizer, and every worker pulls the new parameters back. The server's
 * link carries N gradients in and N parameter copies out per step: the cost
 * this strategy exists to expose (reports/README.md derives it).
 * --servers 0: rank 0 is the server and also worker 0.
 * --servers 1: rank 0 is a dedicated server; ranks 1..N are the workers. */
#include <stdlib.h>

#include "core/clock.h"
#include "strategies/replica.h"

struct central {
    struct sb_replica *replica; /* the server's holds optimizer state */
    struct sb_comm *comm;       /* the whole world */
    float *sum;                 /* server: (n_params) gradient sum */
    float *inbox;               /* server: (n_params) one worker's push */
    int is_server;
    int is_worker;
    int worker;                 /* this rank's worker index, or -1 */
};

enum { SERVER_RANK = 0 };

static int central_processes(const struct sb_config *cfg)
{
    return cfg->replicas + cfg->servers;
}

static void central_destroy(struct sb_strategy *s)
{
    struct central *c = s->impl;
    if (!c) return;
    s->env->be->free(c->sum);
    s->env->be->free(c->inbox);
    sb_replica_destroy(c->replica);
    sb_comm_destroy(c->comm);
    free(c);
}

static sb_status central_init(struct sb_strategy *s)
{
    const struct sb_config *cfg = s->env->cfg;
    struct central *c = calloc(1, sizeof *c);
    if (!c) return sb_error(SB_ERR_NOMEM, "central: out of memory");
    s->impl = c;
    SB_TRY(sb_comm_mpi_create(s->env->mpi_world, &c->comm));
    int rank = c->comm->rank;
    c->is_server = rank == SERVER_RANK;
    c->worker = rank - cfg->servers;
    c->is_worker = c->worker >= 0;
    if (!c->is_worker) c->worker = -1;
    SB_TRY(sb_replica_create(s->env, c->is_server, &c->replica));
    size_t n = c->replica->model->n_params;
    if (c->is_server) {
        SB_TRY(s->env->be->alloc((void **)&c->sum, n * sizeof(float)));
        SB_TRY(s->env->be->alloc((void **)&c->inbox, n * sizeof(float)));
    }
    return sb_comm_broadcast(c->comm, c->replica->model->params, n, SERVER_RANK);
}

/* Server side of one step: receive every remote worker's gradient, sum in
 * worker order (deterministic), update, send the parameters back. */
static sb_status server_step(struct sb_strategy *s, struct central *c,
                             struct sb_step_result *out)
{
    const struct sb_backend_ops *be = s->env->be;
    struct sb_model *m = c->replica->model;
    size_t n = m->n_params;
    /* Every rank but the server (rank 0) is a remote worker. */
    const int first_remote = SERVER_RANK + 1;

    double t0 = sb_now_s();
    if (c->is_worker) be->copy(c->sum, m->grads, n);
    for (int q = first_remote; q < c->comm->size; q++) {
        float *dst = (q == first_remote && !c->is_worker) ? c->sum : c->inbox;
        SB_TRY(sb_comm_recv(c->comm, dst, n, q, SB_COMM_PUSH));
        if (dst == c->inbox) be->add(c->sum, c->inbox, n);
    }
    double t1 = sb_now_s();
    SB_TRY(sb_replica_update(c->replica, c->sum, out));
    double t2 = sb_now_s();
    for (int q = first_remote; q < c->comm->size; q++)
        SB_TRY(sb_comm_send(c->comm, m->params, n, q, SB_COMM_PULL));
    double comm_ms = 1e3 * ((t1 - t0) + (sb_now_s() - t2));
    out->phase_ms[SB_PHASE_COMM] += comm_ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += comm_ms;
    return SB_OK;
}

static sb_status central_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                              struct sb_step_result *out)
{
    (void)step;
    struct central *c = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    struct sb_model *m = c->replica->model;
    if (c->is_worker)
        SB_TRY(sb_replica_gradients(c->replica, global_idx + (size_t)c->worker * cfg->batch,
                                    cfg->batch, sb_config_global_batch(cfg), NULL, NULL,
                                    out));
    if (c->is_server) return server_step(s, c, out);

    double t0 = sb_now_s();
    SB_TRY(sb_comm_send(c->comm, m->grads, m->n_params, SERVER_RANK, SB_COMM_PUSH));
    SB_TRY(sb_comm_recv(c->comm, m->params, m->n_params, SERVER_RANK, SB_COMM_PULL));
    double comm_ms = 1e3 * (sb_now_s() - t0);
    out->phase_ms[SB_PHASE_COMM] += comm_ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += comm_ms;
    return SB_OK;
}

static sb_status central_evaluate(struct sb_strategy *s, double *accuracy)
{
    /* The server holds the authoritative parameters. */
    struct central *c = s->impl;
    *accuracy = 0.0;
    if (!c->is_server) return SB_OK;
    int n = s->env->data->test.n;
    long correct = 0;
    SB_TRY(sb_replica_evaluate(c->replica, 0, n, &correct));
    *accuracy = (double)correct / n;
    return SB_OK;
}

static sb_status central_reduce_sum(struct sb_strategy *s, double *vals, int n)
{
    struct central *c = s->impl;
    return sb_comm_allreduce_f64(c->comm, vals, (size_t)n);
}

static sb_status central_read_params(struct sb_strategy *s, float *host)
{
    struct central *c = s->impl;
    struct sb_model *m = c->replica->model;
    return s->env->be->download(host, m->params, m->n_params * sizeof(float));
}

static size_t central_n_params(const struct sb_strategy *s)
{
    const struct central *c = s->impl;
    return c->replica->model->n_params;
}

static struct sb_comm *central_comm(struct sb_strategy *s)
{
    struct central *c = s->impl;
    return c->comm;
}

const struct sb_strategy_ops sb_strategy_central = {
    .name = "central",
    .summary = "parameter server: workers push gradients, pull parameters",
    .uses_mpi = 1,
    .processes = central_processes,
    .init = central_init,
    .step = central_step,
    .evaluate = central_evaluate,
    .reduce_sum = central_reduce_sum,
    .read_params = central_read_params,
    .n_params = central_n_params,
    .comm = central_comm,
    .destroy = central_destroy,
};
