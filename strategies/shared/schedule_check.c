/* sb_pp_check (schedule.h): runs every rank's list against the executor's
 * communication semantics (non-blocking sends, blocking receives, a message
 * matched by direction, micro-batch and virtual stage) and proves that all
 * of them reach their end, that every message sent is received, and that
 * each rank's compute respects the dependencies of a pipeline. */
#include "strategies/shared/schedule.h"

#include <stdio.h>
#include <stdlib.h>

/* Compute state of one (micro-batch, chunk) on its rank. */
enum { NOT_RUN, FORWARDED, INPUT_GRAD_DONE, DONE };

struct checker {
    const struct sb_pp_schedule *s;
    int p, m, v, last;     /* stages, micro-batches, chunks, last virtual stage */
    int *sent;             /* (2, M, P*V-1): global index + 1 of the send, 0 if not yet */
    unsigned char *got;    /* (2, M, P*V-1): received */
    unsigned char *state;  /* (P, M, V) */
    int *pos;              /* (P): next action of each rank */
};

/* One line naming rank, action index and action: returns SB_ERR_INTERNAL. */
static sb_status fail(const struct checker *c, int rank, int i, const char *what)
{
    char desc[96];
    sb_pp_action_describe(&sb_pp_rank_actions(c->s, rank)[i], desc, sizeof desc);
    return sb_error(SB_ERR_INTERNAL, "%s schedule: rank %d action %d (%s): %s",
                    sb_pp_kind_name(c->s->shape.kind), rank, i, desc, what);
}

/* Whether action i of rank r is well formed: its micro-batch, chunk and
 * virtual stage in range, and a send or receive naming the rank that owns
 * the neighbouring virtual stage. */
static sb_status check_fields(const struct checker *c, int r, int i, const struct sb_pp_action *a)
{
    int kind = c->s->shape.kind;
    if (a->op < 0 || a->op >= SB_PP_OP_COUNT) return fail(c, r, i, "an unknown action");
    if (a->microbatch < 0 || a->microbatch >= c->m || a->chunk < 0 || a->chunk >= c->v ||
        a->stage != a->chunk * c->p + r)
        return fail(c, r, i, "micro-batch, chunk or stage out of range");
    int zb = kind == SB_PP_ZBH1;
    if ((a->op == SB_PP_BACKWARD && zb) ||
        ((a->op == SB_PP_BACKWARD_INPUT || a->op == SB_PP_BACKWARD_WEIGHT) && !zb))
        return fail(c, r, i, zb ? "zb-h1 splits every backward into B and W"
                                : "only zb-h1 splits the backward");
    int to_next = a->op == SB_PP_SEND_ACT || a->op == SB_PP_RECV_GRAD;
    int to_prev = a->op == SB_PP_RECV_ACT || a->op == SB_PP_SEND_GRAD;
    if (!to_next && !to_prev) return a->peer == -1 ? SB_OK : fail(c, r, i, "compute with a peer");
    if ((to_next && a->stage == c->last) || (to_prev && a->stage == 0))
        return fail(c, r, i, "no virtual stage on that side");
    int peer = to_next ? (a->stage + 1) % c->p : (a->stage - 1) % c->p;
    return a->peer == peer ? SB_OK : fail(c, r, i, "the neighbouring stage is on another rank");
}

/* Runs action i of rank r. *blocked = 1 for a receive whose message was not
 * sent yet (the rank waits); errors for a broken dependency. */
static sb_status run_action(struct checker *c, int r, int i, int *blocked)
{
    const struct sb_pp_action *a = &sb_pp_rank_actions(c->s, r)[i];
    SB_TRY(check_fields(c, r, i, a));
    unsigned char *st = &c->state[((size_t)r * c->m + a->microbatch) * c->v + a->chunk];
    /* The messages this compute needs: its input activation, its output gradient. */
    struct sb_pp_action recv_act = *a, recv_grad = *a;
    recv_act.op = SB_PP_RECV_ACT;
    recv_grad.op = SB_PP_RECV_GRAD;
    recv_act.peer = recv_grad.peer = 0;
    int act_in = a->stage > 0 ? sb_pp_message_id(&c->s->shape, &recv_act) : -1;
    int grad_in = a->stage < c->last ? sb_pp_message_id(&c->s->shape, &recv_grad) : -1;
    *blocked = 0;
    switch (a->op) {
    case SB_PP_FORWARD:
        if (*st != NOT_RUN) return fail(c, r, i, "a second forward");
        if (act_in >= 0 && !c->got[act_in]) return fail(c, r, i, "its input was not received");
        *st = FORWARDED;
        break;
    case SB_PP_BACKWARD:
    case SB_PP_BACKWARD_INPUT:
        if (*st != FORWARDED) return fail(c, r, i, "a backward without its forward, or twice");
        if (grad_in >= 0 && !c->got[grad_in])
            return fail(c, r, i, "its output gradient was not received");
        *st = a->op == SB_PP_BACKWARD ? DONE : INPUT_GRAD_DONE;
        break;
    case SB_PP_BACKWARD_WEIGHT:
        if (*st != INPUT_GRAD_DONE) return fail(c, r, i, "W without its B, or twice");
        *st = DONE;
        break;
    case SB_PP_SEND_ACT:
    case SB_PP_SEND_GRAD: {
        int k = sb_pp_message_id(&c->s->shape, a);
        if (*st < (a->op == SB_PP_SEND_ACT ? FORWARDED : INPUT_GRAD_DONE))
            return fail(c, r, i, "sent before it was computed");
        if (c->sent[k]) return fail(c, r, i, "sent twice");
        c->sent[k] = c->s->offset[r] + i + 1;
        break;
    }
    case SB_PP_RECV_ACT:
    case SB_PP_RECV_GRAD: {
        int k = sb_pp_message_id(&c->s->shape, a);
        if (c->got[k]) return fail(c, r, i, "received twice");
        if (!c->sent[k]) {
            *blocked = 1;
            return SB_OK;
        }
        c->got[k] = 1;
        break;
    }
    default: return fail(c, r, i, "an unknown action");
    }
    return SB_OK;
}

