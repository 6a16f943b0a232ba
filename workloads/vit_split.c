/* The vit's split backward (zb-h1's B and W; workload.h's
 * backward_input_part and backward_weight_part; vit_model.h): the input
 * half runs the fused backward of vit_pass.c with its weight-gradient steps
 * recorded, the weight half replays them. A record keeps a copy of the
 * step's output gradient (what the later backward overwrites) and pointers
 * to its inputs among the forward's kept activations (the LayerNorm
 * outputs, the attention context, the GELU output, the patches, the
 * residual stream, the LayerNorm statistics), which nothing changes before
 * the next forward. The tp all-reduces of input gradients run in B; W has
 * no collective. */
#include <stdlib.h>

#include "workloads/vit_model.h"

enum vit_rec_kind { REC_LINEAR, REC_LAYERNORM, REC_POS, REC_READY };

/* One recorded weight-gradient step. */
struct vit_rec {
    enum vit_rec_kind kind;
    const float *x, *mean, *rstd; /* the step's kept inputs */
    float *dy;                    /* its output gradient, copied into the stage */
    int rows, in, out;            /* linear: dy (rows, out), x (rows, in); layernorm:
                                   * (rows, in); pos: rows samples */
    size_t w, b;                  /* the gradients' offsets; ready: offset, count */
};

struct vit_split {
    struct vit_rec *rec;
    int n_rec, cap_rec;
    float *stage;       /* (stage_cap) the copied output gradients */
    size_t stage_used, stage_cap;
    float *ln_dparams;  /* (2 W) B's LayerNorm parameter gradients, discarded */
    int recording;      /* inside the input half */
    int pending;        /* between B and W */
};

sb_status sb_vit_split_alloc(struct sb_model *m)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    struct vit_split *s = calloc(1, sizeof *s);
    if (!s) return sb_error(SB_ERR_NOMEM, "the split backward: out of memory");
    p->split = s;
    size_t cap = (size_t)p->cap, W = (size_t)p->width, T = (size_t)p->tokens;
    size_t rows = cap * T, F = (size_t)p->hidden_local, Wl = (size_t)p->width_local;
    /* Per block fc2, fc1, norm2, proj, q, k, v, norm1 and ready; the head's
     * linear, norm and ready; the embedding's position, linear and ready. */
    size_t blocks = (size_t)(p->b1 - p->b0); /* of the part's layers only */
    s->cap_rec = 9 * (p->b1 - p->b0) + 3 * p->has_head + 3 * p->has_embed;
    s->stage_cap = blocks * rows * (4 * W + F + 3 * Wl) +
                   cap * ((p->has_head ? (size_t)m->n_classes + W : 0) +
                          (p->has_embed ? T * W + (size_t)p->n_patches * W : 0));
    s->rec = calloc((size_t)s->cap_rec, sizeof *s->rec);
    if (!s->rec) return sb_error(SB_ERR_NOMEM, "the split backward: out of memory");
    SB_TRY(be->alloc((void **)&s->stage, s->stage_cap * sizeof(float)));
    SB_TRY(be->alloc((void **)&s->ln_dparams, 2 * W * sizeof(float)));
    p->alloc_bytes += (s->stage_cap + 2 * W) * sizeof(float);
    return SB_OK;
}

void sb_vit_split_free(struct sb_model *m)
{
    struct vit *p = m->impl;
    struct vit_split *s = p ? p->split : NULL;
    if (!s) return;
    m->be->free(s->stage);
    m->be->free(s->ln_dparams);
    free(s->rec);
    free(s);
    p->split = NULL;
}

/* A new record of `kind` with a copy of dy (count floats), or NULL when not
 * recording. The capacity is exact for sb_vit_backward's steps. */
static struct vit_rec *record(struct sb_model *m, enum vit_rec_kind kind, const float *dy,
                              size_t count)
{
    struct vit *p = m->impl;
    struct vit_split *s = p->split;
    if (!s || !s->recording || s->n_rec >= s->cap_rec || s->stage_used + count > s->stage_cap)
        return NULL;
    struct vit_rec *r = &s->rec[s->n_rec++];
    *r = (struct vit_rec){.kind = kind};
    if (count) {
        r->dy = s->stage + s->stage_used;
        s->stage_used += count;
        m->be->copy(r->dy, dy, count);
    }
    return r;
}

int sb_vit_split_linear(struct sb_model *m, const float *dy, const float *x, int rows, int in,
                        int out, size_t w, size_t b)
{
    struct vit_rec *r = record(m, REC_LINEAR, dy, (size_t)rows * out);
    if (!r) return 0;
    r->x = x;
    r->rows = rows, r->in = in, r->out = out;
    r->w = w, r->b = b;
    return 1;
}

