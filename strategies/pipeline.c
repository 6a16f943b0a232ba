/* Strategy "pipeline": pipeline parallelism. The model's layers are cut
 * into P stages (--stages), one MPI rank each (interleaved: V chunks per
 * rank, --chunks), and each step's batch into M micro-batches
 * (--microbatches) that stream through the stages in the order of a
 * schedule (--schedule gpipe | 1f1b | interleaved): each rank walks its
 * list of actions from strategies/shared/schedule.h, running the
 * workload's part ops on activation slots and sending activations forward
 * and their gradients backward over the grid's pp communicator. With
 * --replicas D the pipeline is replicated D times (D*P ranks, Megatron-LM's
 * rank order: comm/grid.h) and each stage's gradients are all-reduced over
 * the grid's dp communicator with strategies/shared/dp_sync.h.
 *
 * Every stage accumulates its micro-batches' gradients in micro-batch
 * order (every schedule here runs a chunk's backwards in that order), so
 * with D = 1 the parameters equal `single --microbatches M` byte for byte.
 *
 * Timing (docs/pipeline.md): a blocking receive's wait is split at the
 * moment its sender posted the message (the sender's clock, aligned to rank
 * 0's): before it the stage idled for another stage's compute, the bubble
 * phase; after it, the transfer, point-to-point wait (the comm phase, with
 * issuing sends and completing them at the end of the step). The
 * strategy owns its wait (strategy.h owns_wait): the end-of-step exchange
 * of the stages' timings is the wait phase. zb-h1 is refused: the
 * workloads' backward_part computes input and weight gradients together. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/cost_model.h"
#include "comm/grid.h"
#include "core/clock.h"
#include "core/nvtx.h"
#include "job/gather.h"
#include "strategies/shared/dp_sync.h"
#include "strategies/shared/pipeline_plan.h"
#include "strategies/shared/pipeline_stats.h"
#include "strategies/shared/replica.h"
#include "strategies/shared/schedule.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/shared/schedule_sim.h"

enum { PARTITION_UNIFORM, PARTITION_PARAMS };

/* pipeline's own flags (cfg->strategy_opts). */
struct pipeline_opts {
    int stages;         /* --stages P */
    int microbatches;   /* --microbatches M */
    int schedule;       /* --schedule: enum sb_pp_kind */
    int chunks;         /* --chunks V; 0: not given */
    int partition;      /* --partition uniform | params */
    int print_schedule; /* --print-schedule */
};
_Static_assert(sizeof(struct pipeline_opts) <= SB_STRATEGY_OPTS_BYTES, "pipeline options");

static const struct pipeline_opts *opts(const struct sb_config *cfg)
{
    return (const struct pipeline_opts *)(const void *)cfg->strategy_opts;
}

static const char *const schedule_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", NULL};
static const char *const partition_names[] = {"uniform", "params", NULL};
_Static_assert(SB_PP_GPIPE == 0 && SB_PP_1F1B == 1 && SB_PP_INTERLEAVED == 2 && SB_PP_ZBH1 == 3,
               "schedule_names follows enum sb_pp_kind");

static const struct sb_strategy_option pipeline_options[] = {
    {"stages", "P", SB_OPTION_INT, offsetof(struct pipeline_opts, stages), 1, 1024, 2, 0,
     "stages", 0, "pipeline stages, one rank each (D*P ranks)", NULL},
    {"microbatches", "M", SB_OPTION_INT, offsetof(struct pipeline_opts, microbatches), 1, 4096,
     1, 0, "microbatches", 0, "micro-batches per step (the batch is cut into M)", NULL},
    {"schedule", "S", SB_OPTION_CHOICE, offsetof(struct pipeline_opts, schedule), 0, 0, 1, 0,
     NULL, 0, "gpipe | 1f1b | interleaved | zb-h1 (docs/pipeline.md)", schedule_names},
    {"chunks", "V", SB_OPTION_INT, offsetof(struct pipeline_opts, chunks), 1, 64, 0, 0,
     "chunks", 0, "model chunks per stage (interleaved only; default 2)", NULL},
    {"partition", "H", SB_OPTION_CHOICE, offsetof(struct pipeline_opts, partition), 0, 0, 0, 0,
     NULL, 0, "uniform (layers) | params (balance parameters)", partition_names},
    {"print-schedule", NULL, SB_OPTION_SWITCH, offsetof(struct pipeline_opts, print_schedule),
     0, 0, 0, 1, NULL, 0, "print the rank x slot grid before the run", NULL},
    {0},
};

