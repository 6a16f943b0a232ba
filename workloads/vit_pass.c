/* The vit workload's forward and backward passes over the flat buffers
 * (layout and shapes in vit_model.h and vit.c). All math goes through the
 * backend's ops; one GEMM per linear layer over all n * T tokens, one
 * strided batched GEMM per attention product over all n * heads (on the
 * cpu, the products whose output is wanted in token layout take one call
 * per sample: heads_gemm). The fused-attention path (fp32 on the cpu) is
 * vit_fused.c's: q, k, v in one GEMM and the block in groups of samples. */
#include <math.h>

#include "data/mnist.h"
#include "workloads/vit_model.h"

/* Output bytes a linear layer's passes take at a time on a host-memory
 * backend: the chunk of y stays in L2 between the bias fill (or the
 * residual copy), the GEMM that adds onto it and the bias add, where whole
 * outputs of 0.8-2.4 MB went out to L3 between them (loaded machine,
 * 3200 x 192 and 3200 x 128 fill + GEMM: -11 % at 800 rows a chunk). Each
 * output element is the same GEMM sum either way (OpenBLAS's per-element
 * order does not depend on the row count), so the same bits. A device
 * backend takes whole layers (a launch per chunk would cost more). */
#define LINEAR_CHUNK_BYTES (640 * 1024)

/* Rows of y (.., out) a chunk. */
int sb_vit_chunk_rows(const struct sb_model *m, int rows, int out)
{
    if (!m->be->host_memory) return rows;
    int c = LINEAR_CHUNK_BYTES / (out * (int)sizeof(float));
    return c < 1 ? 1 : c;
}

/* y (rows, out) = [res +] x (rows, in) . W^T + b, W (out, in) at w with rows
 * ldw apart, b (out) at bias; res NULL: y = b set first and the GEMM adds
 * onto it (beta 0 of sb_vit_linear); res == y: added to y as it is (beta
 * 1); else y = res copied first. In row chunks (chunk_rows). */
void sb_vit_linear_rows(const struct sb_model *m, const float *x, int rows, int in, int out,
                        const float *w, int ldw, const float *bias, const float *res, float *y)
{
    const struct sb_backend_ops *be = m->be;
    int ch = sb_vit_chunk_rows(m, rows, out);
    for (int r0 = 0; r0 < rows; r0 += ch) {
        int n = rows - r0 < ch ? rows - r0 : ch;
        const float *xc = x + (size_t)r0 * in;
        float *yc = y + (size_t)r0 * out;
        if (!res) {
            be->copy2d(yc, out, bias, 0, n, out); /* every row = b */
            sb_model_gemm(m, 0, 1, n, out, in, 1.0f, xc, in, w, ldw, 1.0f, yc, out);
            continue;
        }
        if (res != y) be->copy(yc, res + (size_t)r0 * out, (size_t)n * out);
        sb_model_gemm(m, 0, 1, n, out, in, 1.0f, xc, in, w, ldw, 1.0f, yc, out);
        be->add_bias(yc, bias, n, out);
    }
}

/* y (rows, out) = x (rows, in) . W^T + b, W (out, in) at params[w]; beta 1
 * adds to y (a residual) instead of overwriting it. Under --precision
 * bf16|fp16 y is stored 16-bit (the sum with the residual rounded once).
 * beta 0: y is set to b first and the GEMM adds onto it (beta 1), one pass
 * over y where zeroing it (BLAS's beta 0) and adding b were two; each
 * output is the same one rounding of b + the row's dot product as long as
 * the BLAS sums all `in` products before adding to C (OpenBLAS 0.3.21 on
 * SkylakeX does up to in = 256 at least, and adds the partial sums of its
 * K blocks at 512: there b joins the first, and y's last bits differ from
 * adding b after). */
void sb_vit_linear(const struct sb_model *m, const float *x, int rows, int in, int out, size_t w,
                   size_t b, float beta, float *y)
{
    sb_vit_linear_rows(m, x, rows, in, out, m->params + w, in, m->params + b, beta == 0.0f ? NULL : y,
                y);
    sb_model_round(m, y, (size_t)rows * out);
}

/* Gradients of linear(): dW (out, in) = dy^T . x, db = colsum(dy), both
 * overwritten; dx (rows, in) = dy . W, overwritten (beta 0) or added
 * (beta 1); skipped when dx is NULL. Nothing is rounded here: the caller
 * rounds dx once it is whole (after the tp all-reduce of a column-parallel
 * layer's partial sums, after q, k and v have added theirs) and the
 * layer's weight gradients before reporting them ready. */
