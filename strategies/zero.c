/* Strategy "zero": sharded data parallelism (ZeRO, Rajbhandari et al., SC
 * 2020; PyTorch FSDP), one MPI rank per replica, launched like ddp.
 *
 * The flat buffers are cut into units, and every unit into n blocks, one
 * per rank (sb_split_range); a rank's shard is its block of every unit,
 * stored contiguously (the shard's optimizer state, and its gradients and
 * parameters where the stage shards them).
 *   stage 1 (ZeroRedundancyOptimizer; DeepSpeed stage 1): units = ddp's
 *     buckets; after backward every bucket is reduce-scattered into the
 *     shard's gradient, the rank steps its blocks of the parameters with
 *     its shard of the optimizer state, and the blocks are all-gathered.
 *   stage 2 (FSDP SHARD_GRAD_OP; DeepSpeed stage 2): the same, but each
 *     bucket's reduce-scatter starts as soon as backward has made it ready
 *     (overlapped, as ddp's buckets) and the bucket's full gradients are
 *     freed once it completes: the rank keeps only its gradient shard.
 *   stage 3 (FSDP FULL_SHARD; DeepSpeed stage 3): units = layers; the
 *     rank keeps only its shard of the parameters; the workload's layer
 *     hook (workloads/workload.h) gathers each layer before its forward
 *     and again before its backward, prefetching the next layer's gather,
 *     frees each gathered layer after use, and backward reduce-scatters
 *     each layer's gradients as they become ready.
 * Communication per rank per step: 2Ψ(n-1)/n floats (stages 1-2: one
 * reduce-scatter and one all-gather of Ψ), 3Ψ(n-1)/n (stage 3: two
 * all-gathers). Derivation and the memory formula: docs/zero.md.
 * "Freed" is the backend's discard (cpu: pages back to the kernel); the
 * workload's flat buffers keep their virtual size. CPU only for now: the
 * GPU communicators have no reduce-scatter or all-gather yet. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/cost_model.h"
#include "core/clock.h"
#include "strategies/shared/buckets.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/replica.h"

/* zero's own flags (cfg->strategy_opts). */
struct zero_opts {
    int stage;        /* --zero-stage 1 | 2 | 3 */
    double bucket_mb; /* --bucket-mb: stages 1-2 bucket size in MiB */
    int overlap;      /* stage 2: reduce-scatter during backward (--no-overlap: 0) */
};
_Static_assert(sizeof(struct zero_opts) <= SB_STRATEGY_OPTS_BYTES, "zero options");

static const struct zero_opts *opts(const struct sb_config *cfg)
{
    return (const struct zero_opts *)(const void *)cfg->strategy_opts;
}

static const struct sb_strategy_option zero_options[] = {
    {"zero-stage", "S", SB_OPTION_INT, offsetof(struct zero_opts, stage), 1, 3, 3, 0,
     "zero_stage", 0, "shard optimizer state (1), + gradients (2), + parameters (3)"},
    {"bucket-mb", "X", SB_OPTION_NUMBER, offsetof(struct zero_opts, bucket_mb), 1e-6, 1e6, 25.0,
     0, "bucket_mb", 0, "gradient bucket size in MiB"},
    {"no-overlap", NULL, SB_OPTION_SWITCH, offsetof(struct zero_opts, overlap), 0, 0, 1, 0,
     "overlap", 1, "all-reduce after backward instead of during it"},
    {0},
};

static const char *const zero_comm_keys[] = {"sent_bytes_per_rank_per_step",
                                             "formula_sent_bytes_per_rank_per_step", NULL};

enum unit_state { UNIT_FREE = 0, UNIT_GATHERING, UNIT_READY };

/* One unit: a bucket (stages 1-2) or a layer (stage 3). */
struct unit {
    size_t off, count;  /* in the flat buffers */
    size_t *counts;     /* (size) block of each rank */
    size_t mine_off;    /* this rank's block: [off + mine_off, + mine) */
    size_t mine;
    size_t soff;        /* where the block lives in the shard buffers */
    size_t pending;     /* floats of the unit not yet ready this step */
    int rs_issued, rs_freed;
    struct sb_comm_request rs, ag;
    enum unit_state state; /* stage 3: its parameters in m->params */
    int gathered_for;      /* stage 3: 0 forward, 1 backward */
};

