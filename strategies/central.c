/* Strategy "central": parameter servers over MPI point-to-point messages.
 *
 * Workers compute the gradient of their slice and push shard k of it to
 * server k; server k updates its shard and every worker pulls shard k back.
 * The servers' links carry N gradients in and N parameter copies out per
 * step: the cost this strategy exists to expose (docs/central.md).
 * --servers 0: rank 0 is the only server and also worker 0.
 * --servers K: ranks 0..K-1 are dedicated servers (BytePS-style shards);
 *              ranks K..K+N-1 are the workers.
 * --sync (default): a server sums all N pushes, then updates once: the same
 *   update as single with the global batch. --async: a server applies each
 *   push at once and replies to its sender; gradients may be stale.
 * This file: lifecycle, the worker side, evaluation; central_server.c: the
 * server side. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "strategies/shared/central.h"
#include "strategies/shared/precision.h"

_Static_assert(sizeof(struct central_opts) <= SB_STRATEGY_OPTS_BYTES, "central options");

static const struct sb_strategy_option central_options[] = {
    {"servers", "K", SB_OPTION_INT, offsetof(struct central_opts, servers), 0, 64, 0, 0,
     "servers", 0, "0: rank 0 also trains; K: K dedicated servers, one shard each", NULL},
    {"sync", NULL, SB_OPTION_SWITCH, offsetof(struct central_opts, async), 0, 0, 0, 0, "async",
     1, "step barrier, the same update as single (default)", NULL},
    {"async", NULL, SB_OPTION_SWITCH, offsetof(struct central_opts, async), 0, 0, 0, 1,
     "async", 1, "no step barrier: each push applied at once (stale)", NULL},
    {0},
};

static const char *const central_comm_keys[] = {"server_link_bytes_per_step", NULL};

/* Replicas (workers) and --servers server ranks. */
static int central_world_size(const struct sb_config *cfg)
{
    return cfg->replicas + sb_central_opts(cfg)->servers;
}

static int central_replicas_of_world(const struct sb_config *cfg, int world)
{
    int replicas = world - sb_central_opts(cfg)->servers;
    return replicas > 0 ? replicas : 0;
}

/* --async needs a receive from any source, which NCCL lacks. */
static sb_status central_validate(const struct sb_config *cfg)
{
    if (sb_central_opts(cfg)->async && !cfg->comm_entry->recv_any)
        return sb_error(SB_ERR_USAGE, "--async with --comm nccl: NCCL has no receive from any "
                        "source; use --comm mpi");
    /* fp16's loss scaling (the pushes' inf flags, server 0's skip word:
     * central_scale.c) runs on the CPU's "mpi" communicator; on GPUs its
     * messages would be the fp32 wire's, which no run has checked. */
    if (cfg->precision == SB_PRECISION_FP16 && !cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--precision fp16: --strategy central runs it on --device "
                        "cpu only (its loss scaler's messages have not run on a GPU; use bf16)");
    return SB_OK;
}

static void central_destroy(struct sb_strategy *s)
{
    struct central *c = s->impl;
    if (!c) return;
    const struct sb_backend_ops *be = s->env->be;
    sb_optimizer_free(&c->opt);
    be->free(c->sum);
    be->free(c->inbox);
    free(c->sent_version);
    free(c->stale_local);
    free(c->requests);
    be->free(c->pull0);
    free(c->push_scaler);
    free(c->g_loss_scale);
    free(c->g_skipped);
    sb_replica_destroy(c->replica);
    sb_comm_destroy(c->comm);
    free(c);
    s->impl = NULL;
}

/* Doubles in the staleness buffer: histogram, sum, count, one max per
 * rank, then (fp16) each rank's S and skipped steps. */
static size_t stale_len(const struct central *c)
{
    return STALE_BINS + 2 + (size_t)c->comm->size * (c->scaled ? 3 : 1);
}


