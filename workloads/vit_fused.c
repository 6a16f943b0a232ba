/* The vit's fused-attention path on a host-memory backend (the cpu's
 * attention_forward/_backward; sb_vit_fused_attention says when): q, k and
 * v from one GEMM over their weights side by side, the attention in groups
 * of whole samples, and the whole block forward in such groups, so that
 * each pass reads its input in L2. Every output is the same sum, in the
 * same order, as the whole-batch passes of vit_pass.c: the same bits. */
#include <math.h>

#include "workloads/vit_model.h"

/* The q, k and v weights side by side in p->qkv_w (3 Wl, W), their biases
 * after them (3 Wl): copied from the parameters each step. */
static void qkv_weights(struct sb_model *m, const struct vit_block *b)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, Wl = p->width_local, W3 = 3 * Wl;
    size_t wo[3] = {b->q_w, b->k_w, b->v_w}, bo[3] = {b->q_b, b->k_b, b->v_b};
    float *w = p->qkv_w, *bias = p->qkv_w + (size_t)W3 * W;
    for (int i = 0; i < 3; i++) {
        be->copy(w + (size_t)i * Wl * W, m->params + wo[i], (size_t)Wl * W);
        be->copy(bias + i * Wl, m->params + bo[i], (size_t)Wl);
    }
}

/* q, k and v (rows, 3 Wl) interleaved in b->q = ln1 . [W_q; W_k; W_v]^T +
 * [b_q, b_k, b_v]: one GEMM over the three weights side by side in
 * p->qkv_w, so that OpenBLAS packs ln1 once, not three times. Each output
 * is the same one FMA chain over the W inputs as sb_vit_linear's, onto the
 * bias (beta 1): the same bits. */
static void qkv_forward(struct sb_model *m, const struct vit_block *b, int rows)
{
    struct vit *p = m->impl;
    int W = p->width, W3 = 3 * p->width_local;
    qkv_weights(m, b);
    sb_vit_linear_rows(m, b->ln1, rows, W, W3, p->qkv_w, W, p->qkv_w + (size_t)W3 * W, NULL, b->q);
}

/* The fused forward: q, k, v of a group of samples (about
 * LINEAR_CHUNK_BYTES of them, whole samples), then their attention while
 * they are in L2, group by group, where all n samples' q, k, v (2.4 MB at
 * the default) were written out to L3 before the attention read them back.
 * Each GEMM output is the same sum whatever the row count (as in
 * linear_rows' chunks), so the same bits. A device backend takes all n at
 * once (chunk_rows). */
void sb_vit_fused_attention_forward(struct sb_model *m, struct vit_block *b, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, H = p->heads_local, hd = p->head_dim, Wl = p->width_local;
    int W3 = 3 * Wl, g = sb_vit_chunk_rows(m, n * T, W3) / T;
    g = g < 1 ? 1 : g;
    float scale = 1.0f / sqrtf((float)hd);
    for (int s0 = 0; s0 < n; s0 += g) {
        int ns = n - s0 < g ? n - s0 : g;
        size_t r0 = (size_t)s0 * T, q0 = r0 * W3;
        if (s0 == 0) qkv_forward(m, b, ns * T); /* with the weights' copy */
        else
            sb_vit_linear_rows(m, b->ln1 + r0 * W, ns * T, W, W3, p->qkv_w, W,
                        p->qkv_w + (size_t)W3 * W, NULL, b->q + q0);
        be->attention_forward(b->q + q0, b->k + q0, b->v + q0, W3, ns, H, T, hd, scale,
                              b->probs + (size_t)s0 * H * T * T, b->ctx + r0 * Wl, Wl);
    }
}

/* sb_vit_qkv_backward's weight and bias gradients: one GEMM and one column sum
 * over dqkv (rows, 3 Wl) into p->qkv_w, copied to each tensor's place in
 * m->grads. */
static void qkv_weight_grads(struct sb_model *m, const struct vit_block *b, const float *dqkv,
                             int rows)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, Wl = p->width_local, W3 = 3 * Wl;
    size_t wo[3] = {b->q_w, b->k_w, b->v_w}, bo[3] = {b->q_b, b->k_b, b->v_b};
    float *dw = p->qkv_w, *db = p->qkv_w + (size_t)W3 * W;
    sb_model_gemm(m, 1, 0, W3, W, rows, 1.0f, dqkv, W3, b->ln1, W, 0.0f, dw, W);
    be->bias_grad(db, dqkv, rows, W3);
    for (int i = 0; i < 3; i++) {
        be->copy(m->grads + wo[i], dw + (size_t)i * Wl * W, (size_t)Wl * W);
        be->copy(m->grads + bo[i], db + i * Wl, (size_t)Wl);
    }
}

/* sb_vit_qkv_backward's input gradient of `rows` rows: dx (rows, W) = d q W_q,
 * + d k W_k, + d v W_v, three GEMMs (the sum's roundings as ever). */
