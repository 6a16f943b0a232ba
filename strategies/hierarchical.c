/* Strategy "hierarchical": one MPI rank per replica, like ddp, with the
 * gradients summed by a two-level all-reduce, as Horovod's
 * HOROVOD_HIERARCHICAL_ALLREDUCE and NCCL's trees across nodes do:
 *
 *   1. reduce-scatter within the host: the L ranks of a host sum a bucket
 *      and local rank i keeps shard i of the sum (shared memory, fast);
 *   2. all-reduce across hosts: local rank i of every host sums its shard
 *      with the other hosts' shard i (each of the L ranks on its own shard,
 *      so every host link carries 1/L of the bucket, in parallel);
 *   3. all-gather within the host: every rank gets every summed shard.
 *
 * Over H hosts of L ranks, each host sends 2(H-1)/H of a bucket over the
 * inter-host links, against a flat ring's 2(N-1)/N per rank at the ring's
 * host boundaries; the saving is in bytes over the slow link, paid for
 * with two extra intra-host stages (docs/hierarchical.md).
 *
 * Buckets and overlap as ddp (strategies/buckets.h, --bucket-mb,
 * --no-overlap): a bucket's reduce-scatter starts when backward has made
 * its gradients ready; each later ready callback polls the buckets in
 * flight and starts the next stage of those whose stage finished. Each
 * stage has its own communicator (local reduce-scatter, cross all-reduce,
 * local all-gather), and a stage of bucket b starts only after the same
 * stage of bucket b-1 started, so every rank issues the collectives of
 * each communicator in the same order.
 *
 * Hosts are the ranks that share memory (MPI_COMM_TYPE_SHARED), or, with
 * --ranks-per-host L, consecutive groups of L ranks (to model hosts inside
 * one machine, e.g. network namespaces or a test); every host needs the
 * same number of ranks. The update is ddp's: the sum of every rank's
 * gradient, scaled by 1 / global batch, so it equals single's with the
 * global batch up to float summation order. CPU only (the stages use the
 * mpi communicator's non-blocking reduce-scatter and all-gather). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/stats.h"
#include "strategies/buckets.h"
#include "strategies/replica.h"

/* hierarchical's own flags (cfg->strategy_opts). */
struct hier_opts {
    double bucket_mb;   /* --bucket-mb: gradient bucket size in MiB */
    int overlap;        /* start a bucket's reduction during backward (--no-overlap: 0) */
    int ranks_per_host; /* --ranks-per-host: 0 = hosts by shared memory */
};
_Static_assert(sizeof(struct hier_opts) <= SB_STRATEGY_OPTS_BYTES, "hierarchical options");

static const struct hier_opts *opts(const struct sb_config *cfg)
{
    return (const struct hier_opts *)(const void *)cfg->strategy_opts;
}

static const struct sb_strategy_option hier_options[] = {
    {"bucket-mb", "X", SB_OPTION_NUMBER, offsetof(struct hier_opts, bucket_mb), 1e-6, 1e6,
     25.0, 0, "bucket_mb", 0, "gradient bucket size in MiB"},
    {"no-overlap", NULL, SB_OPTION_SWITCH, offsetof(struct hier_opts, overlap), 0, 0, 1, 0,
     "overlap", 1, "all-reduce after backward instead of during it"},
    {"ranks-per-host", "L", SB_OPTION_INT, offsetof(struct hier_opts, ranks_per_host), 0, 4096,
     0, 0, NULL, 0, "hosts of L consecutive ranks (0 = ranks sharing memory)"},
    {NULL},
};

/* Where a bucket is: idle, a stage in flight, or done. */
enum stage { IDLE = 0, REDUCE_SCATTER, CROSS_ALLREDUCE, ALLGATHER, DONE };