static sb_status central_init(struct sb_strategy *s)
{
    const struct sb_config *cfg = s->env->cfg;
    const struct sb_backend_ops *be = s->env->be;
    struct central *c = calloc(1, sizeof *c);
    if (!c) return sb_error(SB_ERR_NOMEM, "central: out of memory");
    s->impl = c;
    /* The world, not a grid's dp axis: every message goes between a
     * server and a worker (push, pull), none among the workers, so the
     * replicas have no collective of their own to run; the broadcast and
     * the staleness sum span the servers too. A grid over the workers
     * (--servers K: a split without servers) would be a communicator that
     * no call uses; with --servers 0 the world is the workers' 1-deep grid
     * already (docs/design.md). Made before the replica: on cuda it
     * selects this rank's GPU for the thread. */
    SB_TRY(sb_comm_world_create(s->env->cfg, s->env->job, s->env->placement->device[0],
                                &c->comm));
    int rank = c->comm->rank;
    const struct central_opts *opt = sb_central_opts(cfg);
    c->n_servers = opt->servers > 0 ? opt->servers : 1;
    c->first_worker = opt->servers;
    c->n_workers = cfg->replicas;
    c->async = opt->async;
    c->server = rank < c->n_servers ? rank : -1;
    c->worker = rank >= c->first_worker ? rank - c->first_worker : -1;
    c->params_current = 1;
    c->wire16 = sb_central_wire16(cfg, &c->wire_fmt) && sb_comm_has_p2p16(c->comm);
    c->scaled = cfg->precision == SB_PRECISION_FP16;
    SB_TRY(sb_replica_create(s->env, 0, &c->replica));
    s->replica = c->replica;
    s->comms[s->n_comms++] = c->comm;
    s->world = c->comm;
    size_t n = c->replica->model->n_params;
    /* The same check on every rank, before any message: all fail together. */
    if ((size_t)c->n_servers > n)
        return sb_error(SB_ERR_USAGE, "--servers: %d servers exceed the model's %zu "
                        "parameters (a shard needs at least one)", c->n_servers, n);
    c->stale_local = calloc(stale_len(c), sizeof *c->stale_local);
    int most = c->n_servers > c->n_workers ? c->n_servers : c->n_workers;
    c->requests = calloc(2 * (size_t)most, sizeof *c->requests);
    if (!c->stale_local || !c->requests)
        return sb_error(SB_ERR_NOMEM, "central: out of memory");
    if (c->scaled) {
        c->g_loss_scale = calloc((size_t)c->comm->size, sizeof *c->g_loss_scale);
        c->g_skipped = calloc((size_t)c->comm->size, sizeof *c->g_skipped);
        if (!c->g_loss_scale || !c->g_skipped)
            return sb_error(SB_ERR_NOMEM, "central: out of memory");
    }
    if (c->scaled && !c->async && c->worker >= 0 && c->server < 0) {
        int first, count;
        sb_central_shard(c, 0, &first, &count);
        SB_TRY(be->alloc((void **)&c->pull0, ((size_t)count + 1) * sizeof(float)));
    }
    if (c->server >= 0) {
        sb_central_shard(c, c->server, &c->shard_first, &c->shard_count);
        size_t bytes = (size_t)c->shard_count * sizeof(float);
        /* Server 0's sync pulls under fp16 carry its skip word after the
         * shard, sent from sum (sb_central_pull_with_word). */
        size_t sum_bytes = bytes + (sb_central_pull_word(c) ? sizeof(float) : 0);
        SB_TRY(sb_optimizer_init(&c->opt, be, s->env->cfg, (size_t)c->shard_count));
        /* --async: one update per worker's push, n_workers per training step;
         * the lr schedule counts training steps. */
        if (c->async) c->opt.updates_per_step = c->n_workers;
        SB_TRY(be->alloc((void **)&c->sum, sum_bytes));
        size_t inboxes = c->async || c->n_workers < 2 ? 1 : (size_t)c->n_workers - 1;
        SB_TRY(be->alloc((void **)&c->inbox, inboxes * bytes));
        c->sent_version = calloc((size_t)c->n_workers, sizeof *c->sent_version);
        if (!c->sent_version) return sb_error(SB_ERR_NOMEM, "central: out of memory");
        if (c->scaled && c->async) {
            c->push_scaler = calloc((size_t)c->n_workers, sizeof *c->push_scaler);
            if (!c->push_scaler) return sb_error(SB_ERR_NOMEM, "central: out of memory");
            for (int w = 0; w < c->n_workers; w++) sb_loss_scaler_init(&c->push_scaler[w], cfg);
        }
    }
    return sb_comm_broadcast(c->comm, c->replica->model->params, n, 0);
}