struct zero {
    struct sb_replica *replica;
    struct sb_comm *comm;  /* training traffic, counted in the report */
    struct sb_comm *quiet; /* evaluation and --save-params gathers (a duplicate) */
    struct sb_comm *gcomm; /* the one stage 3's hook gathers over now */
    int stage, size, rank;
    struct sb_bucket_plan plan;
    int n_units;
    struct unit *u;        /* (n_units) in backward (launch) order: u[0] ends the buffer */
    size_t shard;          /* floats of this rank's shard */
    float *gshard;         /* (shard) reduced gradients; stages 1-2: also the all-gather's send */
    float *pshard;         /* (shard) stage 3: the parameters */
    struct sb_optimizer opt; /* (shard) */
    sb_status cb_status;   /* first error inside a callback */
    int launched;          /* units whose reduce-scatter started this step, in order */
    int backward_phase;    /* stage 3: the hook has seen backward this step */
    int half;              /* --grad-compression fp16|bf16: 16-bit reduce-scatters */
    enum sb_half_format fmt;
    double convert_s;      /* this step's 16-bit conversion seconds (compress phase) */
    /* This step's seconds inside the hooks (on_layer, on_ready) that the
     * model's forward (0) and backward (1) timed as theirs: on collectives
     * (blocked_s; frees and conversions excluded) and on conversions
     * (hook_convert_s, backward only); zero_step moves them to comm_exposed
     * and compress. free_s: the frees' seconds (they stay compute). */
    double blocked_s[2], hook_convert_s, free_s;
    /* (3 n_units) this step's collectives, for the comm phase's union of
     * their spans: n_iv of them, stage 3's gathers as each completes (two
     * a unit), then every unit's reduce-scatter. */
    struct sb_comm_request *iv;
    int n_iv;
};

/* Whether the run reduce-scatters over a 16-bit wire (--grad-compression
 * fp16 or bf16). */
static int half_wire(const struct sb_config *cfg)
{
    return strcmp(cfg->grad_compression, "fp16") == 0 ||
           strcmp(cfg->grad_compression, "bf16") == 0;
}

/* --grad-compression fp16|bf16 compresses the reduce-scatter; PowerSGD
 * and local SGD have no reduce-scatter to compress (refused). */