struct hier {
    struct sb_replica *replica;
    struct sb_comm *world;         /* broadcast, metrics */
    struct sb_comm *local, *cross; /* stage 1 (this host), stage 2 (one rank per host) */
    struct sb_comm *local_ag;      /* stage 3: a second communicator of this host */
    struct sb_bucket_plan plan;
    enum stage *stage;             /* (plan.n) */
    struct sb_comm_request *req;   /* (plan.n) the stage in flight */
    struct sb_comm_request *whole; /* (plan.n) start and end of the two-level all-reduce */
    size_t *counts;                /* (plan.n * L) floats of shard i of bucket b: [b * L + i] */
    float *shard;                  /* (n_params) this rank's summed shards, at bucket offsets */
    size_t *pending;               /* (plan.n) floats of each bucket not yet ready */
    int launched;                  /* buckets whose reduce-scatter started, in plan order */
    sb_status cb_status;           /* first error inside the ready callback */
    struct sb_comm_counter logical; /* the two-level all-reduces as one (the report's allreduce) */
};

static int hier_processes(const struct sb_config *cfg) { return cfg->replicas; }

static sb_status hier_validate(const struct sb_config *cfg)
{
    if (strcmp(cfg->device, "cpu") != 0)
        return sb_error(SB_ERR_USAGE, "--device %s: strategy hierarchical runs on cpu only (its "
                        "stages use MPI's non-blocking reduce-scatter and all-gather)",
                        cfg->device);
    int l = opts(cfg)->ranks_per_host;
    if (l > 0 && cfg->replicas % l != 0)
        return sb_error(SB_ERR_USAGE, "--ranks-per-host: %d replicas do not fill hosts of %d "
                        "ranks", cfg->replicas, l);
    return SB_OK;
}

static void hier_destroy(struct sb_strategy *s)
{
    struct hier *h = s->impl;
    if (!h) return;
    sb_replica_destroy(h->replica);
    sb_comm_destroy(h->local_ag);
    sb_comm_destroy(h->cross);
    sb_comm_destroy(h->local);
    sb_comm_destroy(h->world);
    sb_bucket_plan_free(&h->plan);
    free(h->stage);
    free(h->req);
    free(h->whole);
    free(h->counts);
    free(h->shard);
    free(h->pending);
    free(h);
    s->impl = NULL;
}

static sb_status hier_init(struct sb_strategy *s)
{
    const struct sb_config *cfg = s->env->cfg;
    struct hier *h = calloc(1, sizeof *h);
    if (!h) return sb_error(SB_ERR_NOMEM, "hierarchical: out of memory");
    s->impl = h;
    SB_TRY(sb_comm_world_create(cfg, s->env->mpi_world, s->env->local_rank, &h->world));
    SB_TRY(sb_comm_split_hosts(h->world, opts(cfg)->ranks_per_host, &h->local, &h->cross));
    SB_TRY(sb_comm_split(h->local, 0, h->local->rank, &h->local_ag));
    SB_TRY(sb_replica_create(s->env, 1, &h->replica));
    s->replica = h->replica;
    s->comm = h->world;
    struct sb_model *m = h->replica->model;
    SB_TRY(sb_bucket_plan_create(m->tensors, m->n_tensors, opts(cfg)->bucket_mb, &h->plan));
    int n = h->plan.n, l = h->local->size;
    h->stage = calloc((size_t)n, sizeof *h->stage);
    h->req = calloc((size_t)n, sizeof *h->req);
    h->whole = calloc((size_t)n, sizeof *h->whole);
    h->counts = calloc((size_t)n * (size_t)l, sizeof *h->counts);
    h->pending = calloc((size_t)n, sizeof *h->pending);
    h->shard = calloc(m->n_params ? m->n_params : 1, sizeof *h->shard);
    if (!h->stage || !h->req || !h->whole || !h->counts || !h->pending || !h->shard)
        return sb_error(SB_ERR_NOMEM, "hierarchical: out of memory");
    for (int b = 0; b < n; b++)
        for (int i = 0; i < l; i++) {
            int first, count;
            sb_split_range((int)h->plan.buckets[b].count, l, i, &first, &count);
            h->counts[(size_t)b * l + i] = (size_t)count;
        }
    return sb_comm_broadcast(h->world, m->params, m->n_params, 0);
}