/* Worker side of an asynchronous step on a rank that is no server: push
 * shard k of the gradient to server k for every k, then pull every shard
 * back. Pulls go in descending server order: with asynchronous servers that
 * reply as soon as a push arrives, every wait then points to a
 * higher-numbered server, so blocking sends cannot form a cycle
 * (docs/central.md). */
static sb_status worker_exchange_async(struct central *c, int found, struct sb_step_result *out)
{
    struct sb_model *m = c->replica->model;
    double t0 = sb_now_s();
    for (int k = 0; k < c->n_servers; k++) {
        int first, count;
        sb_central_shard(c, k, &first, &count);
        SB_TRY(sb_central_send(c, m->grads + first, (size_t)count, k, SB_COMM_PUSH));
    }
    for (int k = c->n_servers - 1; k >= 0; k--) {
        int first, count;
        sb_central_shard(c, k, &first, &count);
        SB_TRY(sb_central_recv(c, m->params + first, (size_t)count, k, SB_COMM_PULL));
    }
    double ms = 1e3 * (sb_now_s() - t0);
    out->phase_ms[SB_PHASE_COMM] += ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += ms;
    /* fp16: this push was one step of this worker's scaler; every server
     * made the same decision from the flag it carried. */
    sb_loss_scaler_update(&c->replica->scaler, found);
    return SB_OK;
}

/* Worker side of a synchronous step on a rank that is no server: starts
 * the K pushes (shard k of the gradient to server k) and the K pulls
 * (shard k of the parameters from server k) at once, then waits for the
 * pushes and the pulls. With every transfer in flight, each server's link
 * carries its shard while the others carry theirs (docs/central.md). On a
 * communicator without non-blocking point-to-point the calls run blocking
 * in issue order: pushes 0..K-1, then pulls K-1..0, which cannot deadlock
 * against sb_central_server_sync. */
static sb_status worker_exchange_sync(struct central *c, int found, struct sb_step_result *out)
{
    struct sb_model *m = c->replica->model;
    int K = c->n_servers;
    struct sb_comm_request *push = c->requests, *pull = c->requests + K;
    double t0 = sb_now_s();
    for (int k = 0; k < K; k++) {
        int first, count;
        sb_central_shard(c, k, &first, &count);
        SB_TRY(sb_central_isend(c, m->grads + first, (size_t)count, k, SB_COMM_PUSH,
                                &push[k]));
    }
    for (int k = K - 1; k >= 0; k--) {
        int first, count;
        sb_central_shard(c, k, &first, &count);
        /* fp16: server 0's pull is its shard and its skip word. */
        if (k == 0 && c->pull0)
            SB_TRY(sb_central_irecv(c, c->pull0, (size_t)count + 1, k, SB_COMM_PULL, &pull[k]));
        else
            SB_TRY(sb_central_irecv(c, m->params + first, (size_t)count, k, SB_COMM_PULL,
                                    &pull[k]));
    }
    for (int k = 0; k < K; k++) SB_TRY(sb_comm_wait(c->comm, &push[k]));
    for (int k = 0; k < K; k++) SB_TRY(sb_comm_wait(c->comm, &pull[k]));
    double ms = 1e3 * (sb_now_s() - t0);
    out->phase_ms[SB_PHASE_COMM] += ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += ms;
    return c->pull0 ? sb_central_read_word(c, found) : SB_OK;
}

static sb_status central_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                              struct sb_step_result *out)
{
    (void)step;
    struct central *c = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    if (c->worker >= 0) {
        /* Sync: scale 1/global batch, so the servers' sums are the mean over
         * the global batch. Async: each push is applied alone, so it is the
         * mean over this worker's slice (docs/central.md). */
        int scale_batch = c->async ? cfg->batch : sb_config_global_batch(cfg);
        SB_TRY(sb_replica_gradients(c->replica, global_idx + (size_t)c->worker * cfg->batch,
                                    cfg->batch, scale_batch, NULL, NULL, out));
    }
    int found = 0; /* fp16: this worker's gradient holds an inf or a NaN */
    if (c->worker >= 0) SB_TRY(sb_central_flag_push(c, &found));
    c->params_current = 0; /* on every rank, so that all agree on gathering */
    if (c->server >= 0)
        return c->async ? sb_central_server_async(s, c, out) : sb_central_server_sync(s, c, out);
    return c->async ? worker_exchange_async(c, found, out) : worker_exchange_sync(c, found, out);
}