/* One model chunk of this rank: virtual stage `vstage` of the pipeline. */
struct chunk {
    struct sb_replica *r; /* the part (its layers), its optimizer, batch slots */
    struct sb_dp_sync *sync; /* its gradients over the dp communicator (D > 1) */
    int vstage, first_layer, n_layers;
    size_t in_floats, out_floats; /* per sample at its input and output */
    int first, last;              /* holds the model's first / last layer */
    int *slot_of;                 /* (M) micro-batch -> activation slot, -1 */
    int *free_slot, n_free;       /* the slots not holding a micro-batch */
    float *act_in;   /* (slots, mb, in_floats) received input activations */
    float *grad_in;  /* (M, mb, in_floats) input gradients, sent back: one per micro-batch,
                      * so that no backward waits for an earlier send to be received */
    float *grad_out; /* (mb, out_floats) the received output gradient */
    struct sb_comm_request *send_act, *send_grad; /* (slots), (M): sends in flight */
    int backwards;   /* backwards of this step so far */
    int live, peak;  /* slots holding a micro-batch now, and the step's most */
    double per_slot, scratch; /* the workload's activation bytes per slot and besides */
};

struct pipeline {
    struct sb_grid *grid;
    struct sb_comm *world, *act, *grad, *gather; /* act/grad: the pp axis per direction */
    struct sb_pp_schedule sched;
    int P, M, V, D, stage, mb;
    struct chunk *chunk; /* (V) */
    int *layer_first;    /* (P*V + 1) virtual stage -> its first layer */
    struct sb_replica *whole; /* world rank 0: the whole model (evaluation, read_params) */
    struct sb_pp_stats stats; /* per stage, summed since the end of warm-up */
    size_t whole_n_params;
    struct sb_pp_waits waits; /* each receive's wait, split at its sender's post */
    double comm_bytes; /* the receive and send buffers of every chunk */
};

/* Validates the flags against the model (its layers, whether it has part
 * ops) and fills *shape. Builds the whole model once to learn its layers. */