void sb_vit_linear_backward(struct sb_model *m, const float *dy, const float *x, int rows, int in,
                            int out, size_t w, size_t b, float beta, float *dx)
{
    const struct sb_backend_ops *be = m->be;
    if (!sb_vit_split_linear(m, dy, x, rows, in, out, w, b)) { /* else W computes them */
        sb_model_gemm(m, 1, 0, out, in, rows, 1.0f, dy, out, x, in, 0.0f, m->grads + w, in);
        be->bias_grad(m->grads + b, dy, rows, out);
    }
    if (dx) sb_model_gemm(m, 0, 0, rows, in, out, 1.0f, dy, out, m->params + w, in, beta, dx, in);
}

/* Patch embedding, class token and position embeddings into res[0]. */
static void embed_forward(struct sb_model *m, const float *x, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, P = p->n_patches;
    /* sequence parallelism: every rank embeds every token, then keeps its own */
    float *res0 = p->sp ? p->full : p->res[0];
    sb_model_layer_begin(m, p->embed_off, p->embed_count, 0);
    be->patchify(x, n, SB_MNIST_SIDE, p->patch, p->patches);
    /* tmp (n * P, W) = patches . W_e^T + b_e, then into token rows 1..P */
    sb_vit_linear(m, p->patches, n * P, p->patch_dim, W, p->embed_w, p->embed_b, 0.0f, p->tmp);
    be->copy2d(res0 + W, (long)T * W, p->tmp, (long)P * W, n, P * W);
    be->copy2d(res0, (long)T * W, m->params + p->cls, 0, n, W);
    /* + pos (T, W): one bias row of T * W per sample */
    be->add_bias(res0, m->params + p->pos, n, T * W);
    sb_model_round(m, res0, (size_t)n * T * W);
    if (p->sp) {
        long tl = (long)p->tokens_local * W;
        be->copy2d(p->res[0], tl, res0 + p->tp_rank * tl, (long)T * W, n, (int)tl);
    }
}

/* y (rows, W) = x + r . W_r^T + b for a row-parallel layer W_r (W, in) at
 * params[w] with bias params[b]: on a tp shard r . W_r^T is this shard's
 * partial sum over its inputs, summed over the tp group through the hook
 * (Megatron-LM's g: all-reduce forward) in tmp before the residual and the
 * bias; on the whole model one GEMM onto the residual, as always. */
static void row_parallel_forward(struct sb_model *m, const float *r, int rows, int in,
                                 const float *x, size_t w, size_t b, float *y)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width;
    if (p->tp_size == 1) { /* y = x + r . W^T + b, chunk by chunk */
        sb_vit_linear_rows(m, r, rows, in, W, m->params + w, in, m->params + b, x, y);
        sb_model_round(m, y, (size_t)rows * W);
        return;
    }
    be->copy(y, x, (size_t)rows * W);
    sb_model_gemm(m, 0, 1, rows, W, in, 1.0f, r, in, m->params + w, in, 0.0f, p->tmp, W);
    sb_model_tp_allreduce(m, p->tmp, (size_t)rows * W); /* fp32 partial sums */
    be->add(y, p->tmp, (size_t)rows * W);
    be->add_bias(y, m->params + b, rows, W);
    sb_model_round(m, y, (size_t)rows * W);
}

/* fc1 = ln2 . W_1^T + b_1 and gelu = GELU(fc1), fc1 then GELU'(fc1), for
 * rows first .. first + rows - 1, chunk by chunk (linear_rows's chunks:
 * GELU reads fc1 while it is in L2); each rounded to 16 bits under
 * --precision bf16|fp16 as a whole pass would. */
void sb_vit_fc1_gelu_forward(struct sb_model *m, const struct vit_block *b, int first, int rows)
{
    struct vit *p = m->impl;
    int W = p->width, F = p->hidden_local, ch = sb_vit_chunk_rows(m, rows, F), end = first + rows;
    for (int r0 = first; r0 < end; r0 += ch) {
        int n = end - r0 < ch ? end - r0 : ch;
        size_t off = (size_t)r0 * F, count = (size_t)n * F;
        sb_vit_linear_rows(m, b->ln2 + (size_t)r0 * W, n, W, F, m->params + b->fc1_w, W,
                    m->params + b->fc1_b, NULL, b->fc1 + off);
        sb_model_round(m, b->fc1 + off, count);
        m->be->gelu_forward(b->fc1 + off, b->gelu + off, count); /* fc1 becomes GELU'(fc1) */
        sb_model_round(m, b->gelu + off, count);
    }
}