static sb_status zero_validate(const struct sb_config *cfg)
{
    if (!cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--strategy zero: runs on --device cpu only (its GPU "
                        "path is not written yet; nccl has the reduce-scatter and all-gather)");
    if (strcmp(cfg->grad_compression, "powersgd") == 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression powersgd: not with --strategy zero "
                        "(PowerSGD all-reduces its low-rank factors P and Q, which no rank's "
                        "shard of a reduce-scatter can carry; use fp16 or bf16)");
    if (cfg->local_sgd > 0)
        return sb_error(SB_ERR_USAGE, "--local-sgd: not with --strategy zero (local SGD has no "
                        "per-step gradient sync, and each rank holds only its shard of the "
                        "optimizer state to step with)");
    return SB_OK;
}

static void zero_destroy(struct sb_strategy *s)
{
    struct zero *z = s->impl;
    if (!z) return;
    if (z->replica) z->replica->model->layer_hook = NULL;
    sb_replica_destroy(z->replica);
    for (int i = 0; z->u && i < z->n_units; i++) free(z->u[i].counts);
    free(z->u);
    free(z->iv);
    sb_bucket_plan_free(&z->plan);
    sb_optimizer_free(&z->opt);
    if (s->env && s->env->be) {
        s->env->be->free(z->gshard);
        s->env->be->free(z->pshard);
    }
    sb_comm_destroy(z->quiet);
    sb_comm_destroy(z->comm);
    free(z);
}

/* The unit holding parameter offset `off` (stage 3: a layer's start). */
static struct unit *unit_at(struct zero *z, size_t off)
{
    for (int i = 0; i < z->n_units; i++)
        if (off >= z->u[i].off && off < z->u[i].off + z->u[i].count) return &z->u[i];
    return NULL;
}

/* Frees unit u's gathered parameters; the seconds go to z->free_s. */
static void discard_params(struct zero *z, struct unit *u)
{
    const struct sb_model *m = z->replica->model;
    double t0 = sb_now_s();
    z->replica->env->be->discard(m->params + u->off, u->count * sizeof(float));
    z->free_s += sb_now_s() - t0;
    u->state = UNIT_FREE;
}

/* Stages 2-3: frees unit u's full gradients once its reduce-scatter has
 * completed; the seconds go to z->free_s. */
static void discard_grads(struct zero *z, struct unit *u)
{
    const struct sb_model *m = z->replica->model;
    double t0 = sb_now_s();
    z->replica->env->be->discard(m->grads + u->off, u->count * sizeof(float));
    z->free_s += sb_now_s() - t0;
    u->rs_freed = 1;
}

/* Stage 3: unit u's gather has completed (u->ag.done_s set); a training
 * step's (over z->comm) is kept for the comm phase (z->iv). */
static void gathered(struct zero *z, struct unit *u)
{
    u->state = UNIT_READY;
    if (z->gcomm == z->comm && z->n_iv < 2 * z->n_units) z->iv[z->n_iv++] = u->ag;
}

/* The clocks at a hook's entry (see hook_leave). */
struct hook_mark {
    double t, free_s, convert_s;
};

static struct hook_mark hook_enter(const struct zero *z)
{
    return (struct hook_mark){sb_now_s(), z->free_s, z->convert_s};
}

/* Leaves a hook entered at `at`, run inside the model's forward (backward
 * 0) or backward (1): its seconds less the frees and 16-bit conversions
 * inside it were spent on collectives (issuing, polling, waiting for
 * them: compute waited) and go to z->blocked_s[backward]; the
 * conversions to z->hook_convert_s. */
static void hook_leave(struct zero *z, int backward, struct hook_mark at)
{
    double convert = z->convert_s - at.convert_s;
    double s = sb_now_s() - at.t - (z->free_s - at.free_s) - convert;
    z->blocked_s[backward] += s > 0.0 ? s : 0.0;
    z->hook_convert_s += convert;
}

/* Stage 3: starts gathering unit u's parameters into m->params over
 * z->gcomm, for forward (0) or backward (1). */
static sb_status gather_start(struct zero *z, struct unit *u, int backward)
{
    struct sb_model *m = z->replica->model;
    u->state = UNIT_GATHERING;
    u->gathered_for = backward;
    u->ag.index = (int)(u - z->u);
    return sb_comm_iallgather(z->gcomm, z->pshard + u->soff, m->params + u->off, u->counts,
                              &u->ag);
}

/* Polls every unit in flight (Open MPI progresses non-blocking
 * collectives only inside MPI calls); stages 2-3 free a unit's full
 * gradients once its reduce-scatter has completed. */
static sb_status poll_units(struct zero *z)
{
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
        int done = 0;
        if (u->state == UNIT_GATHERING) SB_TRY(sb_comm_test(z->gcomm, &u->ag, &done));
        if (done) gathered(z, u);
        if (u->rs_issued && !u->rs_freed) {
            SB_TRY(sb_comm_test(z->comm, &u->rs, &done));
            if (done && z->stage >= 2) discard_grads(z, u);
        }
    }
    return SB_OK;
}

/* Stage 3: unit u's layer is about to run in forward (backward 0) or
 * backward (1): gathers it (waiting), prefetches the next, frees what is
 * done with, bounds the reduce-scatters in flight. */