static sb_status check_shape(const struct sb_config *cfg, struct sb_pp_shape *shape,
                             int *n_layers)
{
    const struct pipeline_opts *o = opts(cfg);
    const struct sb_workload_ops *w = sb_workload_find(cfg->workload);
    if (!w) return sb_error(SB_ERR_USAGE, "--workload: unknown '%s'", cfg->workload);
    if (!w->create_part || !w->forward_part || !w->backward_part)
        return sb_error(SB_ERR_USAGE, "--workload: %s has no part ops, so --strategy pipeline "
                        "cannot cut it into stages", w->name);
    if (!cfg->backend->host_memory)
        return sb_error(SB_ERR_USAGE, "--strategy pipeline: runs on --device cpu only (the "
                        "replica's device path has no split passes yet)");
    struct sb_model *m = NULL;
    SB_TRY(w->create(cfg, cfg->backend, 1, &m));
    *n_layers = m->n_layers;
    m->ops->destroy(m);
    SB_TRY(sb_pp_validate((enum sb_pp_kind)o->schedule, o->stages, o->microbatches, o->chunks,
                          *n_layers, 0 /* backward_part computes both halves at once */,
                          shape));
    if (cfg->batch % o->microbatches)
        return sb_error(SB_ERR_USAGE, "--microbatches: the batch of %d samples does not cut "
                        "into %d equal micro-batches", cfg->batch, o->microbatches);
    if (2L * o->microbatches * (o->stages * shape->chunks - 1) > 32768)
        return sb_error(SB_ERR_USAGE, "--microbatches: %d micro-batches over %d stages are "
                        "more messages per step than MPI's tags number", o->microbatches,
                        o->stages * shape->chunks);
    if (cfg->grad_compression[0] && strcmp(cfg->grad_compression, "none") != 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression: not with --strategy pipeline");
    if (cfg->local_sgd > 0)
        return sb_error(SB_ERR_USAGE, "--local-sgd: not with --strategy pipeline");
    return SB_OK;
}

static sb_status pipeline_validate(const struct sb_config *cfg)
{
    struct sb_pp_shape shape;
    int n_layers;
    return check_shape(cfg, &shape, &n_layers);
}

static int pipeline_world_size(const struct sb_config *cfg)
{
    return cfg->replicas * opts(cfg)->stages;
}

static int pipeline_replicas_of_world(const struct sb_config *cfg, int world)
{
    int p = opts(cfg)->stages;
    return p > 0 && world % p == 0 ? world / p : 0;
}

/* Allocates chunk c's slots, buffers and requests for n_slots
 * micro-batches in flight. */
static sb_status chunk_buffers(struct pipeline *p, struct chunk *c, int n_slots)
{
    const struct sb_backend_ops *be = c->r->env->be;
    size_t mb = (size_t)p->mb;
    c->slot_of = malloc((size_t)p->M * sizeof *c->slot_of);
    c->free_slot = malloc((size_t)n_slots * sizeof *c->free_slot);
    c->send_act = calloc((size_t)n_slots, sizeof *c->send_act);
    c->send_grad = calloc((size_t)p->M, sizeof *c->send_grad);
    if (!c->slot_of || !c->free_slot || !c->send_act || !c->send_grad)
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    if (!c->first) {
        SB_TRY(be->alloc((void **)&c->act_in, n_slots * mb * c->in_floats * sizeof(float)));
        SB_TRY(be->alloc((void **)&c->grad_in,
                         (size_t)p->M * mb * c->in_floats * sizeof(float)));
    }
    if (!c->last) SB_TRY(be->alloc((void **)&c->grad_out, mb * c->out_floats * sizeof(float)));
    return SB_OK;
}

static void pipeline_destroy(struct sb_strategy *s)
{
    struct pipeline *p = s->impl;
    if (!p) return;
    const struct sb_backend_ops *be = s->env->be;
    for (int v = 0; p->chunk && v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        sb_dp_sync_destroy(c->sync);
        be->free(c->act_in);
        be->free(c->grad_in);
        be->free(c->grad_out);
        free(c->slot_of);
        free(c->free_slot);
        free(c->send_act);
        free(c->send_grad);
        sb_replica_destroy(c->r);
    }
    free(p->chunk);
    free(p->layer_first);
    sb_replica_destroy(p->whole);
    sb_pp_schedule_free(&p->sched);
    sb_pp_waits_free(&p->waits);
    sb_pp_stats_free(&p->stats);
    sb_comm_destroy(p->gather);
    sb_comm_destroy(p->grad);
    sb_comm_destroy(p->act);
    sb_grid_destroy(p->grid);
    sb_comm_destroy(p->world);
    free(p);
}

/* The workload's activation bytes per slot and of its scratch for chunk
 * c's `part` (built with 1 and with 2 slots, then freed). */
static sb_status probe_slot_bytes(struct sb_strategy *s, struct pipeline *p,
                                  const struct sb_part *part, struct chunk *c)
{
    double bytes[2];
    for (int k = 0; k < 2; k++) {
        struct sb_part one = *part;
        one.slots = k + 1;
        struct sb_model *m = NULL;
        SB_TRY(s->env->workload->create_part(s->env->cfg, s->env->be, p->mb, &one, &m));
        bytes[k] = (double)m->activation_bytes;
        m->ops->destroy(m);
    }
    c->per_slot = bytes[1] - bytes[0];
    c->scratch = 2 * bytes[0] - bytes[1];
    return SB_OK;
}

/* Builds this rank's chunks: virtual stages stage, stage + P, ... */
static sb_status make_chunks(struct sb_strategy *s, struct pipeline *p, const int *slots)
{
    const struct sb_config *cfg = s->env->cfg;
    long steps = (long)cfg->epochs * (s->env->data->train.n / sb_config_global_batch(cfg));
    if (cfg->max_steps && cfg->max_steps < steps) steps = cfg->max_steps;
    if (!(p->chunk = calloc((size_t)p->V, sizeof *p->chunk)))
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        c->vstage = v * p->P + p->stage;
        c->first_layer = p->layer_first[c->vstage];
        c->n_layers = p->layer_first[c->vstage + 1] - c->first_layer;
        c->first = c->vstage == 0;
        c->last = c->vstage == p->P * p->V - 1;
        struct sb_part part = {c->first_layer, c->n_layers, 0, 1, slots[v], 0};
        SB_TRY(sb_replica_create_part(s->env, 1, &part, p->mb, &c->r));
        struct sb_model *m = c->r->model;
        c->in_floats = m->layers[0].in_floats;
        c->out_floats = m->layers[m->n_layers - 1].out_floats;
        SB_TRY(chunk_buffers(p, c, slots[v]));
        SB_TRY(probe_slot_bytes(s, p, &part, c));
        p->comm_bytes += (double)((c->first ? 0 : (size_t)slots[v] + (size_t)p->M) * p->mb *
                                  c->in_floats + (c->last ? 0 : (size_t)p->mb * c->out_floats)) *
                         sizeof(float);
        if (p->D > 1) {
            struct sb_dp_sync_cfg sc = {.bucket_mb = 25.0, .overlap = 1,
                                        .host_memory = s->env->be->host_memory,
                                        .last_step = steps - 1};
            SB_TRY(sb_dp_sync_create(p->grid->dp_comm, m, sb_grad_range_whole(m), &sc,
                                     &c->sync));
        }
    }
    s->replica = p->chunk[0].r;
    return SB_OK;
}