void sb_vit_split_layernorm(struct sb_model *m, const float *dy, const float *x, size_t w,
                            size_t b, const float *mean, const float *rstd, int rows, int cols,
                            float *dx)
{
    struct vit *p = m->impl;
    struct vit_rec *r = record(m, REC_LAYERNORM, dy, (size_t)rows * cols);
    float *dgamma = m->grads + w, *dbeta = m->grads + b;
    if (r) { /* B needs dx now; the parameters' gradients are W's */
        *r = (struct vit_rec){REC_LAYERNORM, x, mean, rstd, r->dy, rows, cols, 0, w, b};
        dgamma = p->split->ln_dparams;
        dbeta = dgamma + cols;
    }
    m->be->layernorm_backward(dy, x, m->params + w, mean, rstd, rows, cols, dx, dgamma, dbeta);
}

void sb_vit_split_pos(struct sb_model *m, const float *dres, int n)
{
    struct vit *p = m->impl;
    size_t tw = (size_t)p->tokens * p->width;
    struct vit_rec *r = record(m, REC_POS, dres, (size_t)n * tw);
    if (r) {
        r->rows = n;
        return;
    }
    m->be->bias_grad(m->grads + p->pos, dres, n, (int)tw);
    m->be->copy(m->grads + p->cls, m->grads + p->pos, (size_t)p->width);
}

void sb_vit_split_ready(struct sb_model *m, sb_grad_ready_fn ready, void *ctx, size_t offset,
                        size_t count)
{
    struct vit_rec *r = record(m, REC_READY, NULL, 0);
    if (r) {
        r->w = offset, r->b = count;
        return;
    }
    sb_model_round(m, m->grads + offset, count); /* --precision: 16-bit before ready */
    if (ready) ready(ctx, offset, count);
}

sb_status sb_vit_backward_input_part(struct sb_model *m, int slot, const float *dout,
                                     float *din)
{
    struct vit *p = m->impl;
    if (slot < 0 || slot >= p->n_slots || !p->slot[slot].split)
        return sb_error(SB_ERR_INTERNAL, "%s: input half of slot %d without a split part",
                        m->ops->name, slot);
    struct vit_split *s = p->slot[slot].split;
    s->n_rec = 0;
    s->stage_used = 0;
    s->recording = 1;
    sb_status st = sb_vit_part_backward(m, slot, dout, din, 0, NULL, NULL);
    s->recording = 0;
    SB_TRY(st);
    if (s->n_rec != s->cap_rec)
        return sb_error(SB_ERR_INTERNAL, "%s: recorded %d weight-gradient steps, expected %d",
                        m->ops->name, s->n_rec, s->cap_rec);
    s->pending = 1;
    return SB_OK;
}

sb_status sb_vit_backward_weight_part(struct sb_model *m, int slot, int accumulate,
                                      sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    if (slot < 0 || slot >= p->n_slots || !p->slot[slot].split || !p->slot[slot].split->pending)
        return sb_error(SB_ERR_INTERNAL, "%s: weight half of slot %d (accumulate %d) before "
                        "its input half", m->ops->name, slot, accumulate);
    sb_vit_bind_slot(m, slot);
    struct vit_split *s = p->split;
    SB_TRY(sb_vit_acc_begin(m, accumulate, ready, ctx, &ready, &ctx));
    float *g = m->grads;
    for (int i = 0; i < s->n_rec; i++) {
        const struct vit_rec *r = &s->rec[i];
        switch (r->kind) {
        case REC_LINEAR: /* as sb_vit_linear_backward */
            sb_model_gemm(m, 1, 0, r->out, r->in, r->rows, 1.0f, r->dy, r->out, r->x, r->in,
                          0.0f, g + r->w, r->in);
            be->bias_grad(g + r->b, r->dy, r->rows, r->out);
            break;
        case REC_LAYERNORM: /* its input gradient again, into scratch (p->tmp: rows x W) */
            be->zero(p->tmp, (size_t)r->rows * r->in);
            be->layernorm_backward(r->dy, r->x, m->params + r->w, r->mean, r->rstd, r->rows,
                                   r->in, p->tmp, g + r->w, g + r->b);
            break;
        case REC_POS: {
            int tw = p->tokens * p->width;
            be->bias_grad(g + p->pos, r->dy, r->rows, tw);
            be->copy(g + p->cls, g + p->pos, (size_t)p->width);
            break;
        }
        case REC_READY:
            sb_model_round(m, g + r->w, r->b); /* --precision: 16-bit before ready */
            if (ready) ready(ctx, r->w, r->b);
            break;
        }
    }
    sb_vit_acc_end(m, accumulate);
    s->pending = 0;
    return SB_OK;
}
