/* The vit workload's private state, shared by its files: vit.c (layout,
 * initialisation, buffers, the ops table) and vit_pass.c (forward and
 * backward). Not for strategies: they see only struct sb_model. */
#ifndef SB_VIT_MODEL_H
#define SB_VIT_MODEL_H

#include <stddef.h>

#include "workloads/estimate.h"
#include "workloads/workload.h"

#define VIT_MAX_DEPTH 64
#define VIT_LN_EPS 1e-5f /* nn.LayerNorm's default */

/* One pre-norm transformer block: offsets of its parameters in the flat
 * buffers and the activations its backward reads, for `cap` samples of T
 * tokens of width W (rows = cap * T). Head layout is (n, heads, T, hd). */
struct vit_block {
    size_t norm1_w, norm1_b, q_w, q_b, k_w, k_b, v_w, v_b, proj_w, proj_b;
    size_t norm2_w, norm2_b, fc1_w, fc1_b, fc2_w, fc2_b;
    size_t offset, count;    /* the block's parameter range */
    float *mid;              /* (rows, W) residual stream after attention */
    float *ln1, *ln2;        /* (rows, W) LayerNorm outputs */
    float *mean1, *rstd1, *mean2, *rstd2; /* (rows) LayerNorm statistics */
    float *q, *k, *v;        /* projections, one buffer from q: each (cap, heads_local, T, hd)
                              * head layout one after another, or where the backend's fused
                              * attention takes them (struct vit's fused_attention) token
                              * layout interleaved: (rows, 3 width_local), k = q + width_local,
                              * v = k + width_local (sb_vit_qkv_layout) */
    float *probs;            /* (cap, heads_local, T, T) attention probabilities */
    float *ctx;              /* (rows, width_local) attention context, heads merged */
    float *fc1;              /* (rows, hidden_local) MLP pre-activation, after the GELU
                              * its derivative there (gelu_forward overwrites it) */
    float *gelu;             /* (rows, hidden_local) GELU output */
};

/* One activation slot (a micro-batch in flight) of a part: the
 * activations its backward reads, bound into struct vit's fields while
 * the slot runs (sb_vit_bind_slot; vit_slots.c). */
struct vit_slot {
    float **res;             /* (depth + 1): res[b0 .. b1] held, the rest NULL */
    struct vit_block *block; /* (depth): the held blocks' activation pointers */
    float *patches;          /* the embedding's part: (cap * n_patches, patch_dim) */
    float *xcls, *lnf, *meanf, *rstdf, *logits, *dlogits; /* the head's part */
    float *out;              /* sp, a part before the head: its gathered output (cap, T, W) */
    struct vit_split *split; /* part.split_backward: this slot's B records, or NULL */
    int n;                   /* samples of the slot's last forward (0: none) */
};

