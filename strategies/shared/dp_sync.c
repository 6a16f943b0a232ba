/* Data-parallel synchronisation by bucketed all-reduce over any
 * communicator (dp_sync.h). */
#include "strategies/shared/dp_sync.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/stats.h"
#include "strategies/shared/grad_sync.h"

struct sb_dp_sync {
    struct sb_comm *comm;        /* the dp communicator (not owned) */
    struct sb_model *model;      /* not owned */
    struct sb_grad_range range;
    struct sb_dp_sync_cfg cfg;
    struct sb_bucket_plan plan;
    struct sb_comm_request *req; /* (plan.n) this step's request per bucket */
    size_t *pending;             /* (plan.n) floats of each bucket not yet ready */
    int launched;                /* buckets started this step, in plan order */
    sb_status cb_status;         /* first error inside the ready callback */
    long step;                   /* this step (sb_dp_sync_begin) */
    enum sb_dp_sync_mode mode;   /* how it synchronises */
    int measure;                 /* this step measures the hook's error */
    double *hidden_ms;           /* (n_hidden) comm - comm_exposed per step (host-timed) */
    size_t n_hidden, cap_hidden;
    struct sb_grad_sync *sync;   /* --grad-compression / --local-sgd, or NULL */
};

sb_status sb_dp_sync_create(struct sb_comm *comm, struct sb_model *m, struct sb_grad_range range,
                            const struct sb_dp_sync_cfg *cfg, struct sb_dp_sync **out)
{
    *out = NULL;
    struct sb_dp_sync *d = calloc(1, sizeof *d);
    if (!d) return sb_error(SB_ERR_NOMEM, "dp_sync: out of memory");
    d->comm = comm;
    d->model = m;
    d->range = range;
    d->cfg = *cfg;
    sb_status st = sb_grad_range_plan(m, range, cfg->bucket_mb, &d->plan);
    if (!st) {
        d->req = calloc((size_t)d->plan.n, sizeof *d->req);
        d->pending = calloc((size_t)d->plan.n, sizeof *d->pending);
        if (!d->req || !d->pending) st = sb_error(SB_ERR_NOMEM, "dp_sync: out of memory");
    }
    const struct sb_config *run = cfg->run;
    if (!st && run && (cfg->host_memory || strcmp(run->grad_compression, "none") != 0 ||
                       run->precision != SB_PRECISION_FP32)) {
        if (range.offset != 0 || range.count != m->n_params)
            st = sb_error(SB_ERR_USAGE, "--grad-compression/--local-sgd: synchronise the whole "
                          "model (a range of %zu of its %zu parameters was given)",
                          range.count, m->n_params);
        else
            st = sb_grad_sync_create(run, m, comm, cfg->host_memory, cfg->last_step, &d->sync);
    }
    d->cfg.run = NULL; /* not kept: the hook has what it needs */
    if (st) {
        sb_dp_sync_destroy(d);
        return st;
    }
    *out = d;
    return SB_OK;
}

enum sb_dp_sync_mode sb_dp_sync_begin(struct sb_dp_sync *d, long step)
{
    for (int i = 0; i < d->plan.n; i++) d->pending[i] = d->plan.buckets[i].count;
    d->launched = 0;
    d->cb_status = SB_OK;
    d->step = step;
    d->mode = d->sync && sb_grad_sync_local(d->sync, step)    ? SB_DP_SYNC_LOCAL
              : d->sync && sb_grad_sync_hooked(d->sync, step) ? SB_DP_SYNC_HOOKED
                                                              : SB_DP_SYNC_BUCKETS;
    /* A step that measures the error against the exact average needs every
     * local gradient before its buckets start. */
    d->measure = d->mode == SB_DP_SYNC_BUCKETS && d->sync &&
                 sb_grad_sync_measure_due(d->sync, step);
    return d->mode;
}

int sb_dp_sync_overlaps(const struct sb_dp_sync *d)
{
    return d->cfg.overlap && sb_comm_overlaps(d->comm);
}

sb_grad_ready_fn sb_dp_sync_ready_fn(const struct sb_dp_sync *d)
{
    int during = d->mode == SB_DP_SYNC_BUCKETS && sb_dp_sync_overlaps(d) && !d->measure;
    return during ? sb_dp_sync_ready : NULL;
}

/* Starts, in plan order, every bucket whose gradients are all ready. */
static sb_status launch_ready(struct sb_dp_sync *d)
{
    float *grads = d->model->grads;
    while (d->launched < d->plan.n && d->pending[d->launched] == 0) {
        const struct sb_bucket *b = &d->plan.buckets[d->launched];
        d->req[d->launched].index = d->launched; /* named by the watchdog */
        SB_TRY(sb_comm_iallreduce(d->comm, grads + b->offset, b->count, &d->req[d->launched]));
        d->launched++;
    }
    return SB_OK;
}

/* Polls every bucket in flight so that the communicator progresses them. */
static sb_status poll_launched(struct sb_dp_sync *d)
{
    for (int i = 0; i < d->launched; i++) {
        int done = 0;
        SB_TRY(sb_comm_test(d->comm, &d->req[i], &done));
    }
    return SB_OK;
}

