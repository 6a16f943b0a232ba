/* The vit's part ops (workload.h): forward_part, part_output and
 * backward_part of the whole model or of a part of it (a run of layers, a
 * tp shard, several activation slots), and the accumulation of a
 * micro-batch's gradients. Between parts the activation is the residual
 * stream res (n, T, W), whole on every tp rank: with sequence parallelism
 * a part keeps its tokens of its input and gathers its output (and the
 * same for the gradients), so parts meet in the same shape either way.
 * The passes are vit_pass.c's and vit_sp.c's over the bound slot. */
#include "workloads/model_table.h"
#include "workloads/vit_model.h"

#define VIT "vit"

sb_status sb_vit_forward_part(struct sb_model *m, int slot, const float *in, const uint8_t *y,
                              int n, float grad_scale, double *loss_sum)
{
    struct vit *p = m->impl;
    SB_TRY(sb_part_check_forward(m, slot, n, VIT));
    if (n > p->cap)
        return sb_error(SB_ERR_INTERNAL, VIT ": slot %d, batch %d outside 1..%d", slot, n,
                        p->cap);
    const struct sb_backend_ops *be = m->be;
    sb_vit_bind_slot(m, slot);
    long tw = (long)p->tokens * p->width, tl = (long)p->tokens_local * p->width;
    if (!p->has_embed) { /* the previous part's residual stream (n, T, W) */
        if (p->sp) be->copy2d(p->res[p->b0], tl, in + p->tp_rank * tl, tw, n, (int)tl);
        else be->copy(p->res[p->b0], in, (size_t)n * (size_t)tw);
    }
    sb_vit_forward_logits(m, in, n);
    if (p->has_head)
        be->softmax_xent(p->logits, y, n, m->n_classes, grad_scale, p->dlogits, loss_sum);
    else if (p->sp)
        sb_vit_sp_gather(m, p->res[p->b1], p->slot[slot].out, n);
    p->slot[slot].n = n;
    return SB_OK;
}

const float *sb_vit_part_output(const struct sb_model *m, int slot)
{
    const struct vit *p = m->impl;
    const struct vit_slot *s = &p->slot[slot];
    if (p->has_head) return s->logits;
    return p->sp ? s->out : s->res[p->b1];
}

/* The ready callback while accumulating: adds the layer's range of p->acc
 * into the model's gradients (rounded to 16 bits under --precision
 * bf16|fp16), then calls the caller's ready with m->grads the model's
 * buffer again. */
static void acc_ready(void *ctx, size_t offset, size_t count)
{
    struct sb_model *m = ctx;
    struct vit *p = m->impl;
    m->be->add(p->grads_sum + offset, p->acc + offset, count);
    /* --precision: the sum 16-bit too, as a layer's gradients are before ready */
    sb_model_round(m, p->grads_sum + offset, count);
    if (!p->acc_ready) return;
    m->grads = p->grads_sum;
    p->acc_ready(p->acc_ctx, offset, count);
    m->grads = p->acc;
}

sb_status sb_vit_acc_alloc(struct sb_model *m)
{
    struct vit *p = m->impl;
    SB_TRY(m->be->alloc((void **)&p->acc, m->n_params * sizeof(float)));
    p->alloc_bytes += m->n_params * sizeof(float);
    return SB_OK;
}

sb_status sb_vit_acc_begin(struct sb_model *m, int accumulate, sb_grad_ready_fn ready,
                           void *ctx, sb_grad_ready_fn *ready_out, void **ctx_out)
{
    struct vit *p = m->impl;
    *ready_out = ready;
    *ctx_out = ctx;
    if (!accumulate) return SB_OK;
    if (!p->acc) {
        SB_TRY(sb_vit_acc_alloc(m));
        m->activation_bytes = p->alloc_bytes; /* the ledger's backward scratch */
    }
    p->grads_sum = m->grads;
    m->grads = p->acc;
    p->acc_ready = ready;
    p->acc_ctx = ctx;
    *ready_out = acc_ready;
    *ctx_out = m;
    return SB_OK;
}

void sb_vit_acc_end(struct sb_model *m, int accumulate)
{
    struct vit *p = m->impl;
    if (accumulate) m->grads = p->grads_sum;
}

sb_status sb_vit_part_backward(struct sb_model *m, int slot, const float *dout, float *din,
                               int accumulate, sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    SB_TRY(sb_part_check_backward(m, slot, dout, din, VIT));
    if (p->slot[slot].n == 0)
        return sb_error(SB_ERR_INTERNAL, VIT ": backward of slot %d before its forward", slot);
    const struct sb_backend_ops *be = m->be;
    sb_vit_bind_slot(m, slot);
    int n = p->n;
    long tw = (long)p->tokens * p->width, tl = (long)p->tokens_local * p->width;
    if (dout) { /* dLoss/d res[b1], whole */
        if (p->sp) be->copy2d(p->dsh, tl, dout + p->tp_rank * tl, tw, n, (int)tl);
        else be->copy(p->dres, dout, (size_t)n * (size_t)tw);
    }
    sb_grad_ready_fn r;
    void *c;
    SB_TRY(sb_vit_acc_begin(m, accumulate, ready, ctx, &r, &c));
    sb_vit_backward(m, r, c);
    sb_vit_acc_end(m, accumulate);
    if (din && !p->has_embed) { /* dLoss/d res[b0], whole */
        if (p->sp) sb_vit_sp_gather(m, p->dsh, din, n);
        else be->copy(din, p->dres, (size_t)n * (size_t)tw);
    }
    return SB_OK;
}

sb_status sb_vit_backward_part(struct sb_model *m, int slot, const float *dout, float *din,
                               int accumulate, sb_grad_ready_fn ready, void *ctx)
{
    return sb_vit_part_backward(m, slot, dout, din, accumulate, ready, ctx);
}