struct vit {
    int patch, width, depth, heads, head_dim, mlp_ratio;
    int grid;                /* patches per side: 28 / patch */
    int n_patches;           /* grid^2 */
    int tokens;              /* T = n_patches + 1 (the class token first) */
    int patch_dim;           /* patch^2 pixels */
    int cap;                 /* samples forward/backward take (training batch) */
    int tp_rank, tp_size;    /* this tensor-parallel shard (tp_size 1: the whole model) */
    int heads_local;         /* heads held: heads / tp_size */
    int width_local;         /* heads_local x head_dim: q, k, v, ctx widths held */
    int hidden_local;        /* MLP hidden units held: mlp_ratio x width / tp_size */
    int sp;                  /* sequence parallelism: res[], mid, LayerNorm statistics sharded
                              * along the sequence (vit_sp.c) */
    int tokens_local;        /* tokens of this rank's sequence shard (tokens without sp) */
    int fused_attention;     /* 1: the backend's fused attention takes this model's heads
                              * (sb_vit_fused_attention, asked once at creation) */
    /* the part held (vit.c): the embedding (layer 0), blocks [b0, b1)
     * (layers b0 + 1 .. b1), the final LayerNorm and head (layer depth + 1) */
    int has_embed, has_head, b0, b1;
    int layout_next;         /* vit_layout: the whole model's index of the next tensor */
    struct vit_slot *slot;   /* (n_slots) activation slots; struct vit's activation fields
                              * below are the bound slot's */
    int n_slots;
    float *acc;              /* accumulate: this backward's gradients before they are added
                              * to m->grads (n_params), allocated on first use */
    float *grads_sum;        /* while accumulating: the model's gradient buffer */
    sb_grad_ready_fn acc_ready; /* ... and the caller's ready callback and its ctx */
    void *acc_ctx;
    /* parameter offsets outside the blocks */
    size_t cls, pos, embed_w, embed_b, norm_w, norm_b, head_w, head_b;
    size_t embed_off, embed_count, head_off, head_count; /* layer ranges */
    struct vit_block block[VIT_MAX_DEPTH];
    float **res;             /* the bound slot's: res[l] (rows, W) the input of block l, res[b1] the
                              * part's output (the whole model's: res[depth]) */
    float *patches;          /* (cap * n_patches, patch_dim) */
    float *xcls, *lnf;       /* (cap, W) class token before and after the final LayerNorm */
    float *meanf, *rstdf;    /* (cap) */
    float *logits, *dlogits; /* (cap, 10) */
    /* backward scratch, shared by the blocks */
    float *tmp, *dres, *dln; /* (rows, W) */
    float *dh[3];            /* (cap * heads_local * T * hd) each, one buffer from dh[0]:
                              * dh[0] d context in head layout, then d q, d k, d v in token
                              * layout (rows, width_local); with the fused attention and no
                              * split backward, d q, d k, d v interleaved (rows, 3 width_local) */
    float *qkv_w;            /* (3 width_local, W) then (3 width_local): q, k and v's weights
                              * and biases side by side (the fused attention's one projection
                              * GEMM), or their gradients */
    float *dfc;              /* (rows, hidden_local) */
    float *dprobs;           /* (cap, heads_local, T, T) */
    float *dlnf, *dxcls;     /* (cap, W) */
    int n;                   /* samples of the last forward */
    float *full;             /* sp: (rows, W) the embedding's output, the head's gathered input */
    float *lnsh;             /* sp: (n tokens_local, W) a LayerNorm's output or its gradient */
    float *dsh;              /* sp: (n tokens_local, W) the residual stream's gradient */
    float *gat;              /* sp: (rows, W) rank-major staging of the all-gather/reduce-scatter */
    struct vit_split *split; /* part.split_backward: B's records for W (vit_split.c), or NULL */
    size_t alloc_bytes;      /* activation and scratch bytes allocated */
    size_t block_bytes;      /* of them, one block's */
};

/* Forward of the held layers for n <= cap samples of the bound slot: the
 * embedding of x (n, 784) into res[0] if the part holds it (else res[b0]
 * holds the input already), the blocks [b0, b1), and the head's logits (n,
 * 10) in p->logits if it holds the head. Keeps what backward needs. Calls
 * the zero stage 3 layer hook before each layer (embed, blocks, head). */
void sb_vit_forward_logits(struct sb_model *m, const float *x, int n);

/* Backward of the bound slot's last forward over the held layers, last
 * first: from p->dlogits (the head) or from dres (dsh with sp) = dLoss/d
 * res[b1], leaving dLoss/d res[b0] there when the part has no embedding.
 * Overwrites the held layers' m->grads, calling ready(ctx, offset, count)
 * per layer and the layer hook (backward = 1) before each layer reads its
 * parameters. */
void sb_vit_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx);

/* Activation slots (vit_slots.c). Allocates part.slots slots of the held
 * layers' activations for cap samples and the scratch the slots share,
 * counted in p->alloc_bytes (p->block_bytes: one block of one slot), and
 * binds slot 0. SB_ERR_NOMEM. */
sb_status sb_vit_slots_alloc(struct sb_model *m);
/* Frees what sb_vit_slots_alloc allocated (also after a partial failure). */
void sb_vit_slots_free(struct sb_model *m);
/* With the fused attention (p->fused_attention, set), points every slot's
 * blocks' k and v into q's buffer interleaved (rows, 3 width_local):
 * one GEMM writes the three projections. Nothing otherwise. */
void sb_vit_qkv_layout(struct sb_model *m);
/* Points struct vit's activation fields (res, the held blocks', the
 * embedding's and head's, split, n) at slot k's. */
void sb_vit_bind_slot(struct sb_model *m, int k);

/* A part's backward of slot `slot` (vit_part.c), the fused one or (the
 * caller has set the slot's split state recording) the input half: binds
 * the slot, takes dout (n, T, W) into dres (a part before the head; with sp
 * this rank's tokens into dsh), runs sb_vit_backward, and writes din (n, T,
 * W) = dLoss/d res[b0] where the part has no embedding and din is not NULL
 * (with sp gathered whole). accumulate 1 writes the gradients into p->acc
 * and adds each layer's to m->grads before its ready call. SB_ERR_INTERNAL
 * for a slot without a forward or dout as workload.h's backward_part;
 * SB_ERR_NOMEM. */
sb_status sb_vit_part_backward(struct sb_model *m, int slot, const float *dout, float *din,
                               int accumulate, sb_grad_ready_fn ready, void *ctx);