static void qkv_input_grad(struct sb_model *m, const struct vit_block *b, const float *dqkv,
                           int rows, float *dx)
{
    struct vit *p = m->impl;
    int W = p->width, Wl = p->width_local, W3 = 3 * Wl;
    size_t wo[3] = {b->q_w, b->k_w, b->v_w};
    for (int i = 0; i < 3; i++)
        sb_model_gemm(m, 0, 0, rows, W, Wl, 1.0f, dqkv + i * Wl, W3, m->params + wo[i], W,
                      i ? 1.0f : 0.0f, dx, W);
}

/* Backward of qkv_forward from d q, d k, d v interleaved (rows, 3 Wl) in
 * dqkv: the weights' and biases' gradients in one GEMM and one column sum
 * into p->qkv_w, then copied to each tensor's place in m->grads (the same
 * sums as three sb_vit_linear_backward calls, so the same bits), and dx
 * into p->dln by three GEMMs (d q W_q, + d k W_k, + d v W_v: the sum's
 * roundings as before). */
void sb_vit_qkv_backward(struct sb_model *m, const struct vit_block *b, const float *dqkv,
                         int rows)
{
    struct vit *p = m->impl;
    qkv_weight_grads(m, b, dqkv, rows);
    qkv_input_grad(m, b, dqkv, rows, p->dln);
}

/* Bytes of a block's forward activations a group of samples takes at a
 * time in block_forward_grouped: ~4 KB a token at the default (ln1, q, k,
 * v, the probabilities, context, mid, ln2, fc1, gelu, out), so 8 samples,
 * within L2 (2 MB here) with the weights. */
#define BLOCK_GROUP_BYTES (1536 * 1024)

/* A group of samples of block_forward_grouped or of the attention
 * backward: group i holds samples i g .. min(n, (i + 1) g) - 1. */
struct block_group {
    struct sb_model *m;
    struct vit_block *b;
    const float *x;
    float *out;
    int n, g; /* samples, samples a group */
};

/* Group i's first sample; *ns its samples. */
static int group_first(const struct block_group *c, int i, int *ns)
{
    int s0 = i * c->g;
    *ns = c->n - s0 < c->g ? c->n - s0 : c->g;
    return s0;
}

/* Group i of block_forward_grouped. */
static void block_group_forward(void *arg, int i)
{
    const struct block_group *c = arg;
    struct sb_model *m = c->m;
    struct vit_block *b = c->b;
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, H = p->heads_local, hd = p->head_dim;
    int F = p->hidden_local, Wl = p->width_local, W3 = 3 * Wl;
    const float *prm = m->params, *x = c->x;
    float scale = 1.0f / sqrtf((float)hd);
    int ns, s0 = group_first(c, i, &ns), rows = ns * T;
    size_t r0 = (size_t)s0 * T, q0 = r0 * W3;
    be->layernorm_forward(x + r0 * W, prm + b->norm1_w, prm + b->norm1_b, rows, W, VIT_LN_EPS,
                          b->ln1 + r0 * W, b->mean1 + r0, b->rstd1 + r0);
    sb_vit_linear_rows(m, b->ln1 + r0 * W, rows, W, W3, p->qkv_w, W, p->qkv_w + (size_t)W3 * W,
                       NULL, b->q + q0);
    be->attention_forward(b->q + q0, b->k + q0, b->v + q0, W3, ns, H, T, hd, scale,
                          b->probs + (size_t)s0 * H * T * T, b->ctx + r0 * Wl, Wl);
    sb_vit_linear_rows(m, b->ctx + r0 * Wl, rows, Wl, W, prm + b->proj_w, Wl, prm + b->proj_b,
                       x + r0 * W, b->mid + r0 * W);
    be->layernorm_forward(b->mid + r0 * W, prm + b->norm2_w, prm + b->norm2_b, rows, W,
                          VIT_LN_EPS, b->ln2 + r0 * W, b->mean2 + r0, b->rstd2 + r0);
    sb_vit_fc1_gelu_forward(m, b, (int)r0, rows);
    sb_vit_linear_rows(m, b->gelu + r0 * F, rows, F, W, prm + b->fc2_w, F, prm + b->fc2_b,
                       b->mid + r0 * W, c->out + r0 * W);
}

/* block_forward on the fused attention's path without tensor parallelism
 * (fp32, host memory): the whole block a group of whole samples at a time,
 * LayerNorm, q, k, v, the attention, the projection onto the residual,
 * LayerNorm, fc1 and GELU, fc2 onto the residual, so that each pass reads
 * what the one before wrote while it is in L2, where a pass over all n
 * samples (0.8-2.4 MB an activation) left its output in L3 for the next.
 * Every op is row by row (LayerNorm's statistics, GELU) or a GEMM whose
 * outputs are the same sums whatever the row count, and the attention is
 * per sample: the same bits. (fp32: nothing to round.) The groups run on
 * the backend's threads (parallel_for), each writing its own rows. */