static sb_status pipeline_init(struct sb_strategy *s)
{
    struct pipeline *p = calloc(1, sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    s->impl = p;
    const struct sb_config *cfg = s->env->cfg;
    struct sb_pp_shape shape;
    int n_layers;
    SB_TRY(check_shape(cfg, &shape, &n_layers));
    p->P = shape.stages;
    p->M = shape.microbatches;
    p->V = shape.chunks;
    p->D = cfg->replicas;
    p->mb = cfg->batch / p->M;
    SB_TRY(sb_comm_world_create(cfg, s->env->job, s->env->placement->device[0], &p->world));
    p->world->role = SB_COMM_ROLE_WORLD;
    SB_TRY(sb_grid_create(p->world, p->D, 1, p->P, SB_RANK_ORDER_TP_DP_PP, &p->grid));
    p->stage = p->grid->me.pp_rank;
    /* One communicator per direction of the pp axis, so that activations
     * and gradients between one pair of ranks never match each other. */
    SB_TRY(sb_comm_split(p->grid->pp_comm, 0, p->stage, &p->act));
    SB_TRY(sb_comm_split(p->grid->pp_comm, 0, p->stage, &p->grad));
    SB_TRY(sb_comm_split(p->grid->pp_comm, 0, p->stage, &p->gather)); /* not counted */
    p->act->role = p->grad->role = SB_COMM_ROLE_PP;
    SB_TRY(sb_pp_schedule_build(&shape, &p->sched));
    SB_TRY(sb_pp_check(&p->sched));
    /* Send and receive times compare across ranks (and hosts) on rank 0's
     * clock (Cristian's method, as the trace aligns its ranks). */
    double offset = 0, err;
    if (s->env->job) SB_TRY(sb_job_clock_offset(s->env->job, 8, &offset, &err));
    SB_TRY(sb_pp_waits_init(&p->waits, sb_pp_message_count(&shape), offset));
    SB_TRY(sb_pp_check_message_order(&p->sched));
    if (opts(cfg)->print_schedule && p->world->rank == 0) SB_TRY(sb_pp_print_grid(&p->sched, stdout));
    /* The whole model (its layer table cuts the stages; world rank 0 keeps
     * it to evaluate and to gather the parameters into). */
    SB_TRY(sb_replica_create(s->env, 0, &p->whole));
    struct sb_model *whole = p->whole->model;
    if (!(p->layer_first = malloc((size_t)(p->P * p->V + 1) * sizeof *p->layer_first)))
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    p->whole_n_params = whole->n_params;
    sb_pp_partition(whole, p->P * p->V, opts(cfg)->partition == PARTITION_PARAMS, p->layer_first);
    /* Activation slots: each chunk's most micro-batches in flight in this
     * rank's list (a forward takes one, a backward frees it); all chunks
     * together, the schedule's live-activation formula. */
    int slots[64];
    if (p->V > 64) return sb_error(SB_ERR_USAGE, "--chunks: at most 64");
    sb_pp_chunk_slots(&p->sched, p->stage, slots);
    SB_TRY(make_chunks(s, p, slots));
    size_t boundary[64 * 64];
    if (p->P * p->V - 1 > (int)(sizeof boundary / sizeof boundary[0]))
        return sb_error(SB_ERR_USAGE, "--stages: at most %d virtual stages",
                        (int)(sizeof boundary / sizeof boundary[0]));
    for (int b = 0; b < p->P * p->V - 1; b++)
        boundary[b] = whole->layers[p->layer_first[b + 1] - 1].out_floats;
    SB_TRY(sb_pp_stats_init(&p->stats, &shape, p->stage, p->mb, boundary));
    if (p->world->rank != 0) { /* only rank 0 evaluates */
        sb_replica_destroy(p->whole);
        p->whole = NULL;
    }
    s->comms[s->n_comms++] = p->act;
    s->comms[s->n_comms++] = p->grad;
    s->comms[s->n_comms++] = p->grid->dp_comm;
    s->world = p->world;
    /* Every chunk starts from the whole model's initial values (the
     * workload's init, the same on every rank): nothing to broadcast. */
    return SB_OK;
}

/* Completes a send in flight, if req holds one. */
static sb_status finish(struct sb_comm *comm, struct sb_comm_request *req)
{
    return req->impl && !req->done ? sb_comm_wait(comm, req) : SB_OK;
}

/* The slot of micro-batch k on chunk c, taking a free one at its first
 * use. Errors: SB_ERR_INTERNAL when more micro-batches are in flight than
 * the schedule's formula gave slots for. */
static sb_status take_slot(struct pipeline *p, struct chunk *c, int k, int *slot)
{
    if (c->slot_of[k] < 0) {
        if (c->n_free == 0)
            return sb_error(SB_ERR_INTERNAL, "pipeline: stage %d chunk %d: micro-batch %d finds "
                            "no free activation slot (more in flight than the schedule's "
                            "formula)", p->stage, c->vstage / p->P, k);
        c->slot_of[k] = c->free_slot[--c->n_free];
        sb_pp_stats_live(&p->stats, +1);
        if (++c->live > c->peak) c->peak = c->live;
        /* The slot's output may still be in a send of its last micro-batch
         * (never in practice: that micro-batch's backward needed the
         * gradient of what the next stage received). */
        SB_TRY(finish(p->act, &c->send_act[c->slot_of[k]]));
    }
    *slot = c->slot_of[k];
    return SB_OK;
}

/* A blocking receive of message a (n floats from pp rank a->peer) into
 * buf, timed as the bubble phase; split_waits moves the part after the
 * sender posted it to point-to-point wait at the end of the step. */
static sb_status receive(struct pipeline *p, struct sb_comm *comm, float *buf, size_t n,
                         const struct sb_pp_action *a, struct sb_step_result *out)
{
    struct sb_comm_request req = {0};
    int id = sb_pp_message_id(&p->sched.shape, a);
    double t0 = sb_replica_bubble_begin();
    sb_status st = sb_comm_irecv(comm, buf, n, a->peer, SB_COMM_SENDRECV, &req);
    if (!st) st = sb_comm_wait(comm, &req);
    sb_replica_bubble_end(t0, out);
    double t1 = sb_now_s();
    sb_pp_stats_add(&p->stats, SB_PP_STAT_BUBBLE, t1 - t0);
    sb_pp_waits_received(&p->waits, id, t0, t1);
    return st;
}

/* A non-blocking send of message a, its issue timed as p2p. */
static sb_status send(struct pipeline *p, struct sb_comm *comm, const float *buf, size_t n,
                      const struct sb_pp_action *a, struct sb_comm_request *req)
{
    double t0 = sb_now_s();
    SB_TRY(finish(comm, req)); /* never two sends in one request */
    *req = (struct sb_comm_request){0};
    sb_pp_waits_sent(&p->waits, sb_pp_message_id(&p->sched.shape, a), sb_now_s());
    sb_status st = sb_comm_isend(comm, buf, n, a->peer, SB_COMM_SENDRECV, req);
    sb_pp_stats_add(&p->stats, SB_PP_STAT_P2P, sb_now_s() - t0);
    return st;
}

/* Splits each receive's wait of this step at the moment its sender posted
 * the message (the senders' times summed over the pp communicator: each
 * message has one sender): before it the stage idled for another stage's
 * compute (bubble), after it for the transfer (point-to-point wait, moved
 * to the comm phase). Collective over the pp communicator. */
static sb_status split_waits(struct pipeline *p, struct sb_step_result *out)
{
    double moved = 0;
    SB_TRY(sb_pp_waits_split(&p->waits, p->grid->pp_comm, &moved));
    out->phase_ms[SB_PHASE_BUBBLE] -= 1e3 * moved;
    out->phase_ms[SB_PHASE_COMM] += 1e3 * moved;
    sb_pp_stats_add(&p->stats, SB_PP_STAT_BUBBLE, -moved);
    sb_pp_stats_add(&p->stats, SB_PP_STAT_P2P, moved);
    return SB_OK;
}

/* Runs one compute action a on chunk c: its forward or backward. */
static sb_status compute(struct sb_strategy *s, struct pipeline *p, const struct sb_pp_action *a,
                         const int32_t *mine, struct sb_step_result *out)
{
    struct chunk *c = &p->chunk[a->chunk];
    struct sb_model *m = c->r->model;
    int k = a->microbatch, slot;
    SB_TRY(take_slot(p, c, k, &slot));
    if (a->op == SB_PP_FORWARD) {
        if (c->first || c->last) SB_TRY(sb_replica_data(c->r, slot, mine + (size_t)k * p->mb,
                                                        p->mb, out));
        const float *in = c->first ? c->r->slot[slot].x
                                   : c->act_in + (size_t)slot * p->mb * c->in_floats;
        double t0 = sb_now_s();
        sb_nvtx_push(sb_pp_action_label(a, p->V), SB_NVTX_FORWARD, (uint64_t)k);
        sb_status st = m->ops->forward_part(m, slot, in, c->r->slot[slot].y, p->mb,
                                            1.0f / (float)sb_config_global_batch(s->env->cfg),
                                            c->r->loss_acc);
        if (!st) st = s->env->be->check();
        sb_nvtx_pop();
        double dt = sb_now_s() - t0;
        out->phase_ms[SB_PHASE_FORWARD] += 1e3 * dt;
        sb_pp_stats_add(&p->stats, SB_PP_STAT_FORWARD, dt);
        if (c->last) out->samples += p->mb;
        return st;
    }
    float *din = c->first ? NULL : c->grad_in + (size_t)k * p->mb * c->in_floats;
    int final = c->backwards == p->M - 1;
    double t0 = sb_now_s();
    sb_nvtx_push(sb_pp_action_label(a, p->V), SB_NVTX_BACKWARD, (uint64_t)k);
    sb_status st = m->ops->backward_part(m, slot, c->last ? NULL : c->grad_out, din,
                                         c->backwards > 0,
                                         final && c->sync ? sb_dp_sync_ready_fn(c->sync) : NULL,
                                         c->sync);
    sb_nvtx_pop();
    double dt = sb_now_s() - t0;
    out->phase_ms[SB_PHASE_BACKWARD] += 1e3 * dt;
    sb_pp_stats_add(&p->stats, SB_PP_STAT_BACKWARD, dt);
    c->backwards++;
    c->free_slot[c->n_free++] = slot; /* its activations are spent */
    sb_pp_stats_live(&p->stats, -1);
    c->live--;
    return st;
}

/* Runs action a of this rank's list. */
static sb_status run_action(struct sb_strategy *s, struct pipeline *p,
                            const struct sb_pp_action *a, const int32_t *mine,
                            struct sb_step_result *out)
{
    struct chunk *c = &p->chunk[a->chunk];
    size_t mb = (size_t)p->mb;
    int slot;
    switch (a->op) {
    case SB_PP_FORWARD:
    case SB_PP_BACKWARD:
        return compute(s, p, a, mine, out);
    case SB_PP_RECV_ACT:
        SB_TRY(take_slot(p, c, a->microbatch, &slot));
        sb_pp_stats_bytes(&p->stats, mb * c->in_floats * sizeof(float));
        return receive(p, p->act, c->act_in + slot * mb * c->in_floats, mb * c->in_floats, a,
                       out);
    case SB_PP_RECV_GRAD:
        sb_pp_stats_bytes(&p->stats, mb * c->out_floats * sizeof(float));
        return receive(p, p->grad, c->grad_out, mb * c->out_floats, a, out);
    case SB_PP_SEND_ACT:
        slot = c->slot_of[a->microbatch];
        sb_pp_stats_bytes(&p->stats, mb * c->out_floats * sizeof(float));
        return send(p, p->act, c->r->model->ops->part_output(c->r->model, slot),
                    mb * c->out_floats, a, &c->send_act[slot]);
    case SB_PP_SEND_GRAD:
        sb_pp_stats_bytes(&p->stats, mb * c->in_floats * sizeof(float));
        return send(p, p->grad, c->grad_in + (size_t)a->microbatch * mb * c->in_floats,
                    mb * c->in_floats, a, &c->send_grad[a->microbatch]);
    default:
        return sb_error(SB_ERR_INTERNAL, "pipeline: action %s is not run here",
                        sb_pp_op_name(a->op));
    }
}

static sb_status pipeline_step(struct sb_strategy *s, long step, const int32_t *global_idx,
                               struct sb_step_result *out)
{
    struct pipeline *p = s->impl;
    const struct sb_config *cfg = s->env->cfg;
    const int32_t *mine = global_idx + (size_t)p->grid->me.dp_rank * cfg->batch;
    double t_step = sb_now_s();
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        for (int k = 0; k < p->M; k++) c->slot_of[k] = -1;
        c->n_free = c->r->slots;
        for (int i = 0; i < c->n_free; i++) c->free_slot[i] = c->n_free - 1 - i;
        c->backwards = 0;
        c->live = c->peak = 0;
        if (c->sync) (void)sb_dp_sync_begin(c->sync, step);
    }
    const struct sb_pp_action *a = sb_pp_rank_actions(&p->sched, p->stage);
    for (int i = 0; i < sb_pp_rank_count(&p->sched, p->stage); i++)
        SB_TRY(run_action(s, p, &a[i], mine, out));
    double t0 = sb_now_s();
    for (int v = 0; v < p->V; v++) { /* the sends still in flight */
        struct chunk *c = &p->chunk[v];
        for (int k = 0; k < c->r->slots; k++) SB_TRY(finish(p->act, &c->send_act[k]));
        for (int k = 0; k < p->M; k++) SB_TRY(finish(p->grad, &c->send_grad[k]));
    }
    sb_pp_stats_add(&p->stats, SB_PP_STAT_P2P, sb_now_s() - t0);
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        SB_TRY(sb_replica_count_step(c->r, out));
        if (c->sync) SB_TRY(sb_dp_sync_finish(c->sync, out));
        SB_TRY(sb_replica_update(c->r, c->r->model->grads, out));
    }
    /* The activation bytes: the ledger's, and per chunk the workload's
     * scratch plus its bytes per slot times the slots counted alive. */
    for (int v = 0; v < p->V; v++) {
        const struct chunk *c = &p->chunk[v];
        sb_pp_stats_add(&p->stats, SB_PP_STAT_ACT_LEDGER, (double)c->r->model->activation_bytes);
        sb_pp_stats_add(&p->stats, SB_PP_STAT_ACT_SLOTS, c->scratch + c->peak * c->per_slot);
    }
    /* The receives' split and the stages' timings of this step, summed
     * over the world: the wait. */
    double t_wait = sb_now_s();
    SB_TRY(split_waits(p, out));
    sb_status st = sb_pp_stats_end_step(&p->stats, p->world, p->D, t_wait - t_step);
    out->phase_ms[SB_PHASE_WAIT] += 1e3 * (sb_now_s() - t_wait);
    return st;
}

