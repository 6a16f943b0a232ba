/* The vit's activation slots (vit_model.h's struct vit_slot): each slot
 * holds the activations one micro-batch's backward reads, of the layers
 * the part holds; the backward scratch is shared by the slots. The passes
 * (vit_pass.c, vit_sp.c, vit_split.c) read struct vit's fields, which
 * sb_vit_bind_slot points at one slot's buffers. The whole model has one
 * slot, bound once. */
#include <stdlib.h>

#include "workloads/vit_model.h"

/* Allocates `count` floats of backend memory at *ptr, counted in
 * p->alloc_bytes. */
static sb_status vit_alloc(const struct sb_backend_ops *be, struct vit *p, float **ptr,
                           size_t count)
{
    p->alloc_bytes += count * sizeof(float);
    return be->alloc((void **)ptr, count * sizeof(float));
}

/* Slot s's activations for cap samples (vit_model.h lists them); a tp
 * shard's heads and MLP units only (Wl = W/T, F/T, heads/T). */
static sb_status alloc_slot(struct sb_model *m, struct vit_slot *s, int first)
{
    const struct sb_backend_ops *be = m->be;
    struct vit *p = m->impl;
    size_t n = (size_t)p->cap, W = (size_t)p->width, T = (size_t)p->tokens;
    size_t rows = n * T, F = (size_t)p->hidden_local, H = (size_t)p->heads_local;
    size_t Wl = (size_t)p->width_local;
    /* sequence parallelism: the residual stream, mid and the LayerNorm
     * statistics hold this rank's tokens only (rows_l) */
    size_t rows_l = n * (size_t)p->tokens_local;
    s->res = calloc((size_t)p->depth + 1, sizeof *s->res);
    s->block = calloc((size_t)p->depth, sizeof *s->block);
    if (!s->res || !s->block) return sb_error(SB_ERR_NOMEM, "vit: out of memory");
    size_t before = p->alloc_bytes;
    for (int l = p->b0; l < p->b1; l++) {
        struct vit_block *b = &s->block[l];
        *b = p->block[l]; /* the parameter offsets */
        float **stream[] = {&s->res[l], &b->mid};
        for (size_t i = 0; i < sizeof stream / sizeof stream[0]; i++)
            SB_TRY(vit_alloc(be, p, stream[i], rows_l * W));
        float **wide[] = {&b->ln1, &b->ln2};
        for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
            SB_TRY(vit_alloc(be, p, wide[i], rows * W));
        /* q, k and v in one buffer: three (rows, Wl) tensors one after
         * another, or interleaved as one (rows, 3 Wl) (sb_vit_qkv_layout) */
        SB_TRY(vit_alloc(be, p, &b->q, 3 * rows * Wl));
        b->k = b->q + rows * Wl, b->v = b->k + rows * Wl;
        SB_TRY(vit_alloc(be, p, &b->ctx, rows * Wl));
        float **stats[] = {&b->mean1, &b->rstd1, &b->mean2, &b->rstd2};
        for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++)
            SB_TRY(vit_alloc(be, p, stats[i], rows_l));
        SB_TRY(vit_alloc(be, p, &b->fc1, rows * F));
        SB_TRY(vit_alloc(be, p, &b->gelu, rows * F));
        SB_TRY(vit_alloc(be, p, &b->probs, n * H * T * T));
    }
    if (first && p->b1 > p->b0) /* the blocks' buffers, all alike */
        p->block_bytes = (p->alloc_bytes - before) / (size_t)(p->b1 - p->b0);
    SB_TRY(vit_alloc(be, p, &s->res[p->b1], rows_l * W));
    if (p->sp && !p->has_head) SB_TRY(vit_alloc(be, p, &s->out, rows * W));
    if (p->has_embed)
        SB_TRY(vit_alloc(be, p, &s->patches, n * (size_t)p->n_patches * (size_t)p->patch_dim));
    if (p->has_head) {
        SB_TRY(vit_alloc(be, p, &s->xcls, n * W));
        SB_TRY(vit_alloc(be, p, &s->lnf, n * W));
        SB_TRY(vit_alloc(be, p, &s->meanf, n));
        SB_TRY(vit_alloc(be, p, &s->rstdf, n));
        SB_TRY(vit_alloc(be, p, &s->logits, n * (size_t)m->n_classes));
        SB_TRY(vit_alloc(be, p, &s->dlogits, n * (size_t)m->n_classes));
    }
    return SB_OK;
}