static sb_status layer_begin(struct zero *z, struct unit *u, int backward)
{
    sb_status st = SB_OK;
    int i = (int)(u - z->u); /* forward runs i = n_units-1 .. 0, backward 0 .. n_units-1 */
    if (backward && !z->backward_phase) {
        /* Forward is over: free what it gathered (the last layer too, so
         * that backward gathers every layer again: 3Ψ per step). */
        z->backward_phase = 1;
        for (int k = 0; k < z->n_units && !st; k++) {
            struct unit *w = &z->u[k];
            if (w->state == UNIT_GATHERING) {
                st = sb_comm_wait(z->gcomm, &w->ag);
                gathered(z, w);
            }
            if (w->state == UNIT_READY && w->gathered_for == 0) discard_params(z, w);
        }
    }
    /* The previous layer in this pass's order is done with its parameters:
     * free it first, so that at most two layers (this one and the
     * prefetched next) are gathered at once. */
    int next = backward ? i + 1 : i - 1, prev = backward ? i - 1 : i + 1;
    if (!st && prev >= 0 && prev < z->n_units && z->u[prev].state == UNIT_READY)
        discard_params(z, &z->u[prev]);
    if (!st && u->state == UNIT_FREE) st = gather_start(z, u, backward);
    if (!st && u->state == UNIT_GATHERING) {
        st = sb_comm_wait(z->gcomm, &u->ag);
        gathered(z, u);
    }
    if (!st && next >= 0 && next < z->n_units && z->u[next].state == UNIT_FREE)
        st = gather_start(z, &z->u[next], backward);
    /* Bound the full gradients held: the reduce-scatters of the layers
     * before the previous one must be complete, and their gradients freed
     * (as FSDP limits its in-flight collectives). */
    for (int k = 0; !st && backward && k + 1 < i; k++) {
        struct unit *w = &z->u[k];
        if (!w->rs_issued || w->rs_freed) continue;
        st = sb_comm_wait(z->comm, &w->rs);
        if (!st) discard_grads(z, w);
    }
    if (!st) st = poll_units(z);
    return st;
}

/* Stage 3's layer hook (workloads/workload.h): the layer of `off` is about
 * to run. Its time on collectives is the step's (hook_leave). */
static void on_layer(void *ctx, size_t off, size_t count, int backward)
{
    (void)count;
    struct zero *z = ctx;
    if (z->cb_status) return;
    struct unit *u = unit_at(z, off);
    if (!u) {
        z->cb_status = sb_error(SB_ERR_INTERNAL, "zero: no unit at parameter %zu", off);
        return;
    }
    struct hook_mark at = hook_enter(z);
    z->cb_status = layer_begin(z, u, backward);
    hook_leave(z, backward != 0, at);
}

/* Starts, in unit order, the reduce-scatter of every unit whose
 * gradients are all ready (every rank issues the same sequence). */