/* Sends every server's current shard to world rank 0 (uncounted: not
 * training traffic), so rank 0 holds the whole current parameters; every
 * rank then marks them current until the next step. Collective. */
static sb_status gather_shards(struct central *c)
{
    if (c->n_servers < 2) {
        c->params_current = 1;
        return SB_OK;
    }
    struct sb_model *m = c->replica->model;
    if (c->comm->rank == 0) {
        for (int k = 1; k < c->n_servers; k++) {
            int first, count;
            sb_central_shard(c, k, &first, &count);
            SB_TRY(sb_comm_recv_uncounted(c->comm, m->params + first, (size_t)count, k));
        }
    } else if (c->server > 0) {
        SB_TRY(sb_comm_send_uncounted(c->comm, m->params + c->shard_first,
                                      (size_t)c->shard_count, 0));
    }
    return SB_OK;
}

/* Sums every rank's staleness histogram onto every rank and keeps the
 * job-wide median (lower median), maximum and mean. */
static sb_status reduce_staleness(struct central *c)
{
    size_t len = stale_len(c);
    double *g = malloc(len * sizeof *g);
    if (!g) return sb_error(SB_ERR_NOMEM, "central: out of memory");
    for (size_t i = 0; i < len; i++) g[i] = c->stale_local[i];
    int size = c->comm->size, rank = c->comm->rank;
    g[STALE_BINS + 2 + rank] = (double)c->stale_max;
    if (c->scaled) { /* this rank's S and skipped steps in its slots (the rest are 0) */
        double scale = 1.0;
        long skipped = 0;
        sb_central_precision_state(c, &scale, &skipped);
        g[STALE_BINS + 2 + size + rank] = scale;
        g[STALE_BINS + 2 + 2 * size + rank] = (double)skipped;
    }
    sb_status st = sb_comm_allreduce_f64(c->comm, g, len);
    if (!st) {
        double count = g[STALE_BINS + 1], seen = 0.0, max = 0.0;
        long median = 0;
        for (long b = 0; b < STALE_BINS && count > 0; b++) {
            seen += g[b];
            if (seen > (count - 1) / 2) {
                median = b;
                break;
            }
        }
        for (int q = 0; q < c->comm->size; q++)
            if (g[STALE_BINS + 2 + q] > max) max = g[STALE_BINS + 2 + q];
        c->g_stale_median = (double)median;
        c->g_stale_max = max;
        c->g_stale_mean = count > 0 ? g[STALE_BINS] / count : 0.0;
        c->g_stale_count = count;
        for (int q = 0; c->scaled && q < size; q++) {
            c->g_loss_scale[q] = g[STALE_BINS + 2 + size + q];
            c->g_skipped[q] = g[STALE_BINS + 2 + 2 * size + q];
        }
    }
    free(g);
    return st;
}

static sb_status central_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct central *c = s->impl;
    *accuracy = 0.0;
    SB_TRY(gather_shards(c));
    SB_TRY(reduce_staleness(c));
    if (c->comm->rank != 0) return SB_OK;
    int n = s->env->data->test.n;
    long correct = 0;
    SB_TRY(sb_replica_evaluate(c->replica, 0, n, &correct));
    *accuracy = (double)correct / n;
    return SB_OK;
}

/* Collective: gathers every server's current shard to rank 0 (unless
 * evaluate did since the last step), then rank 0 downloads them. */
static sb_status central_read_params(struct sb_strategy *s, float *host)
{
    struct central *c = s->impl;
    struct sb_model *m = c->replica->model;
    if (!c->params_current) SB_TRY(gather_shards(c));
    if (c->comm->rank != 0) return SB_OK;
    return s->env->be->download(host, m->params, m->n_params * sizeof(float));
}

/* Servers, shard sizes, and the staleness of applied gradients (in steps
 * of the shard's version; 0 by construction in sync mode), as of the last
 * evaluate. Into the report's comm object: rank 0 is a server (the only
 * one with --servers 0, shard 0 with --servers K); it receives pushes and
 * sends pulls, so its link carries push.bytes in and pull.bytes out per
 * measured step (reports/README.md); null when no step was measured. */
