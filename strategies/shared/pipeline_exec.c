/* The executor of a pipeline's schedule on one rank: each action of the
 * rank's list (strategies/shared/schedule.h) runs the workload's part ops
 * on activation slots, or receives or sends activations and their
 * gradients over the pp communicators, timed as docs/pipeline.md splits
 * them (a blocking receive is the bubble phase until sb_pp_split_waits moves
 * the part after its sender's post to point-to-point wait). */
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/clock.h"
#include "core/nvtx.h"
#include "strategies/shared/pipeline_exec.h"
#include "strategies/shared/pipeline_plan.h"
#include "strategies/shared/pipeline_stats.h"
#include "strategies/shared/schedule_sim.h"

sb_status sb_pp_test_delay_hook(int stage, int stages, double ms[3])
{
    ms[0] = ms[1] = ms[2] = 0;
    const char *v = getenv("STRATBENCH_TEST_PP_DELAY_MS");
    if (!v || !*v) return SB_OK;
    double x[3] = {-1, -1, -1};
    long only = -1;
    const char *c = v;
    char *end = NULL;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        x[i] = strtod(c, &end);
        ok = end != c && x[i] >= 0 && x[i] <= 60000 && (*end == ':' || (i == 2 && !*end));
        c = end + 1;
    }
    if (ok && *end == ':') {
        only = strtol(c, &end, 10);
        ok = end != c && !*end && only >= 0 && only < stages;
    }
    if (!ok)
        return sb_error(SB_ERR_USAGE, "STRATBENCH_TEST_PP_DELAY_MS: expected F:B:W[:STAGE] with "
                        "F, B, W in 0..60000 ms and STAGE in 0..%d, got '%s'", stages - 1, v);
    if (only < 0 || only == stage)
        for (int i = 0; i < 3; i++) ms[i] = x[i];
    return SB_OK;
}

/* Waits ms milliseconds from now: sleeps to 2 ms before, then yields (a
 * sleep alone wakes late on a loaded machine). The test hook's delay. */
static void test_delay(double ms)
{
    if (ms <= 0) return;
    double deadline = sb_now_s() + 1e-3 * ms, ahead = 1e-3 * ms - 2e-3;
    if (ahead > 0) {
        struct timespec d = {(time_t)ahead, (long)((ahead - (double)(time_t)ahead) * 1e9)};
        while (nanosleep(&d, &d) != 0) {}
    }
    while (sb_now_s() < deadline) sched_yield();
}

/* Completes a send in flight, if req holds one. */
sb_status sb_pp_finish_send(struct sb_comm *comm, struct sb_comm_request *req)
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
        SB_TRY(sb_pp_finish_send(p->act, &c->send_act[c->slot_of[k]]));
    }
    *slot = c->slot_of[k];
    return SB_OK;
}

/* A blocking receive of message a (n floats from pp rank a->peer) into
 * buf, timed as the bubble phase; sb_pp_split_waits moves the part after the
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
    SB_TRY(sb_pp_finish_send(comm, req)); /* never two sends in one request */
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
sb_status sb_pp_split_waits(struct pipeline *p, struct sb_step_result *out)
{
    double moved = 0, drain = 0, span = 0;
    SB_TRY(sb_pp_waits_split(&p->waits, p->grid->pp_comm, &moved, &drain, &span));
    sb_pp_stats_add(&p->stats, SB_PP_STAT_DRAIN, drain);
    sb_pp_stats_add(&p->stats, SB_PP_STAT_SPAN, span);
    out->phase_ms[SB_PHASE_BUBBLE] -= 1e3 * moved;
    out->phase_ms[SB_PHASE_COMM] += 1e3 * moved;
    sb_pp_stats_add(&p->stats, SB_PP_STAT_BUBBLE, -moved);
    sb_pp_stats_add(&p->stats, SB_PP_STAT_P2P, moved);
    return SB_OK;
}

/* Seconds of collectives on the tp communicator so far (its counters; 0
 * without tensor parallelism). */
static double tp_seconds(const struct pipeline *p)
{
    if (p->T <= 1) return 0.0;
    const struct sb_comm_counter *c = p->grid->tp_comm->counters;
    return c[SB_COMM_ALLREDUCE].seconds + c[SB_COMM_ALLGATHER].seconds +
           c[SB_COMM_REDUCE_SCATTER].seconds;
}

/* Runs one compute action a on chunk c: its forward, backward, or zb-h1's
 * B or W (the tp collectives inside them, with --tp, timed as the comm
 * phase; W has none). */

/* Returns slot to chunk c's free list: its micro-batch is done. */
static void release_slot(struct pipeline *p, struct chunk *c, int slot)
{
    c->free_slot[c->n_free++] = slot;
    sb_pp_stats_live(&p->stats, -1);
    c->live--;
}