static sb_status launch_ready(struct zero *z)
{
    const struct sb_model *m = z->replica->model;
    while (z->launched < z->n_units && z->u[z->launched].pending == 0) {
        struct unit *u = &z->u[z->launched];
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

/* Backward's ready callback (stages 2-3): grads[off, off + count) are
 * final. Its time on collectives (issuing and polling the reduce-scatters;
 * the whole blocking 16-bit one, less its conversions) is the step's
 * (hook_leave). */
static void on_ready(void *ctx, size_t off, size_t count)
{
    struct zero *z = ctx;
    if (z->cb_status) return;
    struct hook_mark at = hook_enter(z);
    size_t lo = off, hi = off + count;
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
        size_t a = lo > u->off ? lo : u->off;
        size_t b = hi < u->off + u->count ? hi : u->off + u->count;
        if (a < b) u->pending -= b - a < u->pending ? b - a : u->pending;
    }
    sb_status st = launch_ready(z);
    if (!st) st = poll_units(z);
    z->cb_status = st;
    hook_leave(z, 1, at);
}

/* Cuts the buffers into units and this rank's shard out of them. */
static sb_status plan_units(struct zero *z, const struct sb_config *cfg)
{
    const struct sb_model *m = z->replica->model;
    /* Stage 3's units are layers: buckets capped below any layer's size. */
    double cap = z->stage == 3 ? SB_BUCKET_CAP_PER_LAYER_MB : opts(cfg)->bucket_mb;
    SB_TRY(sb_bucket_plan_create(m->tensors, m->n_tensors, cap, &z->plan));
    z->n_units = z->plan.n;
    z->u = calloc((size_t)z->n_units, sizeof *z->u);
    z->iv = calloc(3 * (size_t)z->n_units, sizeof *z->iv);
    if (!z->u || !z->iv) return sb_error(SB_ERR_NOMEM, "zero: out of memory");
    z->shard = 0;
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
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

static sb_status zero_init(struct sb_strategy *s)
{
    struct zero *z = calloc(1, sizeof *z);
    if (!z) return sb_error(SB_ERR_NOMEM, "zero: out of memory");
    s->impl = z;
    const struct sb_config *cfg = s->env->cfg;
    const struct sb_backend_ops *be = s->env->be;
    z->stage = opts(cfg)->stage;
    z->half = half_wire(cfg);
    z->fmt = strcmp(cfg->grad_compression, "bf16") == 0 ? SB_HALF_BF16 : SB_HALF_FP16;
    SB_TRY(sb_comm_world_create(cfg, s->env->job, s->env->placement->device[0], &z->comm));
    z->size = z->comm->size;
    z->rank = z->comm->rank;
    /* A duplicate for traffic that is no training step's (every rank). */
    SB_TRY(sb_comm_split(z->comm, 0, z->rank, &z->quiet));
    z->gcomm = z->comm;
    SB_TRY(sb_replica_create(s->env, 0, &z->replica));
    s->replica = z->replica;
    s->comms[s->n_comms++] = z->comm; /* z->quiet is uncounted by design */
    s->world = z->comm;
    struct sb_model *m = z->replica->model;
    SB_TRY(plan_units(z, cfg));
    SB_TRY(be->alloc((void **)&z->gshard, (z->shard ? z->shard : 1) * sizeof(float)));
    SB_TRY(sb_optimizer_init(&z->opt, be, cfg, z->shard));
    SB_TRY(sb_comm_broadcast(z->comm, m->params, m->n_params, 0));
    if (z->stage < 3) return SB_OK;
    /* Stage 3 keeps its blocks of the parameters and frees the rest. */
    SB_TRY(be->alloc((void **)&z->pshard, (z->shard ? z->shard : 1) * sizeof(float)));
    for (int i = 0; i < z->n_units; i++)
        be->copy(z->pshard + z->u[i].soff, m->params + z->u[i].off + z->u[i].mine_off,
                 z->u[i].mine);
    be->discard(m->params, m->n_params * sizeof(float));
    be->discard(m->grads, m->n_params * sizeof(float));
    m->layer_hook = on_layer;
    m->layer_ctx = z;
    return SB_OK;
}

/* Stages 1-2 after the reduce-scatters: steps this rank's blocks of the
 * parameters in place, then all-gathers every unit's blocks (sent from
 * the gradient shard, which holds a copy: MPI's all-gather may not read
 * its send buffer inside its receive buffer). */
static sb_status step_and_gather(struct zero *z, struct sb_step_result *out)
{
    const struct sb_backend_ops *be = z->replica->env->be;
    struct sb_model *m = z->replica->model;
    double t0 = sb_now_s();
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
        sb_optimizer_step_part(&z->opt, u->soff, u->mine, m->params + u->off + u->mine_off,
                               z->gshard + u->soff);
    }
    sb_optimizer_end_step(&z->opt);
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
        be->copy(z->gshard + u->soff, m->params + u->off + u->mine_off, u->mine);
    }
    double t1 = sb_now_s();
    out->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (t1 - t0);
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
        u->ag.index = i;
        SB_TRY(sb_comm_iallgather(z->comm, z->gshard + u->soff, m->params + u->off, u->counts,
                                  &u->ag));
    }
    for (int i = 0; i < z->n_units; i++) SB_TRY(sb_comm_wait(z->comm, &z->u[i].ag));
    double ms = 1e3 * (sb_now_s() - t1);
    out->phase_ms[SB_PHASE_COMM] += ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += ms;
    return be->check();
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
 * all-gathers after the optimizer are step_and_gather's. */
static void step_phases(struct zero *z, double t_backward_end, struct sb_step_result *out)
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