/* Starts stage `next` of bucket b (its previous stage is complete). */
static sb_status issue(struct hier *h, int b, enum stage next)
{
    const struct sb_bucket *bk = &h->plan.buckets[b];
    float *grads = h->replica->model->grads + bk->offset;
    float *shard = h->shard + bk->offset; /* this rank's shard, at the bucket's start */
    const size_t *counts = h->counts + (size_t)b * h->local->size;
    size_t mine = counts[h->local->rank];
    h->stage[b] = next;
    switch (next) {
    case REDUCE_SCATTER:
        h->whole[b].start_s = sb_now_s();
        h->logical.calls++;
        h->logical.bytes += (double)bk->count * sizeof(float);
        return sb_comm_ireduce_scatter(h->local, grads, shard, counts, &h->req[b]);
    case CROSS_ALLREDUCE:
        return sb_comm_iallreduce(h->cross, shard, mine, &h->req[b]);
    case ALLGATHER:
        return sb_comm_iallgather(h->local_ag, shard, grads, counts, &h->req[b]);
    default:
        return sb_error(SB_ERR_INTERNAL, "hierarchical: no stage %d", (int)next);
    }
}

static struct sb_comm *stage_comm(const struct hier *h, enum stage st)
{
    return st == REDUCE_SCATTER ? h->local : st == CROSS_ALLREDUCE ? h->cross : h->local_ag;
}

/* Moves bucket b on: tests (or, with block, waits for) its stage in flight
 * and starts the next one when that is done and bucket b-1 has started it
 * already (the issue order on each communicator). *moved = 1 when a stage
 * completed. */
static sb_status advance(struct hier *h, int b, int block, int *moved)
{
    for (;;) {
        enum stage st = h->stage[b];
        if (st == IDLE || st == DONE) return SB_OK;
        int done = 0;
        if (block) {
            SB_TRY(sb_comm_wait(stage_comm(h, st), &h->req[b]));
            done = 1;
        } else {
            SB_TRY(sb_comm_test(stage_comm(h, st), &h->req[b], &done));
        }
        if (!done) return SB_OK;
        *moved = 1;
        if (st == ALLGATHER) {
            h->stage[b] = DONE;
            h->whole[b].done_s = h->req[b].done_s;
            h->logical.seconds += h->whole[b].done_s - h->whole[b].start_s;
            return SB_OK;
        }
        if (b > 0 && h->stage[b - 1] <= st) return SB_OK; /* b-1 first */
        SB_TRY(issue(h, b, st + 1));
    }
}

/* Starts, in plan order, the reduce-scatter of every bucket whose
 * gradients are all ready, then moves every bucket in flight on. */
static sb_status progress(struct hier *h)
{
    while (h->launched < h->plan.n && h->pending[h->launched] == 0)
        SB_TRY(issue(h, h->launched++, REDUCE_SCATTER));
    for (int b = 0; b < h->launched; b++) {
        int moved = 0;
        SB_TRY(advance(h, b, 0, &moved));
    }
    return SB_OK;
}

/* Backward's ready callback: grads[offset, offset + count) are final. */
static void on_ready(void *ctx, size_t offset, size_t count)
{
    struct hier *h = ctx;
    if (h->cb_status) return;
    size_t lo = offset, hi = offset + count;
    for (int i = 0; i < h->plan.n; i++) {
        const struct sb_bucket *b = &h->plan.buckets[i];
        size_t a = lo > b->offset ? lo : b->offset;
        size_t z = hi < b->offset + b->count ? hi : b->offset + b->count;
        if (a < z) h->pending[i] -= z - a < h->pending[i] ? z - a : h->pending[i];
    }
    h->cb_status = progress(h);
}