void sb_dp_sync_ready(void *ctx, size_t offset, size_t count)
{
    struct sb_dp_sync *d = ctx;
    if (d->cb_status) return;
    size_t lo = offset, hi = offset + count;
    for (int i = 0; i < d->plan.n; i++) {
        const struct sb_bucket *b = &d->plan.buckets[i];
        size_t a = lo > b->offset ? lo : b->offset;
        size_t z = hi < b->offset + b->count ? hi : b->offset + b->count;
        if (a < z) d->pending[i] -= z - a < d->pending[i] ? z - a : d->pending[i];
    }
    sb_status st = launch_ready(d);
    if (!st) st = poll_launched(d);
    d->cb_status = st;
}

/* Keeps one step's comm - comm_exposed. */
static sb_status record_hidden(struct sb_dp_sync *d, double hidden_ms)
{
    if (d->n_hidden == d->cap_hidden) {
        size_t cap = d->cap_hidden ? 2 * d->cap_hidden : 1024;
        double *p = realloc(d->hidden_ms, cap * sizeof *p);
        if (!p) return sb_error(SB_ERR_NOMEM, "dp_sync: out of memory");
        d->hidden_ms = p;
        d->cap_hidden = cap;
    }
    d->hidden_ms[d->n_hidden++] = hidden_ms;
    return SB_OK;
}

sb_status sb_dp_sync_finish(struct sb_dp_sync *d, struct sb_step_result *out)
{
    double t_backward_end = sb_now_s();
    float *grads = d->model->grads;
    if (d->mode == SB_DP_SYNC_LOCAL) return SB_OK;
    if (d->mode == SB_DP_SYNC_HOOKED) return sb_grad_sync_gradients(d->sync, d->step, grads, out);
    SB_TRY(d->cb_status);
    if (d->measure) SB_TRY(sb_grad_sync_reference(d->sync, grads));
    /* Buckets not started during backward (all of them without overlap). */
    for (int i = 0; i < d->plan.n; i++) d->pending[i] = 0;
    SB_TRY(launch_ready(d));
    for (int i = 0; i < d->plan.n; i++) SB_TRY(sb_comm_wait(d->comm, &d->req[i]));
    if (d->sync) {
        if (d->measure) sb_grad_sync_compare(d->sync, grads);
        sb_grad_sync_count_plain(d->sync);
    }
    if (d->cfg.device_comm) return SB_OK;
    double total_s, exposed_s, hidden_s;
    sb_bucket_comm_times(d->req, d->plan.n, t_backward_end, &total_s, &exposed_s, &hidden_s);
    out->phase_ms[SB_PHASE_COMM] += 1e3 * total_s;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += 1e3 * exposed_s;
    return record_hidden(d, 1e3 * hidden_s);
}

sb_status sb_dp_sync_after_local_update(struct sb_dp_sync *d, struct sb_step_result *out)
{
    if (d->mode != SB_DP_SYNC_LOCAL) return SB_OK;
    return sb_grad_sync_after_local_update(d->sync, d->step, d->model->params, out);
}

int sb_dp_sync_in_sync(const struct sb_dp_sync *d)
{
    return !d || !d->sync || sb_grad_sync_in_sync(d->sync);
}

const struct sb_bucket_plan *sb_dp_sync_plan(const struct sb_dp_sync *d) { return &d->plan; }

void sb_dp_sync_describe(const struct sb_dp_sync *d, long measured_steps,
                         struct sb_strategy_details *det)
{
    double v = d->plan.n;
    sb_details_add(det, "bucket_count", 0, &v, 1);
    double bytes[SB_DETAIL_VALUES_MAX];
    int k = d->plan.n < SB_DETAIL_VALUES_MAX ? d->plan.n : SB_DETAIL_VALUES_MAX;
    for (int i = 0; i < k; i++) bytes[i] = (double)d->plan.buckets[i].count * sizeof(float);
    sb_details_add(det, "bucket_bytes", 1, bytes, k);
    sb_details_add_bool(det, "overlap", sb_dp_sync_overlaps(d));
    if (d->sync) sb_grad_sync_describe(d->sync, d->comm, measured_steps, det);
    struct sb_summary sum;
    /* The harness's measured steps are the last measured_steps steps. */
    size_t n = measured_steps < (long)d->n_hidden ? (size_t)measured_steps : d->n_hidden;
    if (n > 0 && sb_summarize(d->hidden_ms + d->n_hidden - n, n, &sum) == SB_OK) {
        sb_details_add(det, "comm_hidden_ms_median", 0, &sum.median, 1);
        sb_details_add(det, "comm_hidden_ms_mean", 0, &sum.mean, 1);
    }
}

void sb_dp_sync_reset_counters(struct sb_dp_sync *d)
{
    if (d->sync) sb_grad_sync_reset(d->sync);
}

void sb_dp_sync_destroy(struct sb_dp_sync *d)
{
    if (!d) return;
    sb_bucket_plan_free(&d->plan);
    sb_grad_sync_destroy(d->sync);
    free(d->req);
    free(d->pending);
    free(d->hidden_ms);
    free(d);
}