/* fc2_gelu_backward's chunks: `rows` rows of ch each. */
struct gelu_chunks {
    struct sb_model *m;
    const struct vit_block *b;
    int rows, ch;
};

/* Chunk i of fc2_gelu_backward: its rows of d gelu, times GELU'. */
static void fc2_gelu_chunk(void *arg, int i)
{
    const struct gelu_chunks *c = arg;
    struct sb_model *m = c->m;
    const struct vit_block *b = c->b;
    struct vit *p = m->impl;
    int W = p->width, F = p->hidden_local, r0 = i * c->ch;
    int n = c->rows - r0 < c->ch ? c->rows - r0 : c->ch;
    size_t off = (size_t)r0 * F, count = (size_t)n * F;
    sb_model_gemm(m, 0, 0, n, F, W, 1.0f, p->dres + (size_t)r0 * W, W, m->params + b->fc2_w, F,
                  0.0f, p->dfc + off, F);
    sb_model_round(m, p->dfc + off, count);
    m->be->gelu_backward(p->dfc + off, b->fc1 + off, count); /* fc1 holds GELU' */
    sb_model_round(m, p->dfc + off, count);
}

/* d gelu = dres . W_2 (fc2's input gradient), then times GELU' (in
 * b->fc1) into p->dfc, chunk by chunk (the product's chunk is in L2 for
 * the multiply), the chunks on the backend's threads (parallel_for; each
 * its own rows); rounded as whole passes would. fc2's weight gradients are
 * sb_vit_linear_backward's, as before. */
static void fc2_gelu_backward(struct sb_model *m, const struct vit_block *b, int rows)
{
    struct vit *p = m->impl;
    int W = p->width, F = p->hidden_local;
    struct gelu_chunks c = {.m = m, .b = b, .rows = rows, .ch = sb_vit_chunk_rows(m, rows, F)};
    sb_vit_linear_backward(m, p->dres, b->gelu, rows, F, W, b->fc2_w, b->fc2_b, 0.0f, NULL);
    sb_model_parallel_for(m, (rows + c.ch - 1) / c.ch, fc2_gelu_chunk, &c);
}

/* One block on res[l] -> res[l + 1] for n samples (of a tp shard: its
 * heads and MLP units; H, Wl and F below are the shard's). */
static void block_forward(struct sb_model *m, int l, int n)
{
    struct vit *p = m->impl;
    struct vit_block *b = &p->block[l];
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, rows = n * T;
    int F = p->hidden_local, Wl = p->width_local;
    const float *x = p->res[l];
    float *out = p->res[l + 1];
    const float *prm = m->params;
    sb_model_layer_begin(m, b->offset, b->count, 0);
    if (p->fused_attention && p->tp_size == 1 && be->host_memory) {
        sb_vit_block_forward_grouped(m, b, x, out, n);
        return;
    }
    /* attention: ln1 -> q, k, v (head layout) -> softmax(q k^T / sqrt(hd)) v */
    be->layernorm_forward(x, prm + b->norm1_w, prm + b->norm1_b, rows, W, VIT_LN_EPS, b->ln1,
                          b->mean1, b->rstd1);
    sb_model_round(m, b->ln1, (size_t)rows * W); /* the q, k, v GEMMs' input */
    sb_vit_attention_forward(m, b, n);
    /* mid = x + ctx . W_o^T + b_o */
    row_parallel_forward(m, b->ctx, rows, Wl, x, b->proj_w, b->proj_b, b->mid);
    /* MLP: out = mid + gelu(ln2 . W_1^T + b_1) . W_2^T + b_2 */
    be->layernorm_forward(b->mid, prm + b->norm2_w, prm + b->norm2_b, rows, W, VIT_LN_EPS,
                          b->ln2, b->mean2, b->rstd2);
    sb_model_round(m, b->ln2, (size_t)rows * W);
    sb_vit_fc1_gelu_forward(m, b, 0, rows);
    row_parallel_forward(m, b->gelu, rows, F, b->mid, b->fc2_w, b->fc2_b, out);
}