static sb_status zero_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                           struct sb_step_result *out)
{
    (void)step;
    struct zero *z = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
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
    int overlap = z->stage == 3 || (z->stage == 2 && opts(cfg)->overlap);
    SB_TRY(sb_replica_gradients(z->replica, global_idx + (size_t)z->rank * cfg->batch,
                                cfg->batch, sb_config_global_batch(cfg),
                                overlap ? on_ready : NULL, z, out));
    double t_backward_end = sb_now_s();
    SB_TRY(z->cb_status);
    /* Reduce-scatters not started during backward (all of them in stage 1). */
    for (int i = 0; i < z->n_units; i++) z->u[i].pending = 0;
    SB_TRY(launch_ready(z));
    for (int i = 0; i < z->n_units; i++) {
        struct unit *u = &z->u[i];
        SB_TRY(sb_comm_wait(z->comm, &u->rs));
        if (z->stage >= 2 && !u->rs_freed) discard_grads(z, u);
    }
    /* The first layer's parameters, still gathered from its backward. */
    for (int i = 0; z->stage == 3 && i < z->n_units; i++)
        if (z->u[i].state != UNIT_FREE) {
            if (z->u[i].state == UNIT_GATHERING) {
                SB_TRY(sb_comm_wait(z->comm, &z->u[i].ag));
                gathered(z, &z->u[i]);
            }
            discard_params(z, &z->u[i]);
        }
    step_phases(z, t_backward_end, out);
    if (z->stage < 3) return step_and_gather(z, out);
    double t0 = sb_now_s();
    sb_optimizer_step(&z->opt, z->pshard, z->gshard);
    out->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (sb_now_s() - t0);
    return s->env->be->check();
}

/* Replicas agree (stages 1-2 hold all parameters): each rank scores a
 * slice of the test set, in the same number of forward passes on every
 * rank (stage 3's hook gathers layers in each, over the quiet
 * communicator, so every rank must run as many). */
static sb_status zero_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct zero *z = s->impl;
    int n = s->env->data->test.n, first, count, most_first, most;
    int eb = s->env->cfg->eval_batch;
    sb_split_range(n, z->size, z->rank, &first, &count);
    sb_split_range(n, z->size, 0, &most_first, &most);
    int passes = (most + eb - 1) / eb;
    long correct = 0;
    sb_status st = SB_OK;
    z->gcomm = z->quiet;
    z->backward_phase = 0;
    for (int p = 0; p < passes && !st; p++) {
        int pf, pc;
        long c = 0;
        sb_split_range(count, passes, p, &pf, &pc);
        z->cb_status = SB_OK;
        st = sb_replica_evaluate(z->replica, first + pf, pc, &c);
        if (!st) st = z->cb_status;
        for (int i = 0; !st && z->stage == 3 && i < z->n_units; i++)
            if (z->u[i].state != UNIT_FREE) {
                if (z->u[i].state == UNIT_GATHERING) st = sb_comm_wait(z->quiet, &z->u[i].ag);
                discard_params(z, &z->u[i]);
            }
        correct += c;
    }
    z->gcomm = z->comm;
    SB_TRY(st);
    double total = (double)correct;
    SB_TRY(sb_comm_allreduce_f64(z->comm, &total, 1));
    *accuracy = total / n;
    return SB_OK;
}

/* Stage 3: gathers every unit into m->params over the quiet
 * communicator (collective), copies them out on rank 0, and frees them. */
static sb_status zero_read_params(struct sb_strategy *s, float *host)
{
    struct zero *z = s->impl;
    struct sb_model *m = z->replica->model;
    if (z->stage == 3) {
        for (int i = 0; i < z->n_units; i++) {
            struct unit *u = &z->u[i];
            SB_TRY(sb_comm_iallgather(z->quiet, z->pshard + u->soff, m->params + u->off,
                                      u->counts, &u->ag));
            SB_TRY(sb_comm_wait(z->quiet, &u->ag));
        }
    }
    sb_status st = s->env->be->download(host, m->params, m->n_params * sizeof(float));
    for (int i = 0; z->stage == 3 && i < z->n_units; i++) discard_params(z, &z->u[i]);
    return st;
}

/* Stages 1-2: every rank holds all parameters, identical after the
 * all-gather; stage 3: none holds them all (nothing to compare). */
static float *zero_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct zero *z = s->impl;
    *n = z->stage == 3 ? 0 : 1;
    return i < *n ? z->replica->model->params : NULL;
}

/* ZeRO's accounting for fp32 (docs/zero.md): parameters 4Ψ, gradients
 * 4Ψ, optimizer state 4sΨ; stage 1 divides the optimizer state by n,
 * stage 2 also the gradients, stage 3 also the parameters. */
static void zero_model_state_formula(const struct sb_config *cfg, double n_params, int server,
                                     struct sb_model_state *out)
{
    (void)server;
    int stage = opts(cfg)->stage;
    double n = cfg->replicas, p = 4.0 * n_params;
    out->param_bytes = stage >= 3 ? p / n : p;
    out->grad_bytes = stage >= 2 ? p / n : p;
    out->optimizer_bytes = sb_optimizer_state_floats(cfg) * p / n;
}