/* Copies every virtual stage's parameters into the whole model on world
 * rank 0 (dp replica 0's stages, over the uncounted gather communicator). */
static sb_status gather_whole(struct sb_strategy *s, struct pipeline *p)
{
    const struct sb_backend_ops *be = s->env->be;
    if (p->grid->me.dp_rank != 0) return SB_OK;
    struct sb_model *whole = p->whole ? p->whole->model : NULL;
    for (int vs = 0; vs < p->P * p->V; vs++) {
        int owner = vs % p->P, v = vs / p->P;
        if (p->stage == 0 && owner == 0) {
            const struct sb_model *m = p->chunk[v].r->model;
            size_t off = whole->layers[p->layer_first[vs]].offset;
            be->copy(whole->params + off, m->params, m->n_params);
        } else if (p->stage == 0) {
            size_t off = whole->layers[p->layer_first[vs]].offset;
            const struct sb_layer_desc *end = &whole->layers[p->layer_first[vs + 1] - 1];
            struct sb_comm_request req = {0};
            SB_TRY(sb_comm_irecv(p->gather, whole->params + off, end->offset + end->count - off,
                                 owner, SB_COMM_SENDRECV, &req));
            SB_TRY(sb_comm_wait(p->gather, &req));
        } else if (owner == p->stage) {
            const struct sb_model *m = p->chunk[v].r->model;
            struct sb_comm_request req = {0};
            SB_TRY(sb_comm_isend(p->gather, m->params, m->n_params, 0, SB_COMM_SENDRECV, &req));
            SB_TRY(sb_comm_wait(p->gather, &req));
        }
    }
    return SB_OK;
}