/* For each sample s < n and head h < H: C_sh (T, hd) = alpha op(A_sh)
 * op(B_sh), A_sh = a + (s H + h) sa (head layout), likewise B, written in
 * token layout into c (n, T, H hd): C_sh at c + s T H hd + h hd, leading
 * dimension H hd. On a host-memory backend (cpu) a batched product is a
 * loop of BLAS calls anyway: one batched call per sample over its heads
 * writes C in place, and the head merge (a transpose pass) goes; on a
 * device, n launches would cost more than that pass, so one batched call
 * over all n H into scratch (n H T hd floats) and a transpose. */
static void heads_gemm(const struct sb_model *m, int ta, int tb, int rows, int cols, int k,
                       float alpha, const float *a, int lda, long sa, const float *bm, int ldb,
                       long sb, float *c, float *scratch, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int H = p->heads_local, Wl = p->width_local, T = p->tokens, hd = p->head_dim;
    if (!be->host_memory) {
        be->sgemm_strided_batched(ta, tb, rows, cols, k, alpha, a, lda, sa, bm, ldb, sb, 0.0f,
                                  scratch, hd, (long)T * hd, n * H);
        be->transpose_0213(scratch, n, H, T, hd, c); /* (n, H, T, hd) -> (n, T, H, hd) */
        return;
    }
    for (int s = 0; s < n; s++)
        be->sgemm_strided_batched(ta, tb, rows, cols, k, alpha, a + s * H * sa, lda, sa,
                                  bm + s * H * sb, ldb, sb, 0.0f, c + (size_t)s * T * Wl, Wl, hd,
                                  H);
}

int sb_vit_fused_attention(const struct sb_model *m)
{
    const struct vit *p = m->impl;
    return !m->half && m->be->attention_forward && m->be->attention_backward &&
           m->be->attention_forward(NULL, NULL, NULL, p->width_local, 0, p->heads_local,
                                    p->tokens, p->head_dim, 1.0f, NULL, NULL, p->width_local);
}

void sb_vit_attention_forward(struct sb_model *m, struct vit_block *b, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, H = p->heads_local, hd = p->head_dim, rows = n * T;
    int Wl = p->width_local;
    float *qkv[3] = {b->q, b->k, b->v};
    size_t wo[3] = {b->q_w, b->k_w, b->v_w}, bo[3] = {b->q_b, b->k_b, b->v_b};
    if (p->fused_attention) { /* q, k, v stay in token layout: no head split */
        sb_vit_fused_attention_forward(m, b, n);
        return;
    }
    for (int i = 0; i < 3; i++) {
        sb_vit_linear(m, b->ln1, rows, W, Wl, wo[i], bo[i], 0.0f, p->tmp);
        be->transpose_0213(p->tmp, n, T, H, hd, qkv[i]); /* (n, T, H, hd) -> (n, H, T, hd) */
    }
    long th = (long)T * hd, tt = (long)T * T;
    /* scores (T, T) = q (T, hd) . k^T / sqrt(hd), per (sample, head) */
    be->sgemm_strided_batched(0, 1, T, T, hd, 1.0f / sqrtf((float)hd), b->q, hd, th, b->k, hd,
                              th, 0.0f, b->probs, T, tt, n * H);
    sb_model_round(m, b->probs, (size_t)n * H * tt); /* the scores */
    be->softmax_rows(b->probs, n * H * T, T);
    sb_model_round(m, b->probs, (size_t)n * H * tt); /* the probabilities: a GEMM's input */
    /* context (T, hd) = probs (T, T) . v (T, hd), written in token layout */
    heads_gemm(m, 0, 0, T, hd, T, 1.0f, b->probs, T, tt, b->v, hd, th, b->ctx, p->dh[0], n);
    sb_model_round(m, b->ctx, (size_t)rows * Wl);
}

/* Final LayerNorm on the class token and the linear head -> logits. */
static void head_forward(struct sb_model *m, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens;
    sb_model_layer_begin(m, p->head_off, p->head_count, 0);
    const float *last = p->res[p->depth];
    if (p->sp) { /* the class token is rank 0's: every rank gathers the sequence */
        sb_vit_sp_gather(m, last, p->full, n);
        last = p->full;
    }
    be->copy2d(p->xcls, W, last, (long)T * W, n, W);
    be->layernorm_forward(p->xcls, m->params + p->norm_w, m->params + p->norm_b, n, W,
                          VIT_LN_EPS, p->lnf, p->meanf, p->rstdf);
    sb_model_round(m, p->lnf, (size_t)n * W);
    sb_vit_linear(m, p->lnf, n, W, m->n_classes, p->head_w, p->head_b, 0.0f, p->logits);
}

