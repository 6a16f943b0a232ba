/* zero_sync (zero_sync.h): the units and shards, the reduce-scatters as
 * backward makes units ready, the optimizer over the shard and stages
 * 1-2's all-gathers, and the step's phases. Stage 3's gathers:
 * zero_gather.c. */
#include <math.h>
#include <stdlib.h>

#include "strategies/shared/replica.h"
#include "strategies/shared/zero_sync_impl.h"

void sb_zero_discard_grads(struct sb_zero_sync *z, struct sb_zero_unit *u)
{
    double t0 = sb_now_s();
    z->be->discard(z->model->grads + u->off, u->count * sizeof(float));
    z->free_s += sb_now_s() - t0;
    u->rs_freed = 1;
}

sb_status sb_zero_poll_units(struct sb_zero_sync *z)
{
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        int done = 0;
        if (u->state == SB_ZERO_UNIT_GATHERING) SB_TRY(sb_comm_test(z->gcomm, &u->ag, &done));
        if (done) sb_zero_gathered(z, u);
        if (u->rs_issued && !u->rs_freed) {
            SB_TRY(sb_comm_test(z->comm, &u->rs, &done));
            if (done && z->stage >= 2) sb_zero_discard_grads(z, u);
        }
    }
    return SB_OK;
}

/* Cuts the range into units and this rank's shard out of them. */
static sb_status plan_units(struct sb_zero_sync *z, double bucket_mb)
{
    /* Stage 3's units are layers: buckets capped below any layer's size. */
    double cap = z->stage == 3 ? SB_BUCKET_CAP_PER_LAYER_MB : bucket_mb;
    SB_TRY(sb_grad_range_plan(z->model, z->range, cap, &z->plan));
    z->n_units = z->plan.n;
    z->u = calloc((size_t)z->n_units, sizeof *z->u);
    z->iv = calloc(3 * (size_t)z->n_units, sizeof *z->iv);
    if (!z->u || !z->iv) return sb_error(SB_ERR_NOMEM, "zero: out of memory");
    z->shard = 0;
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        u->off = z->plan.buckets[i].offset;
        u->count = z->plan.buckets[i].count;
        if (u->count > (size_t)0x7fffffff)
            return sb_error(SB_ERR_USAGE, "zero: a layer of more than 2^31 parameters");
        u->counts = calloc((size_t)z->size, sizeof *u->counts);
        if (!u->counts) return sb_error(SB_ERR_NOMEM, "zero: out of memory");
        for (int r = 0; r < z->size; r++) {
            int first, n;
            sb_split_range((int)u->count, z->size, r, &first, &n);
            u->counts[r] = (size_t)n;
            if (r == z->rank) {
                u->mine_off = (size_t)first;
                u->mine = (size_t)n;
            }
        }
        u->soff = z->shard;
        z->shard += u->mine;
    }
    return SB_OK;
}

/* The piece's state after its communicators and units (create's second
 * half): shard buffers, optimizer state, stage 3's parameter shard and
 * hook. */
static sb_status create_shards(struct sb_zero_sync *z, const struct sb_zero_sync_cfg *cfg)
{
    const struct sb_backend_ops *be = z->be;
    struct sb_model *m = z->model;
    SB_TRY(be->alloc((void **)&z->gshard, (z->shard ? z->shard : 1) * sizeof(float)));
    SB_TRY(sb_optimizer_init(&z->opt, be, cfg->run, z->shard));
    if (z->stage < 3) return SB_OK;
    /* Stage 3 keeps its blocks of the parameters and frees the rest. */
    SB_TRY(be->alloc((void **)&z->pshard, (z->shard ? z->shard : 1) * sizeof(float)));
    for (int i = 0; i < z->n_units; i++)
        be->copy(z->pshard + z->u[i].soff, m->params + z->u[i].off + z->u[i].mine_off,
                 z->u[i].mine);
    be->discard(m->params + z->range.offset, z->range.count * sizeof(float));
    be->discard(m->grads + z->range.offset, z->range.count * sizeof(float));
    m->layer_hook = sb_zero_on_layer;
    m->layer_ctx = z;
    return SB_OK;
}

sb_status sb_zero_sync_create(struct sb_comm *comm, struct sb_model *m,
                              const struct sb_backend_ops *be, struct sb_grad_range range,
                              const struct sb_zero_sync_cfg *cfg, struct sb_zero_sync **out)
{
    *out = NULL;
    struct sb_zero_sync *z = calloc(1, sizeof *z);
    if (!z) return sb_error(SB_ERR_NOMEM, "zero: out of memory");
    z->model = m;
    z->be = be;
    z->range = range;
    z->comm = z->gcomm = comm;
    z->stage = cfg->stage;
    z->overlap = cfg->overlap;
    z->half = cfg->half;
    z->fmt = cfg->fmt;
    z->param_half = cfg->param_half;
    z->param_fmt = cfg->param_fmt;
    z->size = comm->size;
    z->rank = comm->rank;
    /* A duplicate for traffic that is no training step's (every rank). */
    sb_status st = sb_comm_split(comm, 0, z->rank, &z->quiet);
    if (!st) st = plan_units(z, cfg->bucket_mb);
    if (!st) st = create_shards(z, cfg);
    if (st) {
        sb_zero_sync_destroy(z);
        return st;
    }
    *out = z;
    return SB_OK;
}