static sb_status pipeline_evaluate(struct sb_strategy *s, double *accuracy)
{
    struct pipeline *p = s->impl;
    SB_TRY(gather_whole(s, p));
    *accuracy = 0.0;
    if (p->world->rank != 0) return SB_OK;
    sb_pp_stats_print(&p->stats, stdout);
    int n = s->env->data->test.n;
    long hits = 0;
    SB_TRY(sb_replica_evaluate(p->whole, 0, n, &hits));
    *accuracy = (double)hits / n;
    return SB_OK;
}

static sb_status pipeline_read_params(struct sb_strategy *s, float *host)
{
    struct pipeline *p = s->impl;
    SB_TRY(gather_whole(s, p));
    if (p->world->rank != 0) return SB_OK;
    const struct sb_model *whole = p->whole->model;
    return s->env->be->download(host, whole->params, whole->n_params * sizeof(float));
}

/* The whole model's parameter count (every rank built the whole model
 * once at init; rank 0 keeps it). */
static size_t pipeline_model_n_params(const struct sb_strategy *s)
{
    const struct pipeline *p = s->impl;
    return p->whole_n_params;
}

/* This rank's replica buffers: chunk i's parameters (the consistency check
 * compares them within the stage's dp group). */
static float *pipeline_replica_params(struct sb_strategy *s, int i, int *n)
{
    struct pipeline *p = s->impl;
    *n = 1;
    return i == 0 ? p->chunk[0].r->model->params : NULL;
}