void sb_vit_forward_logits(struct sb_model *m, const float *x, int n)
{
    struct vit *p = m->impl;
    if (p->has_embed) embed_forward(m, x, n);
    for (int l = p->b0; l < p->b1; l++)
        if (p->sp) sb_vit_sp_block_forward(m, l, n);
        else block_forward(m, l, n);
    if (p->has_head) head_forward(m, n);
    p->n = n;
}

/* Head backward: leaves dLoss/d res[depth] in dres (zero off the class
 * token rows). */
static void head_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, n = p->n;
    sb_model_layer_begin(m, p->head_off, p->head_count, 1);
    sb_model_round(m, p->dlogits, (size_t)n * m->n_classes); /* the loss's gradient */
    sb_vit_linear_backward(m, p->dlogits, p->lnf, n, W, m->n_classes, p->head_w, p->head_b, 0.0f,
                    p->dlnf);
    sb_model_round(m, p->dlnf, (size_t)n * W);
    be->zero(p->dxcls, (size_t)n * W);
    sb_vit_split_layernorm(m, p->dlnf, p->xcls, p->norm_w, p->norm_b, p->meanf, p->rstdf, n, W,
                           p->dxcls);
    sb_model_round(m, p->dxcls, (size_t)n * W);
    sb_vit_split_ready(m, ready, ctx, p->head_off, p->head_count);
    be->zero(p->dres, (size_t)n * T * W);
    be->copy2d(p->dres, (long)T * W, p->dxcls, W, n, W);
    if (p->sp) { /* the same whole gradient on every rank: each keeps its tokens' */
        long tl = (long)p->tokens_local * W;
        be->copy2d(p->dsh, tl, p->dres + p->tp_rank * tl, (long)T * W, n, (int)tl);
    }
}

/* Block l backward: dres holds dLoss/d res[l + 1] and becomes dLoss/d
 * res[l]. */
static void block_backward(struct sb_model *m, int l, sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    struct vit_block *b = &p->block[l];
    int n = p->n, W = p->width, T = p->tokens;
    int rows = n * T, F = p->hidden_local, Wl = p->width_local;
    sb_model_layer_begin(m, b->offset, b->count, 1);
    /* MLP: dres is d out = d mid through the residual, plus the MLP's path */
    fc2_gelu_backward(m, b, rows);
    sb_vit_linear_backward(m, p->dfc, b->ln2, rows, W, F, b->fc1_w, b->fc1_b, 0.0f, p->dln);
    /* fc1 is column-parallel: its input gradient is a partial sum (f backward) */
    sb_model_tp_allreduce(m, p->dln, (size_t)rows * W);
    sb_model_round(m, p->dln, (size_t)rows * W);
    sb_vit_split_layernorm(m, p->dln, b->mid, b->norm2_w, b->norm2_b, b->mean2, b->rstd2, rows, W,
                           p->dres);
    sb_model_round(m, p->dres, (size_t)rows * W);
    /* attention: dres is now d mid */
    if (p->fused_attention && !p->split) {
        sb_vit_fused_attention_block_backward(m, b, n);
    } else {
        sb_vit_linear_backward(m, p->dres, b->ctx, rows, Wl, W, b->proj_w, b->proj_b, 0.0f,
                               p->tmp);
        sb_model_round(m, p->tmp, (size_t)rows * Wl);
        sb_vit_attention_backward(m, b, n);
    }
    /* q, k, v are column-parallel on one input: one all-reduce of its
     * gradient's partial sums (f backward) */
    sb_model_tp_allreduce(m, p->dln, (size_t)rows * W);
    sb_model_round(m, p->dln, (size_t)rows * W);
    sb_vit_split_layernorm(m, p->dln, p->res[l], b->norm1_w, b->norm1_b, b->mean1, b->rstd1, rows,
                           W, p->dres);
    sb_model_round(m, p->dres, (size_t)rows * W);
    sb_vit_split_ready(m, ready, ctx, b->offset, b->count);
}