/* Allocates p->acc, the accumulation buffer (n_params floats, backend
 * memory), and adds its bytes to p->alloc_bytes (the ledger's backward
 * scratch; sb_vit_part_size counts it when part.accumulate). Called by
 * create_part when part.accumulate, else by sb_vit_acc_begin on first use.
 * SB_ERR_NOMEM. */
sb_status sb_vit_acc_alloc(struct sb_model *m);
/* Accumulation around a backward that overwrites gradients (vit_part.c):
 * begin swaps m->grads for p->acc (allocated on first use when create_part
 * did not, and then counted in m->activation_bytes; SB_ERR_NOMEM)
 * and returns the ready callback to pass on (*ready_out, *ctx_out), which
 * adds each finished layer's p->acc range into the model's gradients before
 * calling `ready`; end restores m->grads. accumulate 0: nothing swapped,
 * ready passed through. */
sb_status sb_vit_acc_begin(struct sb_model *m, int accumulate, sb_grad_ready_fn ready,
                           void *ctx, sb_grad_ready_fn *ready_out, void **ctx_out);
void sb_vit_acc_end(struct sb_model *m, int accumulate);

/* y (rows, out) = x (rows, in) . W^T + b, W (out, in) at params[w]; beta 1
 * adds to y (a residual) instead of overwriting it. */
void sb_vit_linear(const struct sb_model *m, const float *x, int rows, int in, int out, size_t w,
                   size_t b, float beta, float *y);
/* Gradients of sb_vit_linear: dW (out, in) = dy^T . x, db = colsum(dy),
 * both overwritten; dx (rows, in) = dy . W, overwritten (beta 0) or added
 * (beta 1); skipped when dx is NULL. */
void sb_vit_linear_backward(struct sb_model *m, const float *dy, const float *x, int rows, int in,
                            int out, size_t w, size_t b, float beta, float *dx);
/* Block b's attention for n samples of all tokens: b->ln1 (n T, W) -> q,
 * k, v of the shard's heads -> b->ctx (n T, width_local). Backward: from
 * p->tmp = d ctx (n T, width_local), ADDS nothing: OVERWRITES p->dln (n T,
 * W) with d ln1 (this shard's partial sum over its heads). */
/* 1 when m's backend has a fused attention that takes m's heads: fp32 (under
 * bf16/fp16 the scores and probabilities are rounded between the steps,
 * which only the batched path does), the op present and the shape within it
 * (asked with n = 0). Then each block's q, k, v hold token layout (rows,
 * width_local), else head layout; forward and backward follow it. Asked
 * once, after the backend and the precision are set (vit.c). */
int sb_vit_fused_attention(const struct sb_model *m);

void sb_vit_attention_forward(struct sb_model *m, struct vit_block *b, int n);
void sb_vit_attention_backward(struct sb_model *m, struct vit_block *b, int n);

/* Rows of y (.., out) a chunk of sb_vit_linear_rows on a host-memory
 * backend (about 640 KB of output), all rows on a device. */
int sb_vit_chunk_rows(const struct sb_model *m, int rows, int out);
/* y (rows, out) = [res +] x (rows, in) . W^T + b, W (out, in) at w with rows
 * ldw apart, b (out) at bias; res NULL: y = b set first and the GEMM adds
 * onto it; res == y: added to y as it is; else y = res copied first. In
 * row chunks (sb_vit_chunk_rows). */
void sb_vit_linear_rows(const struct sb_model *m, const float *x, int rows, int in, int out,
                        const float *w, int ldw, const float *bias, const float *res, float *y);
/* Block b's fc1 and GELU for rows first .. first + rows - 1: b->fc1 =
 * GELU'(ln2 . W_1^T + b_1), b->gelu = GELU(ln2 . W_1^T + b_1). */
void sb_vit_fc1_gelu_forward(struct sb_model *m, const struct vit_block *b, int first, int rows);

/* The fused-attention path (vit_fused.c), each the same bits as the
 * whole-batch passes. The attention forward of n samples from b->ln1: q,
 * k, v (one GEMM) and the attention a group of samples at a time. */
void sb_vit_fused_attention_forward(struct sb_model *m, struct vit_block *b, int n);
/* The attention backward from d context in p->tmp into dq, dk, dv (rows
 * ldo apart), each head's dS kept by the op where it can. */
void sb_vit_fused_attention_backward(struct sb_model *m, const struct vit_block *b, int n,
                                     float *dq, float *dk, float *dv, int ldo);
/* q, k, v's weight and bias gradients and their input gradient into
 * p->dln, from dq, dk, dv interleaved (rows, 3 width_local) in dqkv. */
void sb_vit_qkv_backward(struct sb_model *m, const struct vit_block *b, const float *dqkv,
                         int rows);