static void central_describe(const struct sb_strategy *s, long measured_steps,
                             struct sb_strategy_details *d)
{
    const struct central *c = s->impl;
    const struct sb_comm_counter *k = c->comm->counters;
    sb_details_set_value(d, 1, "server_link_bytes_per_step",
                         measured_steps > 0 ? (k[SB_COMM_PUSH].bytes + k[SB_COMM_PULL].bytes) /
                                                  (double)measured_steps
                                            : NAN,
                         0);
    double v = (double)sb_central_opts(s->env->cfg)->servers;
    sb_details_add(d, "servers", 0, &v, 1);
    v = (double)c->n_workers;
    sb_details_add(d, "workers", 0, &v, 1);
    v = (double)c->async;
    sb_details_add(d, "async", 0, &v, 1);
    double shards[SB_DETAIL_VALUES_MAX];
    int k_max = c->n_servers < SB_DETAIL_VALUES_MAX ? c->n_servers : SB_DETAIL_VALUES_MAX;
    for (int k = 0; k < k_max; k++) {
        int first, count;
        sb_central_shard(c, k, &first, &count);
        shards[k] = (double)count;
    }
    sb_details_add(d, "shard_floats", 1, shards, k_max);
    sb_details_add(d, "staleness_median_steps", 0, &c->g_stale_median, 1);
    sb_details_add(d, "staleness_max_steps", 0, &c->g_stale_max, 1);
    sb_details_add(d, "staleness_mean_steps", 0, &c->g_stale_mean, 1);
    sb_details_add(d, "staleness_samples", 0, &c->g_stale_count, 1);
    if (c->scaled) { /* fp16: every rank's S and skipped steps (pushes, async servers) */
        sb_details_add(d, "loss_scale_by_rank", 1, c->g_loss_scale, c->comm->size);
        sb_details_add(d, "skipped_steps_by_rank", 1, c->g_skipped, c->comm->size);
    }
}

double sb_central_cost_s(const struct sb_link *l, int n_workers, int k_servers, double bytes)
{
    if (k_servers <= 0) {
        if (n_workers <= 1) return 0.0;
        return 2.0 * (n_workers - 1) * (l->alpha_s + bytes / l->bandwidth_Bps);
    }
    double worker_link = 2.0 * (k_servers * l->alpha_s + bytes / l->bandwidth_Bps);
    double server_link =
        2.0 * n_workers * (l->alpha_s + bytes / ((double)k_servers * l->bandwidth_Bps));
    return worker_link > server_link ? worker_link : server_link;
}

/* One push-pull step of n workers through k servers (sb_central_cost_s:
 * BytePS's bound, for k >= 1;
 * rank 0's link for k == 0); no overlap with compute. */
static void central_model_row(const struct sb_comm_model_query *q, int k, double bytes,
                              struct sb_comm_model_row *row)
{
    *row = (struct sb_comm_model_row){
        .variant = "push-pull",
        .servers = k,
        .formula_name = k > 0 ? "central" : "central-servers0",
        .formula = k > 0 ? "max(2(k alpha + M/B), 2n(alpha + M/(k B)))" : "2(n-1)(alpha + M/B)",
        .comm_s = sb_central_cost_s(&q->link, q->replicas, k, bytes),
        .wire_bytes = bytes,
        .exposed_s = NAN,
    };
    snprintf(row->legend, sizeof row->legend,
             "central max(2(ka + M/B), 2n(a + M/(kB))) (BytePS's bound, a message each "
             "way per peer), no overlap with compute;");
}

/* The run: its --servers, with M the wire's bytes (half of q->bytes on the
 * 16-bit wire, sb_central_wire16), and, under synchronous fp16, half of
 * server 0's skip word more: M is the mean of a worker's push (the
 * gradient) and its pull (the parameters and the word), so that the
 * formula's 2M/B is both directions' bytes (docs/precision.md, "fp16 under
 * central"). predict: one server, and one per worker (k = n; only k = 1 at
 * n = 1). */
static int central_comm_model(const struct sb_comm_model_query *q,
                              struct sb_comm_model_row *rows, int cap)
{
    int servers[2] = {q->cfg ? sb_central_opts(q->cfg)->servers : 1, q->replicas};
    int n = q->cfg || q->replicas <= 1 ? 1 : 2, k = 0;
    int wire16 = q->cfg && sb_central_wire16(q->cfg, NULL);
    double bytes = wire16 ? q->bytes / 2 : q->bytes;
    if (q->cfg && q->cfg->precision == SB_PRECISION_FP16 && !sb_central_opts(q->cfg)->async)
        bytes += (wire16 ? 2.0 : 4.0) / 2;
    for (; k < n && k < cap; k++) central_model_row(q, servers[k], bytes, &rows[k]);
    return k;
}