void sb_zero_sync_begin(struct sb_zero_sync *z)
{
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        u->pending = u->count;
        u->rs_issued = u->rs_freed = 0;
    }
    z->launched = 0;
    z->convert_s = z->hook_convert_s = z->free_s = 0.0;
    z->blocked_s[0] = z->blocked_s[1] = 0.0;
    z->n_iv = 0;
    z->cb_status = SB_OK;
    z->backward_phase = 0;
    z->gcomm = z->comm;
}

sb_grad_ready_fn sb_zero_sync_ready_fn(const struct sb_zero_sync *z)
{
    return z->stage == 3 || (z->stage == 2 && z->overlap) ? sb_zero_sync_ready : NULL;
}

/* Starts, in unit order, the reduce-scatter of every unit whose
 * gradients are all ready (every rank issues the same sequence). */
static sb_status launch_ready(struct sb_zero_sync *z)
{
    const struct sb_model *m = z->model;
    while (z->launched < z->n_units && z->u[z->launched].pending == 0) {
        struct sb_zero_unit *u = &z->u[z->launched];
        u->rs.index = z->launched;
        if (z->half) /* blocking: complete once issued */
            SB_TRY(sb_comm_reduce_scatter16(z->comm, z->fmt, m->grads + u->off,
                                            z->gshard + u->soff, u->counts, &u->rs,
                                            &z->convert_s));
        else
            SB_TRY(sb_comm_ireduce_scatter(z->comm, m->grads + u->off, z->gshard + u->soff,
                                           u->counts, &u->rs));
        u->rs_issued = 1;
        z->launched++;
    }
    return SB_OK;
}

/* Its time on collectives (issuing and polling the reduce-scatters; the
 * whole blocking 16-bit one, less its conversions) is the step's
 * (sb_zero_hook_leave). */
void sb_zero_sync_ready(void *ctx, size_t off, size_t count)
{
    struct sb_zero_sync *z = ctx;
    if (z->cb_status) return;
    struct sb_zero_hook_mark at = sb_zero_hook_enter(z);
    size_t lo = off, hi = off + count;
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        size_t a = lo > u->off ? lo : u->off;
        size_t b = hi < u->off + u->count ? hi : u->off + u->count;
        if (a < b) u->pending -= b - a < u->pending ? b - a : u->pending;
    }
    sb_status st = launch_ready(z);
    if (!st) st = sb_zero_poll_units(z);
    z->cb_status = st;
    sb_zero_hook_leave(z, 1, at);
}

/* Orders collectives by their start (qsort). */
static int by_start(const void *a, const void *b)
{
    double x = ((const struct sb_comm_request *)a)->start_s;
    double y = ((const struct sb_comm_request *)b)->start_s;
    return (x > y) - (x < y);
}

/* The step's phases, once its collectives are complete (t_backward_end:
 * when backward returned). The hooks ran inside forward and backward, so
 * the seconds they blocked on collectives move from those phases to
 * comm_exposed (compute waited for them), and their 16-bit conversions from
 * backward to compress: the phases are disjoint, and data + forward +
 * backward + comm_exposed + compress + optimizer is the step (less the
 * bookkeeping's microseconds). comm is the union of the spans of the
 * step's collectives (stage 3's gathers included; issue to observed
 * completion), less the conversions inside the 16-bit ones; comm_exposed
 * the hooks' blocked seconds plus the part of that union after backward
 * (less the conversions there), at most comm (a hook's own bookkeeping,
 * microseconds outside any collective's span, is dropped). Stages 1-2's
 * all-gathers after the optimizer are sb_zero_sync_update's. */
static void step_phases(struct sb_zero_sync *z, double t_backward_end, struct sb_step_result *out)
{
    for (int i = 0; i < z->n_units; i++) z->iv[z->n_iv++] = z->u[i].rs;
    qsort(z->iv, (size_t)z->n_iv, sizeof *z->iv, by_start);
    double total_s, exposed_s, hidden_s;
    sb_bucket_comm_times(z->iv, z->n_iv, t_backward_end, &total_s, &exposed_s, &hidden_s);
    double blocked_s = z->blocked_s[0] + z->blocked_s[1];
    double convert_after_s = z->convert_s - z->hook_convert_s;
    out->phase_ms[SB_PHASE_FORWARD] -= 1e3 * z->blocked_s[0];
    out->phase_ms[SB_PHASE_BACKWARD] -= 1e3 * (z->blocked_s[1] + z->hook_convert_s);
    double comm_s = fmax(total_s - z->convert_s, 0.0);
    out->phase_ms[SB_PHASE_COMPRESS] += 1e3 * z->convert_s;
    out->phase_ms[SB_PHASE_COMM] += 1e3 * comm_s;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] +=
        1e3 * fmin(blocked_s + fmax(exposed_s - convert_after_s, 0.0), comm_s);
}