/* The ranks that hold the same layers: one stage. */
static int pipeline_consistency_group(const struct sb_strategy *s)
{
    const struct pipeline *p = s->impl;
    return p->stage;
}

/* This rank's ledger: one entry for its stage, every chunk's parameters,
 * gradients, optimizer state and activations, and its point-to-point
 * buffers as communication buffers; the formula is the fp32 accounting
 * for the stage's parameters. */
static int pipeline_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    const struct pipeline *p = s->impl;
    if (cap < 1) return 0;
    sb_memory_entry_of_replica(s, p->chunk[0].r, p->grid->me.dp_rank, out);
    double n = 0, opt = 0, act = 0;
    for (int v = 0; v < p->V; v++) {
        const struct sb_replica *r = p->chunk[v].r;
        n += (double)r->model->n_params;
        opt += (double)sb_optimizer_state_bytes(&r->opt);
        act += (double)r->model->activation_bytes;
    }
    out->held.param_bytes = out->held.grad_bytes = n * sizeof(float);
    out->held.optimizer_bytes = opt;
    out->activation_bytes = act;
    out->comm_bytes = p->comm_bytes;
    /* The formula for the stage's own parameters (the model-state formula
     * op takes the whole model's and divides it evenly). */
    out->formula = (struct sb_model_state){
        4 * n, 4 * n, 4.0 * sb_optimizer_state_floats(s->env->cfg) * n};
    return 1;
}