/* zb-h1's W of micro-batch a->microbatch in slot: its weight gradients,
 * accumulated in the order the W's run (micro-batch order, as single's),
 * the dp sync's ready callback on the step's last; then the slot (its
 * activations and B's kept gradients) is free. Timed as backward, and as
 * the weight half in the stage's stats. */
static sb_status weight_half(struct sb_strategy *s, struct pipeline *p, struct chunk *c,
                             int slot, const struct sb_pp_action *a, struct sb_step_result *out)
{
    struct sb_model *m = c->r->model;
    int final = c->weights == p->M - 1;
    double t0 = sb_now_s();
    sb_nvtx_push(sb_pp_action_label(a, p->V), SB_NVTX_BACKWARD, (uint64_t)a->microbatch);
    sb_status st = m->ops->backward_weight_part(m, slot, c->weights > 0,
                                                final && c->sync ? sb_dp_sync_ready_fn(c->sync)
                                                                 : NULL,
                                                c->sync);
    if (!st) st = s->env->be->check();
    test_delay(p->test_delay_ms[2]);
    sb_nvtx_pop();
    double dt = sb_now_s() - t0;
    out->phase_ms[SB_PHASE_BACKWARD] += 1e3 * dt;
    sb_pp_stats_add(&p->stats, SB_PP_STAT_WEIGHT, dt);
    c->weights++;
    release_slot(p, c, slot);
    return st;
}

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
        double t0 = sb_now_s(), tp0 = tp_seconds(p);
        sb_nvtx_push(sb_pp_action_label(a, p->V), SB_NVTX_FORWARD, (uint64_t)k);
        sb_status st = m->ops->forward_part(m, slot, in, c->r->slot[slot].y, p->mb,
                                            sb_loss_scaler_factor(&c->r->scaler) /
                                                (float)sb_config_global_batch(s->env->cfg),
                                            p->tp_rank == 0 ? c->r->loss_acc
                                                            : p->loss_scratch);
        if (!st && p->T > 1) st = sb_tp_ops_take_error(&p->tp);
        if (!st) st = s->env->be->check();
        test_delay(p->test_delay_ms[0]);
        sb_nvtx_pop();
        double tp = tp_seconds(p) - tp0, dt = sb_now_s() - t0 - tp;
        out->phase_ms[SB_PHASE_FORWARD] += 1e3 * dt;
        out->phase_ms[SB_PHASE_COMM] += 1e3 * tp;
        sb_pp_stats_add(&p->stats, SB_PP_STAT_FORWARD, dt);
        if (c->last && p->tp_rank == 0) out->samples += p->mb; /* a tp group's once */
        return st;
    }
    if (a->op == SB_PP_BACKWARD_WEIGHT) return weight_half(s, p, c, slot, a, out);
    float *din = c->first ? NULL : c->grad_in + (size_t)k * p->mb * c->in_floats;
    int final = c->backwards == p->M - 1, split = a->op == SB_PP_BACKWARD_INPUT;
    double t0 = sb_now_s(), tp0 = tp_seconds(p);
    sb_nvtx_push(sb_pp_action_label(a, p->V), SB_NVTX_BACKWARD, (uint64_t)k);
    const float *dout = c->last ? NULL : c->grad_out;
    sb_status st = split ? m->ops->backward_input_part(m, slot, dout, din)
                         : m->ops->backward_part(m, slot, dout, din, c->backwards > 0,
                                                 final && c->sync ? sb_dp_sync_ready_fn(c->sync)
                                                                  : NULL,
                                                 c->sync);
    if (!st && p->T > 1) st = sb_tp_ops_take_error(&p->tp);
    test_delay(p->test_delay_ms[1]);
    sb_nvtx_pop();
    double tp = tp_seconds(p) - tp0, dt = sb_now_s() - t0 - tp;
    out->phase_ms[SB_PHASE_BACKWARD] += 1e3 * dt;
    out->phase_ms[SB_PHASE_COMM] += 1e3 * tp;
    sb_pp_stats_add(&p->stats, SB_PP_STAT_BACKWARD, dt);
    c->backwards++;
    if (!split) release_slot(p, c, slot); /* its activations are spent */
    return st;
}

/* Runs action a of this rank's list. */
sb_status sb_pp_run_action(struct sb_strategy *s, struct pipeline *p,
                           const struct sb_pp_action *a, const int32_t *mine,
                           struct sb_step_result *out)
{
    struct chunk *c = &p->chunk[a->chunk];
    size_t mb = (size_t)p->mb;
    int slot;
    switch (a->op) {
    case SB_PP_FORWARD:
    case SB_PP_BACKWARD:
    case SB_PP_BACKWARD_INPUT:
    case SB_PP_BACKWARD_WEIGHT:
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