/* Bytes per rank per step that the formula says the collectives send:
 * (stage 3 ? 3 : 2) Ψ (n-1)/n floats (docs/zero.md), the reduce-scatter's
 * Ψ at 2 bytes a value under --grad-compression fp16|bf16. */
static double formula_sent_bytes(const struct zero *z, double n_params)
{
    double n = z->size, gathers = z->stage == 3 ? 2.0 : 1.0;
    return ((z->half ? 2.0 : 4.0) + gathers * 4.0) * n_params * (n - 1.0) / n;
}

/* What it allocated: stage 1 full parameters and gradients plus the
 * reduce-scatter's shard; stage 2 full parameters and the gradient shard;
 * stage 3 the shards only. Communication buffers: stage 1 the
 * reduce-scatter's receive shard; stage 2 the largest bucket's full
 * gradients (resident until its reduce-scatter completes); stage 3 the
 * two largest gathered layers (current and prefetched) and one layer's
 * full gradients. The workload's flat buffers are larger in address
 * space only (freed pages are not resident). */
static int zero_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    const struct zero *z = s->impl;
    if (cap < 1) return 0;
    const struct sb_model *m = z->replica->model;
    sb_memory_entry_of_replica(s, z->replica, z->rank, out);
    double shard = (double)z->shard * sizeof(float);
    double big[2] = {0, 0};
    for (int i = 0; i < z->n_units; i++) {
        double b = (double)z->u[i].count * sizeof(float);
        if (b > big[0]) {
            big[1] = big[0];
            big[0] = b;
        } else if (b > big[1]) {
            big[1] = b;
        }
    }
    out->held.param_bytes = z->stage >= 3 ? shard : (double)m->n_params * sizeof(float);
    out->held.grad_bytes = z->stage >= 2 ? shard : (double)m->n_params * sizeof(float);
    out->held.optimizer_bytes = (double)sb_optimizer_state_bytes(&z->opt);
    out->comm_bytes = z->stage == 1 ? shard : z->stage == 2 ? big[0] : big[0] + big[1] + big[0];
    return 1;
}

/* The stage, units, and the bytes per rank per step: sent as counted
 * (every reduce-scatter and all-gather call counts its whole buffer, as
 * nccl-tests does; a rank sends (n-1)/n of it) beside the formula's. */
static void zero_describe(const struct sb_strategy *s, long measured_steps,
                          struct sb_strategy_details *d)
{
    const struct zero *z = s->impl;
    const struct sb_comm_counter *k = z->comm->counters;
    double n = z->size;
    double counted = k[SB_COMM_REDUCE_SCATTER].bytes + k[SB_COMM_ALLGATHER].bytes;
    sb_details_set_value(d, 1, "sent_bytes_per_rank_per_step",
                         measured_steps > 0 ? counted * (n - 1.0) / n / (double)measured_steps
                                            : NAN,
                         0);
    sb_details_set_value(d, 1, "formula_sent_bytes_per_rank_per_step",
                         formula_sent_bytes(z, (double)z->replica->model->n_params), 0);
    double v = z->stage;
    sb_details_add(d, "zero_stage", 0, &v, 1);
    v = z->n_units;
    sb_details_add(d, "units", 0, &v, 1);
    v = (double)z->shard;
    sb_details_add(d, "shard_params", 0, &v, 1);
}

/* One row of the α–β model: `stage`'s collectives as the mpi communicator
 * runs them (src/comm/cost_model.h): a reduce-scatter and one all-gather
 * (stages 1-2) or two (stage 3), each stratbench's ring of n-1 steps over
 * M in u units in flight together (stage 3 prefetches the next layer's
 * gather and reduce-scatters each layer as backward makes it; stages 1-2
 * start every unit's all-gather at once): α for each ring step and once
 * more for each unit after the first, every byte once
 * (sb_cost_reduce_scatter_s): (1 + g)((n-2+u)α + (n-1)M/(nB)), g the
 * gathers. A run with --grad-compression fp16/bf16 (q->cfg)
 * reduce-scatters 2-byte words: its reduce-scatter moves M/2 (the
 * conversions are the compress phase, not comm); the gathers stay fp32.
 * Overlap (stage 2's reduce-scatters during
 * backward, stage 3's prefetch behind compute) is not modelled: exposed =
 * comm (NaN). The report compares comm_s with the measured comm phase
 * (measured_comm_ms): the union of the step's reduce-scatter and
 * all-gather spans, stage 3's gathers in forward and backward included
 * (step_phases). */