static void pipeline_reset_counters(struct sb_strategy *s)
{
    struct pipeline *p = s->impl;
    sb_pp_stats_reset(&p->stats);
    for (int v = 0; v < p->V; v++)
        if (p->chunk[v].sync) sb_dp_sync_reset_counters(p->chunk[v].sync);
}

static void pipeline_describe(const struct sb_strategy *s, long measured_steps,
                              struct sb_strategy_details *det)
{
    const struct pipeline *p = s->impl;
    (void)measured_steps;
    double first[64];
    int n = p->P * p->V + 1;
    for (int i = 0; i < n && i < 64; i++) first[i] = p->layer_first[i];
    sb_details_add(det, "pipeline_layer_first", 1, first, n < 64 ? n : 64);
    sb_pp_stats_describe(&p->stats, &p->sched, det);

}

/* The model-state bytes of one stage: the fp32 accounting (parameters,
 * gradients, optimizer state) of Ψ/P parameters, the stages being cut
 * evenly (Rajbhandari et al., SC 2020, section 3.1, applied to a part). */
static void pipeline_model_state_formula(const struct sb_config *cfg, double n_params,
                                         int server, struct sb_model_state *out)
{
    (void)server;
    double psi = n_params / (opts(cfg)->stages > 0 ? opts(cfg)->stages : 1);
    *out = (struct sb_model_state){4 * psi, 4 * psi, 4.0 * sb_optimizer_state_floats(cfg) * psi};
}

const struct sb_strategy_ops sb_strategy_pipeline = {
    .name = "pipeline",
    .summary = "layers cut into --stages ranks, --microbatches streamed by --schedule "
               "(GPipe, 1F1B, interleaved)",
    .uses_mpi = 1,
    .options = pipeline_options,
    .options_size = sizeof(struct pipeline_opts),
    .owns_wait = 1,
    .world_size = pipeline_world_size,
    .replicas_of_world = pipeline_replicas_of_world,
    .validate = pipeline_validate,
    .init = pipeline_init,
    .step = pipeline_step,
    .evaluate = pipeline_evaluate,
    .read_params = pipeline_read_params,
    .model_n_params = pipeline_model_n_params,
    .replica_params = pipeline_replica_params,
    .consistency_group = pipeline_consistency_group,
    .reset_counters = pipeline_reset_counters,
    .describe = pipeline_describe,
    .memory = pipeline_memory,
    .comm_model = sb_pp_predict_rows,
    .model_state_formula = pipeline_model_state_formula,
    .destroy = pipeline_destroy,
};