/* After every rank stopped: who waits forever, what was never received,
 * which compute never ran. */
static sb_status check_end(struct checker *c)
{
    /* A rank waiting on a rank that finished names a missing send; when
     * every awaited rank waits too, the first stuck rank names the cycle. */
    int stuck = -1;
    for (int r = c->p - 1; r >= 0; r--) {
        if (c->pos[r] >= sb_pp_rank_count(c->s, r)) continue;
        stuck = r;
        int peer = sb_pp_rank_actions(c->s, r)[c->pos[r]].peer;
        if (c->pos[peer] >= sb_pp_rank_count(c->s, peer)) {
            char why[96];
            snprintf(why, sizeof why, "waits forever: rank %d ends its list without sending it",
                     peer);
            return fail(c, r, c->pos[r], why);
        }
    }
    if (stuck >= 0) {
        int peer = sb_pp_rank_actions(c->s, stuck)[c->pos[stuck]].peer;
        char desc[96], why[192];
        sb_pp_action_describe(&sb_pp_rank_actions(c->s, peer)[c->pos[peer]], desc, sizeof desc);
        snprintf(why, sizeof why, "waits forever: a deadlock, rank %d waits in turn at its "
                 "action %d (%s)", peer, c->pos[peer], desc);
        return fail(c, stuck, c->pos[stuck], why);
    }
    for (int k = 0; k < sb_pp_message_count(&c->s->shape); k++)
        if (c->sent[k] && !c->got[k]) {
            int g = c->sent[k] - 1, r = 0;
            while (c->s->offset[r + 1] <= g) r++;
            return fail(c, r, g - c->s->offset[r], "is never received");
        }
    for (int r = 0; r < c->p; r++)
        for (int mb = 0; mb < c->m; mb++)
            for (int ch = 0; ch < c->v; ch++) {
                unsigned char st = c->state[((size_t)r * c->m + mb) * c->v + ch];
                if (st != DONE)
                    return sb_error(SB_ERR_INTERNAL, "%s schedule: rank %d never finishes the "
                                    "%s of micro-batch %d chunk %d",
                                    sb_pp_kind_name(c->s->shape.kind), r,
                                    st == NOT_RUN ? "forward" : "backward", mb, ch);
            }
    return SB_OK;
}

sb_status sb_pp_check(const struct sb_pp_schedule *s)
{
    struct checker c = {.s = s, .p = s->shape.stages, .m = s->shape.microbatches,
                        .v = s->shape.chunks};
    c.last = c.p * c.v - 1;
    size_t n_msg = (size_t)sb_pp_message_count(&s->shape) + 1;
    c.sent = calloc(n_msg, sizeof *c.sent);
    c.got = calloc(n_msg, 1);
    c.state = calloc((size_t)c.p * c.m * c.v, 1);
    c.pos = calloc((size_t)c.p, sizeof *c.pos);
    sb_status st = SB_OK;
    if (!c.sent || !c.got || !c.state || !c.pos)
        st = sb_error(SB_ERR_NOMEM, "schedule check: out of memory");
    /* Each rank runs until it blocks; rounds repeat while any rank moved. The
     * outcome does not depend on the order ranks are visited in: a blocked
     * receive only waits for a send, and sends never wait. */
    for (int moved = 1; !st && moved;) {
        moved = 0;
        for (int r = 0; r < c.p && !st; r++)
            for (int blocked = 0; !st && !blocked && c.pos[r] < sb_pp_rank_count(s, r);) {
                st = run_action(&c, r, c.pos[r], &blocked);
                if (!st && !blocked) {
                    c.pos[r]++;
                    moved = 1;
                }
            }
    }
    if (!st) st = check_end(&c);
    free(c.sent);
    free(c.got);
    free(c.state);
    free(c.pos);
    return st;
}