static void model_row(const struct sb_comm_model_query *q, int stage, int units,
                      struct sb_comm_model_row *row)
{
    static const char *const variants[] = {"", "stage-1", "stage-2", "stage-3"};
    static const char *const formulas[2][2] = {
        {"2((n-2+u) alpha + (n-1)M/(n B))", "3((n-2+u) alpha + (n-1)M/(n B))"},
        {"(n-2+u) alpha + (n-1)M/(2n B) + (n-2+u) alpha + (n-1)M/(n B)",
         "(n-2+u) alpha + (n-1)M/(2n B) + 2((n-2+u) alpha + (n-1)M/(n B))"}};
    int n = q->replicas, gathers = stage == 3 ? 2 : 1;
    int half = q->cfg && half_wire(q->cfg);
    double comm = sb_cost_reduce_scatter_s(&q->link, n, half ? q->bytes / 2 : q->bytes, units) +
                  gathers * sb_cost_allgather_s(&q->link, n, q->bytes, units);
    *row = (struct sb_comm_model_row){
        .variant = variants[stage],
        .formula_name = gathers == 2 ? "zero-3" : "zero-2",
        .formula = formulas[half][gathers - 1],
        .comm_s = comm,
        .exposed_s = NAN,
    };
    snprintf(row->legend, sizeof row->legend,
             "zero reduce-scatter%s and all-gather (rings) (n-2+u)a + (n-1)M/(nB) each, "
             "the all-gather x2 in stage 3; u = %d unit%s in flight together; no overlap;",
             half ? " (16-bit: M/2)" : "", units, units == 1 ? "" : "s");
}

/* The run: its stage and units (describe's "units"); predict: stages 1
 * and 2 with the measured run's buckets (or M in 25 MiB buckets) as units,
 * stage 3 with the model's layers (q->layers, as the run's hook gathers
 * them; the buckets when predict could not build the model). */
static int zero_comm_model(const struct sb_comm_model_query *q, struct sb_comm_model_row *rows,
                           int cap)
{
    int units = 0;
    if (q->cfg) {
        for (int i = 0; q->details && i < q->details->n && i < SB_DETAILS_MAX; i++)
            if (strcmp(q->details->item[i].key, "units") == 0 && q->details->item[i].count > 0)
                units = (int)q->details->item[i].values[0];
        if (cap < 1) return 0;
        model_row(q, opts(q->cfg)->stage, units > 0 ? units : 1, &rows[0]);
        return 1;
    }
    units = q->bucket_bytes && q->n_buckets > 0
                ? q->n_buckets
                : (int)ceil(q->bytes / (zero_options[1].def * 1048576.0));
    if (units < 1) units = 1;
    int k = 0;
    for (int stage = 1; stage <= 3 && k < cap; stage++)
        model_row(q, stage, stage == 3 && q->layers > 0 ? q->layers : units, &rows[k++]);
    return k;
}

const struct sb_strategy_ops sb_strategy_zero = {
    .name = "zero",
    .summary = "one MPI rank per replica, optimizer state (1), gradients (2) and parameters "
               "(3) sharded (ZeRO, FSDP)",
    .uses_mpi = 1,
    .options = zero_options,
    .options_size = sizeof(struct zero_opts),
    .comm_keys = zero_comm_keys,
    .grad_sync = 1, /* fp16/bf16 only (zero_validate): the reduce-scatter's wire */
    .validate = zero_validate,
    .init = zero_init,
    .step = zero_step,
    .evaluate = zero_evaluate,
    .read_params = zero_read_params,
    .describe = zero_describe,
    .comm_model = zero_comm_model,
    .replica_params = zero_replica_params,
    .model_state_formula = zero_model_state_formula,
    .memory = zero_memory,
    .destroy = zero_destroy,
};