sb_status sb_vit_slots_alloc(struct sb_model *m)
{
    const struct sb_backend_ops *be = m->be;
    struct vit *p = m->impl;
    size_t n = (size_t)p->cap, W = (size_t)p->width, T = (size_t)p->tokens;
    size_t rows = n * T, F = (size_t)p->hidden_local, H = (size_t)p->heads_local;
    size_t Wl = (size_t)p->width_local, rows_l = n * (size_t)p->tokens_local;
    p->n_slots = m->part.slots;
    p->slot = calloc((size_t)p->n_slots, sizeof *p->slot);
    if (!p->slot) return sb_error(SB_ERR_NOMEM, "vit: out of memory");
    for (int k = 0; k < p->n_slots; k++) SB_TRY(alloc_slot(m, &p->slot[k], k == 0));
    if (p->sp) {
        SB_TRY(vit_alloc(be, p, &p->full, rows * W));
        SB_TRY(vit_alloc(be, p, &p->gat, rows * W));
        SB_TRY(vit_alloc(be, p, &p->lnsh, rows_l * W));
        SB_TRY(vit_alloc(be, p, &p->dsh, rows_l * W));
    }
    if (p->has_head) {
        SB_TRY(vit_alloc(be, p, &p->dlnf, n * W));
        SB_TRY(vit_alloc(be, p, &p->dxcls, n * W));
    }
    float **scratch[] = {&p->tmp, &p->dres, &p->dln};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        SB_TRY(vit_alloc(be, p, scratch[i], rows * W));
    SB_TRY(vit_alloc(be, p, &p->dh[0], 3 * rows * Wl)); /* dh[1], dh[2] follow dh[0] */
    p->dh[1] = p->dh[0] + rows * Wl, p->dh[2] = p->dh[1] + rows * Wl;
    if (p->b1 > p->b0) /* q, k and v's weights and biases side by side, or their gradients */
        SB_TRY(vit_alloc(be, p, &p->qkv_w, 3 * Wl * W + 3 * Wl));
    SB_TRY(vit_alloc(be, p, &p->dfc, rows * F));
    SB_TRY(vit_alloc(be, p, &p->dprobs, n * H * T * T));
    sb_vit_bind_slot(m, 0);
    return SB_OK;
}

void sb_vit_slots_free(struct sb_model *m)
{
    const struct sb_backend_ops *be = m->be;
    struct vit *p = m->impl;
    for (int k = 0; p->slot && k < p->n_slots; k++) {
        struct vit_slot *s = &p->slot[k];
        for (int l = 0; s->block && l < p->depth; l++) {
            struct vit_block *b = &s->block[l];
            float *bufs[] = {b->mid,  b->ln1, b->ln2,   b->mean1, b->rstd1, b->mean2, b->rstd2,
                             b->q,    b->probs, b->ctx, b->fc1,   b->gelu};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(bufs[i]);
        }
        for (int l = 0; s->res && l <= p->depth; l++) be->free(s->res[l]);
        float *bufs[] = {s->patches, s->xcls, s->lnf, s->meanf, s->rstdf, s->logits,
                         s->dlogits, s->out};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(bufs[i]);
        free(s->res);
        free(s->block);
    }
    free(p->slot);
    p->slot = NULL;
    p->res = NULL;
    float *bufs[] = {p->tmp,  p->dres, p->dln, p->dh[0], p->dfc, p->dprobs, p->dlnf,
                     p->dxcls, p->full, p->gat, p->lnsh,  p->dsh, p->acc,    p->qkv_w};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(bufs[i]);
}

void sb_vit_bind_slot(struct sb_model *m, int k)
{
    struct vit *p = m->impl;
    struct vit_slot *s = &p->slot[k];
    p->res = s->res;
    for (int l = p->b0; l < p->b1; l++) p->block[l] = s->block[l];
    p->patches = s->patches;
    p->xcls = s->xcls;
    p->lnf = s->lnf;
    p->meanf = s->meanf;
    p->rstdf = s->rstdf;
    p->logits = s->logits;
    p->dlogits = s->dlogits;
    p->split = s->split;
    p->n = s->n;
}

void sb_vit_qkv_layout(struct sb_model *m)
{
    struct vit *p = m->impl;
    size_t Wl = (size_t)p->width_local;
    if (!p->fused_attention) return;
    for (int k = 0; k < p->n_slots; k++)
        for (int l = p->b0; l < p->b1; l++) {
            struct vit_block *b = &p->slot[k].block[l];
            b->k = b->q + Wl, b->v = b->q + 2 * Wl;
        }
    sb_vit_bind_slot(m, 0);
}