void sb_vit_block_forward_grouped(struct sb_model *m, struct vit_block *b, const float *x,
                                  float *out, int n)
{
    struct vit *p = m->impl;
    int W = p->width, T = p->tokens, H = p->heads_local;
    int F = p->hidden_local, Wl = p->width_local, W3 = 3 * Wl;
    size_t token_bytes = sizeof(float) * ((size_t)3 * W + W3 + Wl + 2 * (size_t)F + W +
                                          (size_t)H * T + W);
    int g = (int)(BLOCK_GROUP_BYTES / (token_bytes * T));
    g = g < 1 ? 1 : g;
    qkv_weights(m, b);
    struct block_group c = {.m = m, .b = b, .x = x, .out = out, .n = n, .g = g};
    sb_model_parallel_for(m, (n + g - 1) / g, block_group_forward, &c);
}

/* The attention backward of samples s0 .. s0 + ns - 1 from their d context
 * dc (rows Wl apart) into dq, dk, dv (rows ldo apart): each head's dS kept
 * inside the op where it can (no dprobs), else in p->dprobs. */
static void attention_backward_samples(struct sb_model *m, const struct vit_block *b, int s0,
                                       int ns, const float *dc, float *dq, float *dk, float *dv,
                                       int ldo)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int T = p->tokens, H = p->heads_local, hd = p->head_dim, W3 = 3 * p->width_local;
    float scale = 1.0f / sqrtf((float)hd);
    size_t q0 = (size_t)s0 * T * W3, pp = (size_t)s0 * H * T * T;
    if (!be->attention_backward(dc, p->width_local, b->q + q0, b->k + q0, b->v + q0, W3,
                                b->probs + pp, ns, H, T, hd, scale, NULL, dq, dk, dv, ldo))
        be->attention_backward(dc, p->width_local, b->q + q0, b->k + q0, b->v + q0, W3,
                               b->probs + pp, ns, H, T, hd, scale, p->dprobs + pp, dq, dk, dv,
                               ldo);
}

/* The fused attention backward from d context in p->tmp into dq, dk, dv
 * (rows ldo apart): each head's dS kept inside the op where it can (no
 * dprobs), else in p->dprobs. */
void sb_vit_fused_attention_backward(struct sb_model *m, const struct vit_block *b, int n,
                                     float *dq, float *dk, float *dv, int ldo)
{
    struct vit *p = m->impl;
    attention_backward_samples(m, b, 0, n, p->tmp, dq, dk, dv, ldo);
}

/* One group of sb_vit_fused_attention_block_backward: samples s0 .. s0 +
 * ns - 1's d context, attention backward (into p->dh[0]) and d ln1 (into
 * p->dln), each group's rows its own. */
static void attention_group_backward(void *arg, int i)
{
    const struct block_group *c = arg;
    struct sb_model *m = c->m;
    const struct vit_block *b = c->b;
    struct vit *p = m->impl;
    int W = p->width, T = p->tokens, Wl = p->width_local, W3 = 3 * Wl;
    int ns, s0 = group_first(c, i, &ns);
    size_t r0 = (size_t)s0 * T;
    float *dc = p->tmp + r0 * Wl, *d = p->dh[0] + r0 * W3;
    sb_model_gemm(m, 0, 0, ns * T, Wl, W, 1.0f, p->dres + r0 * W, W, m->params + b->proj_w, Wl,
                  0.0f, dc, Wl);
    attention_backward_samples(m, b, s0, ns, dc, d, d + Wl, d + 2 * Wl, W3);
    qkv_input_grad(m, b, d, ns * T, p->dln + r0 * W);
}

/* A block's attention backward on the fused path (not zb-h1's split),
 * from d mid in p->dres to d ln1 in p->dln, group by group of samples
 * (fused_attention_forward's): the output projection's input gradient (d
 * context), the attention's backward into dq, dk, dv (p->dh[0],
 * interleaved as q, k, v) and their input gradient, while the group's rows
 * are in L2; the projection's and q, k, v's weight gradients over all rows
 * as before. Each GEMM output is the same sum whatever the row count, so
 * the same bits. (fp32 only, as the fused path: nothing to round.) The
 * groups run on the backend's threads (parallel_for). */
void sb_vit_fused_attention_block_backward(struct sb_model *m, struct vit_block *b, int n)
{
    struct vit *p = m->impl;
    int W = p->width, T = p->tokens, Wl = p->width_local;
    int W3 = 3 * Wl, rows = n * T, g = sb_vit_chunk_rows(m, rows, W3) / T;
    g = g < 1 ? 1 : g;
    sb_vit_linear_backward(m, p->dres, b->ctx, rows, Wl, W, b->proj_w, b->proj_b, 0.0f, NULL);
    struct block_group c = {.m = m, .b = b, .n = n, .g = g};
    sb_model_parallel_for(m, (n + g - 1) / g, attention_group_backward, &c);
    qkv_weight_grads(m, b, p->dh[0], rows);
}