/* Busy time of the two-level all-reduces: the union of their [start, done]
 * intervals (*total_s) and its part after backward ended (*exposed_s), as
 * ddp measures its buckets (starts do not decrease: one merge pass). */
static void busy_time(const struct sb_comm_request *w, int n, double t_end, double *total_s,
                      double *exposed_s)
{
    double total = 0.0, exposed = 0.0;
    for (int i = 0; i < n;) {
        double s = w[i].start_s, e = w[i].done_s;
        for (i++; i < n && w[i].start_s <= e; i++)
            if (w[i].done_s > e) e = w[i].done_s;
        total += e - s;
        double from = s > t_end ? s : t_end;
        if (e > from) exposed += e - from;
    }
    *total_s = total;
    *exposed_s = exposed;
}

static sb_status hier_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                           struct sb_step_result *out)
{
    (void)step;
    struct hier *h = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    struct sb_model *m = h->replica->model;
    for (int b = 0; b < h->plan.n; b++) {
        h->pending[b] = h->plan.buckets[b].count;
        h->stage[b] = IDLE;
    }
    h->launched = 0;
    h->cb_status = SB_OK;
    SB_TRY(sb_replica_gradients(h->replica, global_idx + (size_t)h->world->rank * cfg->batch,
                                cfg->batch, sb_config_global_batch(cfg),
                                opts(cfg)->overlap ? on_ready : NULL, h, out));
    double t_backward_end = sb_now_s();
    SB_TRY(h->cb_status);
    for (int b = 0; b < h->plan.n; b++) h->pending[b] = 0; /* all ready now */
    SB_TRY(progress(h));
    /* Until every bucket is done: poll all; when nothing moved, block on
     * the first unfinished bucket (its predecessor is done, so it may go
     * on to its next stage). */
    for (int first = 0; first < h->plan.n;) {
        int moved = 0;
        for (int b = first; b < h->plan.n; b++) SB_TRY(advance(h, b, 0, &moved));
        if (!moved && h->stage[first] != DONE) SB_TRY(advance(h, first, 1, &moved));
        while (first < h->plan.n && h->stage[first] == DONE) first++;
    }
    double total_s, exposed_s;
    busy_time(h->whole, h->plan.n, t_backward_end, &total_s, &exposed_s);
    out->phase_ms[SB_PHASE_COMM] += 1e3 * total_s;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += 1e3 * exposed_s;
    return sb_replica_update(h->replica, m->grads, out);
}

static sb_status hier_evaluate(struct sb_strategy *s, double *accuracy)
{
    /* Replicas are identical: each rank scores a shard of the test set. */
    struct hier *h = s->impl;
    int n = s->env->data->test.n, first, count;
    sb_split_range(n, h->world->size, h->world->rank, &first, &count);
    long correct = 0;
    SB_TRY(sb_replica_evaluate(h->replica, first, count, &correct));
    double total = (double)correct;
    SB_TRY(sb_comm_allreduce_f64(h->world, &total, 1));
    *accuracy = total / n;
    return SB_OK;
}

/* The report's comm object: the world's broadcast, and the two-level
 * all-reduces counted as one all-reduce per bucket over the world (bytes:
 * the bucket; seconds: its first stage's start to its last stage's end),
 * so that it compares with ddp's; the stages are in strategy_details. */
static void hier_comm_counters(const struct sb_strategy *s,
                               struct sb_comm_counter out[SB_COMM_NKINDS], int *ranks)
{
    const struct hier *h = s->impl;
    memcpy(out, h->world->counters, SB_COMM_NKINDS * sizeof *out);
    out[SB_COMM_ALLREDUCE] = h->logical;
    *ranks = h->world->size;
}

static void hier_reset_comm_counters(struct sb_strategy *s)
{
    struct hier *h = s->impl;
    sb_comm_reset_counters(h->world);
    sb_comm_reset_counters(h->local);
    sb_comm_reset_counters(h->cross);
    sb_comm_reset_counters(h->local_ag);
    memset(&h->logical, 0, sizeof h->logical);
}