/* Sync: every worker holds the servers' parameters after its pull (rank 0
 * with --servers 0 is server and worker 0); dedicated servers hold shards
 * only and take no part. Async: workers pull at different versions by
 * design, so none is compared. */
static float *central_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct central *c = s->impl;
    *n = c->worker >= 0 && !c->async ? 1 : 0;
    return i < *n ? c->replica->model->params : NULL;
}

/* Workers hold a full model (parameters, gradients) and no optimizer
 * state; a server holds the full model too (world rank 0 evaluates it)
 * and the optimizer state of its shard, Ψ/K of it for K servers (K = 1
 * with --servers 0). Not the ZeRO paper's: its accounting has no server;
 * this is central's own design, stated in docs/zero.md. */
static void central_model_state_formula(const struct sb_config *cfg, double n_params,
                                        int server, struct sb_model_state *out)
{
    int k = sb_central_opts(cfg)->servers > 0 ? sb_central_opts(cfg)->servers : 1;
    out->param_bytes = sb_precision_value_bytes(cfg) * n_params;
    out->grad_bytes = sb_precision_value_bytes(cfg) * n_params;
    out->optimizer_bytes = server ? 4.0 * sb_optimizer_state_floats(cfg) * n_params / k : 0.0;
}

/* One entry: this rank as "server", "worker" or both (--servers 0 on
 * rank 0); a server's communication buffers are its gradient sum (with
 * server 0's skip word under synchronous fp16) and inboxes, a worker's
 * (synchronous fp16) where server 0's pull lands. */
static int central_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    const struct central *c = s->impl;
    if (cap < 1) return 0;
    sb_memory_entry_of_replica(s, c->replica, c->worker, out);
    snprintf(out->role, sizeof out->role, "%s",
             c->server >= 0 && c->worker >= 0 ? "server+worker"
             : c->server >= 0                 ? "server"
                                              : "worker");
    if (c->pull0) {
        int first, count;
        sb_central_shard(c, 0, &first, &count);
        out->comm_bytes = (double)(((size_t)count + 1) * sizeof(float));
    }
    if (c->server >= 0) {
        size_t shard = (size_t)c->shard_count * sizeof(float);
        size_t inboxes = c->async || c->n_workers < 2 ? 1 : (size_t)c->n_workers - 1;
        size_t word = sb_central_pull_word(c) ? sizeof(float) : 0;
        out->held.optimizer_bytes = (double)sb_optimizer_state_bytes(&c->opt);
        out->comm_bytes = (double)(shard + word + inboxes * shard);
        central_model_state_formula(s->env->cfg, (double)c->replica->model->n_params, 1,
                                    &out->formula);
    }
    return 1;
}

/* The report's precision state of this rank (sb_central_precision_state). */
static void central_precision_state(const struct sb_strategy *s, double *loss_scale,
                                    long *skipped)
{
    sb_central_precision_state(s->impl, loss_scale, skipped);
}

/* The trace track of `rank`: "server" for the parameter servers (ranks
 * 0..K-1 with --servers K; rank 0, also worker 0, with --servers 0). */
static const char *central_trace_label(const struct sb_config *cfg, int rank)
{
    int servers = sb_central_opts(cfg)->servers;
    if (servers == 0) return rank == 0 ? "server + worker 0" : NULL;
    return rank < servers ? "server" : NULL;
}

const struct sb_strategy_ops sb_strategy_central = {
    .name = "central",
    .summary = "parameter servers: workers push gradient shards, pull parameter shards",
    .uses_mpi = 1,
    .options = central_options,
    .options_size = sizeof(struct central_opts),
    .comm_keys = central_comm_keys,
    .world_size = central_world_size,
    .replicas_of_world = central_replicas_of_world,
    .validate = central_validate,
    .init = central_init,
    .step = central_step,
    .evaluate = central_evaluate,
    .read_params = central_read_params,
    .describe = central_describe,
    .comm_model = central_comm_model,
    .trace_label = central_trace_label,
    .precision_state = central_precision_state,
    .destroy = central_destroy,
    .replica_params = central_replica_params,
    .model_state_formula = central_model_state_formula,
    .memory = central_memory,
};