sb_status sb_zero_sync_finish(struct sb_zero_sync *z, struct sb_step_result *out)
{
    double t_backward_end = sb_now_s();
    SB_TRY(z->cb_status);
    /* Reduce-scatters not started during backward (all of them in stage 1). */
    for (int i = 0; i < z->n_units; i++) z->u[i].pending = 0;
    SB_TRY(launch_ready(z));
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        SB_TRY(sb_comm_wait(z->comm, &u->rs));
        if (z->stage >= 2 && !u->rs_freed) sb_zero_discard_grads(z, u);
    }
    /* The first layer's parameters, still gathered from its backward. */
    for (int i = 0; z->stage == 3 && i < z->n_units; i++)
        if (z->u[i].state != SB_ZERO_UNIT_FREE) {
            if (z->u[i].state == SB_ZERO_UNIT_GATHERING) {
                SB_TRY(sb_comm_wait(z->comm, &z->u[i].ag));
                sb_zero_gathered(z, &z->u[i]);
            }
            sb_zero_discard_params(z, &z->u[i]);
        }
    step_phases(z, t_backward_end, out);
    return SB_OK;
}

/* Stages 1-2 after the reduce-scatters: steps this rank's blocks of the
 * parameters in place, then all-gathers every unit's blocks (sent from
 * the gradient shard, which holds a copy: MPI's all-gather may not read
 * its send buffer inside its receive buffer). */
static sb_status step_and_gather(struct sb_zero_sync *z, struct sb_step_result *out)
{
    const struct sb_backend_ops *be = z->be;
    struct sb_model *m = z->model;
    double t0 = sb_now_s();
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        sb_optimizer_step_part(&z->opt, u->soff, u->mine, m->params + u->off + u->mine_off,
                               z->gshard + u->soff);
    }
    sb_optimizer_end_step(&z->opt);
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        be->copy(z->gshard + u->soff, m->params + u->off + u->mine_off, u->mine);
    }
    double t1 = sb_now_s();
    out->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (t1 - t0);
    for (int i = 0; i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        u->ag.index = i;
        SB_TRY(sb_zero_gather_params(z, z->comm, z->gshard + u->soff, m->params + u->off,
                                     u->counts, &u->ag));
    }
    for (int i = 0; i < z->n_units; i++) SB_TRY(sb_comm_wait(z->comm, &z->u[i].ag));
    double ms = 1e3 * (sb_now_s() - t1);
    out->phase_ms[SB_PHASE_COMM] += ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += ms;
    return be->check();
}

sb_status sb_zero_sync_update(struct sb_zero_sync *z, struct sb_step_result *out)
{
    if (z->stage < 3) return step_and_gather(z, out);
    double t0 = sb_now_s();
    sb_optimizer_step(&z->opt, z->pshard, z->gshard);
    out->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (sb_now_s() - t0);
    return z->be->check();
}

sb_status sb_zero_sync_find_inf(struct sb_zero_sync *z, const struct sb_loss_scaler *ls,
                                int *found_inf)
{
    *found_inf = 0;
    if (!ls->enabled) return SB_OK;
    sb_loss_scaler_unscale(ls, z->be, z->gshard, z->shard, found_inf);
    return z->be->check();
}

sb_status sb_zero_sync_unscale(struct sb_zero_sync *z, struct sb_loss_scaler *ls, int *skip)
{
    *skip = 0;
    if (!ls->enabled) return SB_OK;
    int found = 0;
    SB_TRY(sb_zero_sync_find_inf(z, ls, &found));
    SB_TRY(sb_loss_scaler_agree(ls, z->comm, &found));
    *skip = sb_loss_scaler_update(ls, found);
    return SB_OK;
}

size_t sb_zero_sync_shard_floats(const struct sb_zero_sync *z) { return z->shard; }

int sb_zero_sync_units(const struct sb_zero_sync *z) { return z->n_units; }

size_t sb_zero_sync_unit_floats(const struct sb_zero_sync *z, int i) { return z->u[i].count; }

void sb_zero_sync_block(const struct sb_zero_sync *z, int i, size_t *offset, size_t *count,
                        size_t *shard_offset)
{
    const struct sb_zero_unit *u = &z->u[i];
    *offset = u->off + u->mine_off;
    *count = u->mine;
    *shard_offset = u->soff;
}

const float *sb_zero_sync_grad_shard(const struct sb_zero_sync *z) { return z->gshard; }

size_t sb_zero_sync_optimizer_bytes(const struct sb_zero_sync *z)
{
    return sb_optimizer_state_bytes(&z->opt);
}

void sb_zero_sync_destroy(struct sb_zero_sync *z)
{
    if (!z) return;
    if (z->model && z->model->layer_ctx == z) {
        z->model->layer_hook = NULL;
        z->model->layer_ctx = NULL;
    }
    for (int i = 0; z->u && i < z->n_units; i++) free(z->u[i].counts);
    free(z->u);
    free(z->iv);
    sb_bucket_plan_free(&z->plan);
    sb_optimizer_free(&z->opt);
    z->be->free(z->gshard);
    z->be->free(z->pshard);
    sb_comm_destroy(z->quiet);
    free(z);
}