/* Adds `prefix`_bytes_per_step, _seconds_per_step and _busbw_GBps of
 * counter k over n ranks with busbw factor f (nccl-tests' convention). */
static void add_level(struct sb_strategy_details *d, const char *prefix,
                      struct sb_comm_counter k, double factor, long steps)
{
    char key[48];
    double per = steps > 0 ? 1.0 / (double)steps : 0.0;
    double v = k.bytes * per;
    snprintf(key, sizeof key, "%s_bytes_per_step", prefix);
    sb_details_add(d, key, 0, &v, 1);
    v = k.seconds * per;
    snprintf(key, sizeof key, "%s_seconds_per_step", prefix);
    sb_details_add(d, key, 0, &v, 1);
    v = k.seconds > 0 ? k.bytes / k.seconds / 1e9 * factor : 0.0;
    snprintf(key, sizeof key, "%s_busbw_GBps", prefix);
    sb_details_add(d, key, 0, &v, 1);
}

/* Hosts and ranks per host, the bucket plan, and per level the bytes and
 * seconds per measured step and the bus bandwidth of this rank's stages:
 * intra_host = reduce-scatter + all-gather over the host's L ranks
 * (factor (L-1)/L), inter_host = the all-reduce of this rank's shard
 * across the H hosts (factor 2(H-1)/H). */
static void hier_describe(const struct sb_strategy *s, long measured_steps,
                          struct sb_strategy_details *d)
{
    const struct hier *h = s->impl;
    double v = h->cross->size;
    sb_details_add(d, "hosts", 0, &v, 1);
    v = h->local->size;
    sb_details_add(d, "ranks_per_host", 0, &v, 1);
    v = h->plan.n;
    sb_details_add(d, "bucket_count", 0, &v, 1);
    double bytes[SB_DETAIL_VALUES_MAX];
    int k = h->plan.n < SB_DETAIL_VALUES_MAX ? h->plan.n : SB_DETAIL_VALUES_MAX;
    for (int i = 0; i < k; i++) bytes[i] = (double)h->plan.buckets[i].count * sizeof(float);
    sb_details_add(d, "bucket_bytes", 1, bytes, k);
    sb_details_add_bool(d, "overlap", opts(s->env->cfg)->overlap);
    struct sb_comm_counter intra = h->local->counters[SB_COMM_REDUCE_SCATTER];
    const struct sb_comm_counter *ag = &h->local_ag->counters[SB_COMM_ALLGATHER];
    intra.calls += ag->calls;
    intra.bytes += ag->bytes;
    intra.seconds += ag->seconds;
    add_level(d, "intra_host", intra, sb_comm_busbw_factor(SB_COMM_ALLGATHER, h->local->size),
              measured_steps);
    add_level(d, "inter_host", h->cross->counters[SB_COMM_ALLREDUCE],
              sb_comm_busbw_factor(SB_COMM_ALLREDUCE, h->cross->size), measured_steps);
}

/* One replica per rank, kept identical by the two-level all-reduce (every
 * rank ends each bucket with the same all-gathered sum). */
static float *hier_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct hier *h = s->impl;
    *n = 1;
    return i == 0 ? h->replica->model->params : NULL;
}

const struct sb_strategy_ops sb_strategy_hierarchical = {
    .name = "hierarchical",
    .summary = "ddp with a two-level all-reduce: within each host, then across hosts (Horovod)",
    .uses_mpi = 1,
    .options = hier_options,
    .options_size = sizeof(struct hier_opts),
    .processes = hier_processes,
    .validate = hier_validate,
    .init = hier_init,
    .step = hier_step,
    .evaluate = hier_evaluate,
    .comm_counters = hier_comm_counters,
    .reset_comm_counters = hier_reset_comm_counters,
    .describe = hier_describe,
    .replica_params = hier_replica_params,
    .destroy = hier_destroy,
};
