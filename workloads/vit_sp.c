/* The vit's blocks under sequence parallelism (Korthikanti et al. 2022,
 * "Reducing Activation Recomputation in Large Transformer Models", section
 * 4.2.2), on a tensor-parallel shard: between the tp regions the residual
 * stream, the LayerNorms and their statistics hold only this rank's tokens
 * [r s/T, (r+1) s/T) of every sample. Before a column-parallel region the
 * LayerNorm's output is all-gathered (its backward: a reduce-scatter of the
 * partial input gradients); after a row-parallel region the partial outputs
 * are reduce-scattered (its backward: an all-gather of the gradient). The
 * LayerNorms' weight and bias gradients are sums over the shard's tokens and
 * are all-reduced over the tp group; everything else is vit_pass.c's. */
#include "workloads/vit_model.h"

void sb_vit_sp_gather(struct sb_model *m, const float *shard, float *full, int n)
{
    struct vit *p = m->impl;
    size_t count = (size_t)n * p->tokens_local * p->width;
    sb_model_tp_allgather(m, shard, p->gat, count); /* (T, n, s/T * W), rank-major */
    /* -> (n, T, s/T * W) = (n, s, W), sample-major */
    m->be->transpose_0213(p->gat, 1, p->tp_size, n, p->tokens_local * p->width, full);
}

void sb_vit_sp_scatter(struct sb_model *m, const float *full, float *shard, int n)
{
    struct vit *p = m->impl;
    size_t count = (size_t)n * p->tokens_local * p->width;
    m->be->transpose_0213(full, 1, n, p->tp_size, p->tokens_local * p->width, p->gat);
    sb_model_tp_reduce_scatter(m, p->gat, shard, count);
}

/* y (rows_l, W) = x + (the reduce-scattered partial (rows, W) in p->tmp)
 * + bias params[b]. */
static void sp_row_parallel_out(struct sb_model *m, const float *x, size_t b, float *y, int n)
{
    struct vit *p = m->impl;
    const struct sb_backend_ops *be = m->be;
    size_t count = (size_t)n * p->tokens_local * p->width;
    sb_vit_sp_scatter(m, p->tmp, p->lnsh, n);
    be->copy(y, x, count);
    be->add(y, p->lnsh, count);
    be->add_bias(y, m->params + b, n * p->tokens_local, p->width);
    sb_model_round(m, y, count);
}

void sb_vit_sp_block_forward(struct sb_model *m, int l, int n)
{
    struct vit *p = m->impl;
    struct vit_block *b = &p->block[l];
    const struct sb_backend_ops *be = m->be;
    int W = p->width, rows = n * p->tokens, rows_l = n * p->tokens_local;
    int F = p->hidden_local, Wl = p->width_local;
    const float *x = p->res[l], *prm = m->params;
    sb_model_layer_begin(m, b->offset, b->count, 0);
    be->layernorm_forward(x, prm + b->norm1_w, prm + b->norm1_b, rows_l, W, VIT_LN_EPS, p->lnsh,
                          b->mean1, b->rstd1);
    sb_model_round(m, p->lnsh, (size_t)rows_l * W); /* 16-bit before the gather */
    sb_vit_sp_gather(m, p->lnsh, b->ln1, n);
    sb_vit_attention_forward(m, b, n);
    /* the row-parallel GEMMs' partial sums stay fp32 until reduce-scattered */
    sb_model_gemm(m, 0, 1, rows, W, Wl, 1.0f, b->ctx, Wl, prm + b->proj_w, Wl, 0.0f, p->tmp, W);
    sp_row_parallel_out(m, x, b->proj_b, b->mid, n);
    be->layernorm_forward(b->mid, prm + b->norm2_w, prm + b->norm2_b, rows_l, W, VIT_LN_EPS,
                          p->lnsh, b->mean2, b->rstd2);
    sb_model_round(m, p->lnsh, (size_t)rows_l * W);
    sb_vit_sp_gather(m, p->lnsh, b->ln2, n);
    sb_vit_linear(m, b->ln2, rows, W, F, b->fc1_w, b->fc1_b, 0.0f, b->fc1);
    be->gelu_forward(b->fc1, b->gelu, (size_t)rows * F); /* fc1 becomes GELU'(fc1) */
    sb_model_round(m, b->gelu, (size_t)rows * F);
    sb_model_gemm(m, 0, 1, rows, W, F, 1.0f, b->gelu, F, prm + b->fc2_w, F, 0.0f, p->tmp, W);
    sp_row_parallel_out(m, b->mid, b->fc2_b, p->res[l + 1], n);
}

void sb_vit_sp_block_backward(struct sb_model *m, int l, sb_grad_ready_fn ready, void *ctx)
{
    struct vit *p = m->impl;
    struct vit_block *b = &p->block[l];
    const struct sb_backend_ops *be = m->be;
    int n = p->n, W = p->width, rows = n * p->tokens, rows_l = n * p->tokens_local;
    int F = p->hidden_local, Wl = p->width_local;
    const float *prm = m->params;
    float *g = m->grads;
    sb_model_layer_begin(m, b->offset, b->count, 1);
    /* MLP: dsh is d out; the row-parallel fc2 sees the gathered d out (its
     * bias gradient is then the whole sum, equal on every rank) */
    sb_vit_sp_gather(m, p->dsh, p->dres, n);
    sb_vit_linear_backward(m, p->dres, b->gelu, rows, F, W, b->fc2_w, b->fc2_b, 0.0f, p->dfc);
    sb_model_round(m, p->dfc, (size_t)rows * F);
    be->gelu_backward(p->dfc, b->fc1, (size_t)rows * F); /* fc1 holds GELU' */
    sb_model_round(m, p->dfc, (size_t)rows * F);
    sb_vit_linear_backward(m, p->dfc, b->ln2, rows, W, F, b->fc1_w, b->fc1_b, 0.0f, p->dln);
    sb_vit_sp_scatter(m, p->dln, p->lnsh, n); /* the column layer's partial input gradients */
    sb_model_round(m, p->lnsh, (size_t)rows_l * W);
    be->layernorm_backward(p->lnsh, b->mid, prm + b->norm2_w, b->mean2, b->rstd2, rows_l, W,
                           p->dsh, g + b->norm2_w, g + b->norm2_b);
    sb_model_round(m, p->dsh, (size_t)rows_l * W);
    sb_model_tp_allreduce(m, g + b->norm2_w, 2 * (size_t)W); /* weight, bias: adjacent */
    /* attention: dsh is now d mid */
    sb_vit_sp_gather(m, p->dsh, p->dres, n);
    sb_vit_linear_backward(m, p->dres, b->ctx, rows, Wl, W, b->proj_w, b->proj_b, 0.0f, p->tmp);
    sb_model_round(m, p->tmp, (size_t)rows * Wl);
    sb_vit_attention_backward(m, b, n);
    sb_vit_sp_scatter(m, p->dln, p->lnsh, n);
    sb_model_round(m, p->lnsh, (size_t)rows_l * W);
    be->layernorm_backward(p->lnsh, p->res[l], prm + b->norm1_w, b->mean1, b->rstd1, rows_l, W,
                           p->dsh, g + b->norm1_w, g + b->norm1_b);
    sb_model_round(m, p->dsh, (size_t)rows_l * W);
    sb_model_tp_allreduce(m, g + b->norm1_w, 2 * (size_t)W);
    sb_model_round(m, g + b->offset, b->count);
    if (ready) ready(ctx, b->offset, b->count);
}