void sb_vit_attention_backward(struct sb_model *m, struct vit_block *b, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int W = p->width, T = p->tokens, H = p->heads_local, hd = p->head_dim, rows = n * T;
    int Wl = p->width_local;
    float scale = 1.0f / sqrtf((float)hd);
    size_t wo[3] = {b->q_w, b->k_w, b->v_w}, bo[3] = {b->q_b, b->k_b, b->v_b};
    if (p->fused_attention && !p->split) { /* d q, d k, d v interleaved, as q, k, v */
        float *dqkv = p->dh[0];
        sb_vit_fused_attention_backward(m, b, n, dqkv, dqkv + Wl, dqkv + 2 * Wl, 3 * Wl);
        sb_vit_qkv_backward(m, b, dqkv, rows);
        return;
    }
    if (p->fused_attention) { /* d context read in token layout (p->tmp); zb-h1's split
                               * backward records each layer's output gradient (rows, Wl) */
        sb_vit_fused_attention_backward(m, b, n, p->dh[0], p->dh[1], p->dh[2], Wl);
        for (int i = 0; i < 3; i++) /* dq, dk, dv in token layout */
            sb_vit_linear_backward(m, p->dh[i], b->ln1, rows, W, Wl, wo[i], bo[i],
                                   i ? 1.0f : 0.0f, p->dln);
        return;
    }
    be->transpose_0213(p->tmp, n, T, H, hd, p->dh[0]); /* d context, head layout */
    long th = (long)T * hd, tt = (long)T * T;
    /* dprobs (T, T) = dctx (T, hd) . v^T; dv (T, hd) = probs^T . dctx */
    be->sgemm_strided_batched(0, 1, T, T, hd, 1.0f, p->dh[0], hd, th, b->v, hd, th, 0.0f,
                              p->dprobs, T, tt, n * H);
    heads_gemm(m, 1, 0, T, hd, T, 1.0f, b->probs, T, tt, p->dh[0], hd, th, p->dh[2], p->tmp,
               n);
    sb_model_round(m, p->dprobs, (size_t)n * H * tt);
    sb_model_round(m, p->dh[2], (size_t)rows * Wl);
    be->softmax_rows_backward(p->dprobs, b->probs, n * H * T, T); /* -> d scores */
    sb_model_round(m, p->dprobs, (size_t)n * H * tt);
    /* dq = dscores . k / sqrt(hd); dk = dscores^T . q / sqrt(hd) */
    heads_gemm(m, 0, 0, T, hd, T, scale, p->dprobs, T, tt, b->k, hd, th, p->dh[0], p->tmp, n);
    heads_gemm(m, 1, 0, T, hd, T, scale, p->dprobs, T, tt, b->q, hd, th, p->dh[1], p->tmp, n);
    sb_model_round(m, p->dh[0], (size_t)rows * Wl);
    sb_model_round(m, p->dh[1], (size_t)rows * Wl);
    for (int i = 0; i < 3; i++) /* dq, dk, dv in token layout */
        sb_vit_linear_backward(m, p->dh[i], b->ln1, rows, W, Wl, wo[i], bo[i], i ? 1.0f : 0.0f,
                               p->dln);
}

/* Embedding backward from dres = dLoss/d res[0]. */
static void embed_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    int n = p->n, W = p->width, T = p->tokens, P = p->n_patches;
    sb_model_layer_begin(m, p->embed_off, p->embed_count, 1);
    if (p->sp) sb_vit_sp_gather(m, p->dsh, p->dres, n); /* every rank's tokens' gradients */
    /* d pos = sum over samples; d cls = its first row */
    sb_vit_split_pos(m, p->dres, n);
    be->copy2d(p->tmp, (long)P * W, p->dres + W, (long)T * W, n, P * W);
    sb_vit_linear_backward(m, p->tmp, p->patches, n * P, p->patch_dim, W, p->embed_w, p->embed_b, 0.0f,
                    NULL);
    sb_vit_split_ready(m, ready, ctx, p->embed_off, p->embed_count);
}

void sb_vit_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    if (p->has_head) head_backward(m, ready, ctx);
    for (int l = p->b1 - 1; l >= p->b0; l--)
        if (p->sp) sb_vit_sp_block_backward(m, l, ready, ctx);
        else block_backward(m, l, ready, ctx);
    if (p->has_embed) embed_backward(m, ready, ctx);
}
