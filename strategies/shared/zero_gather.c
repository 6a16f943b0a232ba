/* zero_sync's stage-3 gathers (zero_sync.h): the layer hook that gathers
 * each layer's parameters before its forward and its backward, prefetches
 * the next layer's gather and frees the layers done with, and the gathers
 * outside training (evaluation, --save-params) over the quiet duplicate. */
#include <stdlib.h>

#include "strategies/shared/zero_sync_impl.h"

/* The unit holding parameter offset `off` (a layer's start). */
static struct sb_zero_unit *unit_at(struct sb_zero_sync *z, size_t off)
{
    for (int i = 0; i < z->n_units; i++)
        if (off >= z->u[i].off && off < z->u[i].off + z->u[i].count) return &z->u[i];
    return NULL;
}

void sb_zero_discard_params(struct sb_zero_sync *z, struct sb_zero_unit *u)
{
    double t0 = sb_now_s();
    z->be->discard(z->model->params + u->off, u->count * sizeof(float));
    z->free_s += sb_now_s() - t0;
    u->state = SB_ZERO_UNIT_FREE;
}

void sb_zero_gathered(struct sb_zero_sync *z, struct sb_zero_unit *u)
{
    u->state = SB_ZERO_UNIT_READY;
    if (z->gcomm == z->comm && z->n_iv < 2 * z->n_units) z->iv[z->n_iv++] = u->ag;
}

sb_status sb_zero_gather_params(struct sb_zero_sync *z, struct sb_comm *c, const float *send,
                                float *recv, const size_t *counts, struct sb_comm_request *req)
{
    if (z->param_half && c->ops->allgather16)
        return sb_comm_allgather16(c, z->param_fmt, send, recv, counts, req, NULL);
    return sb_comm_iallgather(c, send, recv, counts, req);
}

/* Starts gathering unit u's parameters into m->params over z->gcomm, for
 * forward (0) or backward (1). */
static sb_status gather_start(struct sb_zero_sync *z, struct sb_zero_unit *u, int backward)
{
    u->state = SB_ZERO_UNIT_GATHERING;
    u->gathered_for = backward;
    u->ag.index = (int)(u - z->u);
    return sb_zero_gather_params(z, z->gcomm, z->pshard + u->soff, z->model->params + u->off,
                                 u->counts, &u->ag);
}

/* Unit u's layer is about to run in forward (backward 0) or backward (1):
 * gathers it (waiting), prefetches the next, frees what is done with,
 * bounds the reduce-scatters in flight. */
static sb_status layer_begin(struct sb_zero_sync *z, struct sb_zero_unit *u, int backward)
{
    sb_status st = SB_OK;
    int i = (int)(u - z->u); /* forward runs i = n_units-1 .. 0, backward 0 .. n_units-1 */
    if (backward && !z->backward_phase) {
        /* Forward is over: free what it gathered (the last layer too, so
         * that backward gathers every layer again: 3Ψ per step). */
        z->backward_phase = 1;
        for (int k = 0; k < z->n_units && !st; k++) {
            struct sb_zero_unit *w = &z->u[k];
            if (w->state == SB_ZERO_UNIT_GATHERING) {
                st = sb_comm_wait(z->gcomm, &w->ag);
                sb_zero_gathered(z, w);
            }
            if (w->state == SB_ZERO_UNIT_READY && w->gathered_for == 0)
                sb_zero_discard_params(z, w);
        }
    }
    /* The previous layer in this pass's order is done with its parameters:
     * free it first, so that at most two layers (this one and the
     * prefetched next) are gathered at once. */
    int next = backward ? i + 1 : i - 1, prev = backward ? i - 1 : i + 1;
    if (!st && prev >= 0 && prev < z->n_units && z->u[prev].state == SB_ZERO_UNIT_READY)
        sb_zero_discard_params(z, &z->u[prev]);
    if (!st && u->state == SB_ZERO_UNIT_FREE) st = gather_start(z, u, backward);
    if (!st && u->state == SB_ZERO_UNIT_GATHERING) {
        st = sb_comm_wait(z->gcomm, &u->ag);
        sb_zero_gathered(z, u);
    }
    if (!st && next >= 0 && next < z->n_units && z->u[next].state == SB_ZERO_UNIT_FREE)
        st = gather_start(z, &z->u[next], backward);
    /* Bound the full gradients held: the reduce-scatters of the layers
     * before the previous one must be complete, and their gradients freed
     * (as FSDP limits its in-flight collectives). */
    for (int k = 0; !st && backward && k + 1 < i; k++) {
        struct sb_zero_unit *w = &z->u[k];
        if (!w->rs_issued || w->rs_freed) continue;
        st = sb_comm_wait(z->comm, &w->rs);
        if (!st) sb_zero_discard_grads(z, w);
    }
    if (!st) st = sb_zero_poll_units(z);
    return st;
}

void sb_zero_on_layer(void *ctx, size_t off, size_t count, int backward)
{
    (void)count;
    struct sb_zero_sync *z = ctx;
    if (z->cb_status) return;
    /* A layer outside the piece's range is not sharded by it. */
    if (off < z->range.offset || off >= z->range.offset + z->range.count) return;
    struct sb_zero_unit *u = unit_at(z, off);
    if (!u) {
        z->cb_status = sb_error(SB_ERR_INTERNAL, "zero: no unit at parameter %zu", off);
        return;
    }
    struct sb_zero_hook_mark at = sb_zero_hook_enter(z);
    z->cb_status = layer_begin(z, u, backward);
    sb_zero_hook_leave(z, backward != 0, at);
}

void sb_zero_sync_quiet(struct sb_zero_sync *z, int on)
{
    z->gcomm = on ? z->quiet : z->comm;
    z->backward_phase = 0;
    z->cb_status = SB_OK;
}

sb_status sb_zero_sync_release(struct sb_zero_sync *z)
{
    sb_status st = z->cb_status;
    z->cb_status = SB_OK;
    for (int i = 0; !st && z->stage == 3 && i < z->n_units; i++)
        if (z->u[i].state != SB_ZERO_UNIT_FREE) {
            if (z->u[i].state == SB_ZERO_UNIT_GATHERING) st = sb_comm_wait(z->gcomm, &z->u[i].ag);
            sb_zero_discard_params(z, &z->u[i]);
        }
    return st;
}

sb_status sb_zero_sync_gather_all(struct sb_zero_sync *z)
{
    for (int i = 0; z->stage == 3 && i < z->n_units; i++) {
        struct sb_zero_unit *u = &z->u[i];
        u->state = SB_ZERO_UNIT_READY;
        SB_TRY(sb_zero_gather_params(z, z->quiet, z->pshard + u->soff,
                                     z->model->params + u->off, u->counts, &u->ag));
        SB_TRY(sb_comm_wait(z->quiet, &u->ag));
    }
    return SB_OK;
}