/* Block b's attention backward (not zb-h1's split) from d mid in p->dres
 * to d ln1 in p->dln, the projection's gradients included, a group of
 * samples at a time. */
void sb_vit_fused_attention_block_backward(struct sb_model *m, struct vit_block *b, int n);
/* Block b's whole forward, x (n T, W) -> out, a group of samples at a time
 * (fp32, no tensor parallelism). */
void sb_vit_block_forward_grouped(struct sb_model *m, struct vit_block *b, const float *x,
                                  float *out, int n);

/* Sequence parallelism (vit_sp.c; Korthikanti et al. 2022, section 4.2.2):
 * block l's forward and backward with the residual stream, LayerNorms and
 * their statistics sharded along the sequence (res[l], mid: (n
 * tokens_local, W)); the LayerNorm outputs all-gathered before the
 * column-parallel layers, the row-parallel outputs reduce-scattered; the
 * backward's running gradient in p->dsh (n tokens_local, W). */
void sb_vit_sp_block_forward(struct sb_model *m, int l, int n);
void sb_vit_sp_block_backward(struct sb_model *m, int l, sb_grad_ready_fn ready, void *ctx);
/* full (n tokens, W), sample-major, = the all-gather of every tp rank's
 * shard (n tokens_local, W); and shard = the reduce-scatter of every
 * rank's full partial sums (its tokens' rows), through p->gat. */
void sb_vit_sp_gather(struct sb_model *m, const float *shard, float *full, int n);
void sb_vit_sp_scatter(struct sb_model *m, const float *full, float *shard, int n);

/* The split backward (zb-h1's B and W, workload.h; vit_split.c). The input
 * half runs sb_vit_backward with the weight-gradient steps recorded instead
 * of run: each linear layer's and LayerNorm's output gradient copied aside
 * with pointers to its kept inputs, the embedding's, and each layer's ready
 * call; the weight half replays the records in order with the same backend
 * calls (a LayerNorm's backward again, its input gradient into scratch), so
 * B then W equals the fused backward byte for byte. Not with sequence
 * parallelism (create refuses). The hooks vit_pass.c calls: */
sb_status sb_vit_split_alloc(struct sb_model *m);
void sb_vit_split_free(struct sb_model *m);
/* 1 when recording (the caller skips dW and db): keeps dy (rows, out) and x. */
int sb_vit_split_linear(struct sb_model *m, const float *dy, const float *x, int rows, int in,
                        int out, size_t w, size_t b);
/* LayerNorm backward: dx += d x (rows, cols) from dy; its parameters'
 * gradients at grads[w], grads[b] now, or recorded for W. */
void sb_vit_split_layernorm(struct sb_model *m, const float *dy, const float *x, size_t w,
                            size_t b, const float *mean, const float *rstd, int rows, int cols,
                            float *dx);
/* The embedding's position and class-token gradients from dres (n, T, W). */
void sb_vit_split_pos(struct sb_model *m, const float *dres, int n);
/* ready(ctx, offset, count), or recorded for W. */
void sb_vit_split_ready(struct sb_model *m, sb_grad_ready_fn ready, void *ctx, size_t offset,
                        size_t count);
sb_status sb_vit_backward_input_part(struct sb_model *m, int slot, const float *dout,
                                     float *din);
sb_status sb_vit_backward_weight_part(struct sb_model *m, int slot, int accumulate,
                                      sb_grad_ready_fn ready, void *ctx);

/* The part ops (workload.h; vit_part.c) of the whole model or any part of
 * it (a run of layers, a tp shard, several slots). */
sb_status sb_vit_forward_part(struct sb_model *m, int slot, const float *in, const uint8_t *y,
                              int n, float grad_scale, double *loss_sum);
const float *sb_vit_part_output(const struct sb_model *m, int slot);
sb_status sb_vit_backward_part(struct sb_model *m, int slot, const float *dout, float *din,
                               int accumulate, sb_grad_ready_fn ready, void *ctx);

/* The sizes of `part` (NULL: the whole model) as vit_create_part allocates
 * it, from the closed-form formulas (vit_size.c; docs/tensor.md). */
struct sb_model_size sb_vit_part_size(const struct sb_config *cfg, int max_batch,
                                      const struct sb_part *part);

/* The vit's parameters and activation bytes from cfg->vit for batches of
 * max_batch, before anything is allocated: what create allocates
 * (docs/workloads.md, "Memory ledger"; per block, s tokens, b = the
 * training cap, h width, a heads, r MLP ratio: 4sbh(8 + 2r) + 4as^2b +
 * 16sb bytes). Shape flags are assumed valid (train_opts checks them). */
struct sb_model_size sb_vit_size(const struct sb_config *cfg, int max_batch);

#endif
