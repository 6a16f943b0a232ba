/* Strategy "central", server side: what a server rank does in one step,
 * synchronous (sum all N pushes, one update) or asynchronous (one update
 * per push, in arrival order, with its staleness recorded). See central.h
 * and docs/central.md. */
#include <stdlib.h>

#include "core/clock.h"
#include "strategies/shared/central.h"

void sb_central_shard(const struct central *c, int k, int *first, int *count)
{
    sb_split_range((int)c->replica->model->n_params, c->n_servers, k, first, count);
}

/* The optimizer (c->opt: SGD or Adam) on this server's shard with
 * `grads` (shard_count), timed as the optimizer phase. */
static void shard_update(struct central *c, const float *grads,
                         struct sb_step_result *out)
{
    struct sb_replica *r = c->replica;
    double t0 = sb_now_s();
    sb_optimizer_step(&c->opt, r->model->params + c->shard_first, grads); /* its NVTX range */
    out->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (sb_now_s() - t0);
    c->version++;
    c->params_current = 0;
}

static void add_comm_ms(struct sb_step_result *out, double ms)
{
    out->phase_ms[SB_PHASE_COMM] += ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += ms;
}

sb_status sb_central_server_sync(struct sb_strategy *s, struct central *c,
                                 struct sb_step_result *out)
{
    const struct sb_backend_ops *be = s->env->be;
    struct sb_model *m = c->replica->model;
    size_t n = (size_t)c->shard_count;
    float *shard = m->params + c->shard_first;

    /* All N pushes in flight at once, each into its own buffer (worker 0's
     * into sum); then the sum in worker order, as one receive at a time
     * made it (deterministic: sum = worker 0's + worker 1's + ...). */
    struct sb_comm_request *req = c->requests;
    double t0 = sb_now_s();
    for (int w = 0; w < c->n_workers; w++) {
        int q = c->first_worker + w;
        float *buf = w == 0 ? c->sum : c->inbox + (size_t)(w - 1) * n;
        if (q == c->comm->rank) /* --servers 0: rank 0's own gradient */
            be->copy(buf, m->grads + c->shard_first, n);
        else
            SB_TRY(sb_central_irecv(c, buf, n, q, SB_COMM_PUSH, &req[w]));
    }
    for (int w = 0; w < c->n_workers; w++)
        if (c->first_worker + w != c->comm->rank) SB_TRY(sb_comm_wait(c->comm, &req[w]));
    for (int w = 1; w < c->n_workers; w++) be->add(c->sum, c->inbox + (size_t)(w - 1) * n, n);
    double t1 = sb_now_s();
    /* fp16: every server sees every worker's flag in its sum (an inf a
     * worker found anywhere is an inf in every shard it pushed), so all
     * skip the same steps and update their scalers alike. */
    int skip = 0;
    if (c->scaled) SB_TRY(sb_central_decide(c, &c->replica->scaler, c->sum, n, &skip));
    if (!skip) shard_update(c, c->sum, out);
    double t2 = sb_now_s();
    /* Server 0 tells the workers its decision: the word after its shard. */
    int word = sb_central_pull_word(c);
    if (word) SB_TRY(sb_central_pull_with_word(c, skip));
    for (int w = 0; w < c->n_workers; w++) {
        int q = c->first_worker + w;
        if (q == c->comm->rank) continue;
        if (word)
            SB_TRY(sb_central_isend(c, c->sum, n + 1, q, SB_COMM_PULL, &req[w]));
        else
            SB_TRY(sb_central_isend(c, shard, n, q, SB_COMM_PULL, &req[w]));
    }
    for (int w = 0; w < c->n_workers; w++)
        if (c->first_worker + w != c->comm->rank) SB_TRY(sb_comm_wait(c->comm, &req[w]));
    add_comm_ms(out, 1e3 * ((t1 - t0) + (sb_now_s() - t2)));
    return SB_OK;
}

/* Adds one staleness sample (in versions of this shard) to the histogram. */
static void record_staleness(struct central *c, long stale)
{
    if (stale < 0) stale = 0; /* cannot happen: versions only grow */
    long bin = stale < STALE_BINS - 1 ? stale : STALE_BINS - 1;
    c->stale_local[bin] += 1.0;
    c->stale_local[STALE_BINS] += (double)stale;
    c->stale_local[STALE_BINS + 1] += 1.0;
    if (stale > c->stale_max) c->stale_max = stale;
}

sb_status sb_central_server_async(struct sb_strategy *s, struct central *c,
                                  struct sb_step_result *out)
{
    (void)s; /* the same signature as sb_central_server_sync */
    struct sb_model *m = c->replica->model;
    size_t n = (size_t)c->shard_count;
    float *shard = m->params + c->shard_first;
    int pushes = c->n_workers;
    double comm_ms = 0.0;

    if (c->worker >= 0) {
        /* --servers 0: rank 0's gradient was computed from the parameters
         * it holds, which no update has changed since: staleness 0. fp16:
         * one step of rank 0's own scaler. */
        record_staleness(c, 0);
        int skip = 0;
        if (c->scaled)
            SB_TRY(sb_central_decide(c, &c->replica->scaler, m->grads + c->shard_first, n, &skip));
        if (skip)
            c->pushes_skipped++;
        else
            shard_update(c, m->grads + c->shard_first, out);
        pushes--;
    }
    for (int i = 0; i < pushes; i++) {
        int q = -1;
        double t0 = sb_now_s();
        SB_TRY(sb_central_recv_any(c, c->inbox, n, &q, SB_COMM_PUSH));
        comm_ms += 1e3 * (sb_now_s() - t0);
        int w = q - c->first_worker;
        if (w < 0 || w >= c->n_workers || q == c->comm->rank)
            return sb_error(SB_ERR_INTERNAL, "central: server %d got a push from rank %d, "
                            "which is no remote worker", c->server, q);
        /* The worker computed this gradient from the shard we last sent it,
         * version sent_version[w]; every update since makes it one step
         * staler. */
        record_staleness(c, c->version - c->sent_version[w]);
        /* fp16: one step of worker w's scaler, as w's own copy takes it
         * (the push's flag); a skipped push is answered with the shard as
         * it is. */
        int skip = 0;
        if (c->scaled) SB_TRY(sb_central_decide(c, &c->push_scaler[w], c->inbox, n, &skip));
        if (skip)
            c->pushes_skipped++;
        else
            shard_update(c, c->inbox, out);
        t0 = sb_now_s();
        SB_TRY(sb_central_send(c, shard, n, q, SB_COMM_PULL));
        comm_ms += 1e3 * (sb_now_s() - t0);
        c->sent_version[w] = c->version;
    }
    add_comm_ms(out, comm_ms);
    return SB_OK;
}
