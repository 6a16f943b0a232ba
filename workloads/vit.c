/* Workload "vit": a Vision Transformer for MNIST (Dosovitskiy et al. 2021,
 * "An Image is Worth 16x16 Words"), pre-norm blocks as in timm.
 *
 *   x (n, 28, 28) -> patches (n, P, p*p), P = (28/p)^2, each patch's
 *   pixels in (row, col) order -> linear patch embedding (n, P, W);
 *   the class token in front, + position embeddings -> (n, T = P + 1, W)
 *   depth x block: x += proj(attention(q, k, v of LN1(x)))
 *                  x += fc2(GELU(fc1(LN2(x))))
 *     attention: heads of hd = W / heads, softmax(q k^T / sqrt(hd)) v,
 *     non-causal; q, k, v separate linear layers (W, W) so tensor
 *     parallelism can split heads by output rows
 *   final LayerNorm on the class token -> linear head (10) -> softmax
 *   cross-entropy. No dropout. GELU is the exact (erf) form.
 *
 * Parameters in one flat buffer in the order of the PyTorch reference
 * module's state_dict (tools/vit_reference.py): cls_token (W), pos_embed
 * (T, W), patch_embed.weight (W, p*p), patch_embed.bias,
 * blocks.<i>.{norm1, q, k, v, proj, norm2, fc1, fc2}.{weight, bias},
 * norm.{weight, bias}, head.{weight, bias}. Layers: "embed", "block<i>",
 * "head". Initialisation as PyTorch's and timm's: nn.Linear's
 * Kaiming-uniform (a = sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
 * weight and bias), LayerNorm weight 1 and bias 0, cls_token and pos_embed
 * ~ N(0, 0.02^2) truncated to [-2, 2] (timm's trunc_normal_(std=.02)); one
 * generator stream per tensor (1000 + its index).
 *
 * Forward and backward take up to `cap` samples (the training batch,
 * cfg->batch, when smaller than max_batch): a transformer's activations
 * grow with the batch, and evaluation's 1000-sample batches need none of
 * them kept, so predict runs its batch through the same buffers in chunks
 * of cap. The activations are listed in vit_model.h; docs/workloads.md derives
 * their bytes per block. */
#include "workloads/vit_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"
#include "data/mnist.h"
#include "workloads/dense.h"
#include "workloads/model_table.h"

extern const struct sb_workload_ops sb_workload_vit;

/* How a tensor is initialised. */
enum vit_init { VIT_INIT_LINEAR, VIT_INIT_ONES, VIT_INIT_ZEROS, VIT_INIT_TRUNC_NORMAL };

#define VIT_BLOCK_TENSORS 16
#define VIT_TRUNC_STD 0.02

static void vit_destroy(struct sb_model *m)
{
    if (!m) return;
    const struct sb_backend_ops *be = m->be;
    struct vit *p = m->impl;
    if (p) {
        for (int k = 0; p->slot && k < p->n_slots; k++) {
            p->split = p->slot[k].split;
            sb_vit_split_free(m);
        }
        sb_vit_slots_free(m);
        free(p);
    }
    be->free(m->params);
    be->free(m->grads);
    free(m->tensors);
    free(m->layers);
    free(m);
}

/* How the whole model initialises tensor t, and which piece of it this
 * model holds (a tp shard: a block of rows or of columns). */
struct vit_init_spec {
    enum vit_init how;
    int fan_in;                        /* of a linear layer's tensors */
    size_t cols;                       /* the whole tensor is (m->tensors[t].rows, cols) */
    size_t row0, n_rows, col0, n_cols; /* the piece held */
    int global;                        /* the whole model's tensor index: its RNG stream */
};

/* Appends tensor `name`, the whole of it (rows, cols) in row-major order,
 * to layer `layer` of the layout table: the tp shard of it that this model
 * holds (SB_TP_COLUMN: rows [r rows/T, (r+1) rows/T), SB_TP_ROW: those
 * columns of every row; vit_create_part checked that T divides them).
 * Returns its offset and records how it is initialised (fan_in for linear
 * ones). */
static size_t add(struct sb_model *m, struct vit_init_spec *init, const char *name, size_t rows,
                  size_t cols, enum vit_init how, int fan, enum sb_tp_split split, int layer,
                  size_t *off)
{
    struct vit *p = m->impl;
    int t = m->n_tensors;
    size_t T = (size_t)p->tp_size, r = (size_t)p->tp_rank;
    struct vit_init_spec *sp = &init[t];
    *sp = (struct vit_init_spec){how, fan, cols, 0, rows, 0, cols, p->layout_next};
    if (split == SB_TP_COLUMN) {
        sp->n_rows = rows / T;
        sp->row0 = r * sp->n_rows;
    } else if (split == SB_TP_ROW) {
        sp->n_cols = cols / T;
        sp->col0 = r * sp->n_cols;
    }
    size_t at = sb_model_add_tensor(m, name, sp->n_rows * sp->n_cols, off);
    p->layout_next++;
    m->tensors[t].tp_split = split;
    m->tensors[t].layer = layer - m->part.first_layer;
    m->tensors[t].rows = rows;
    return at;
}

/* Closes layer `l` named `name` over the tensors added since `first`. */
static void close_layer(struct sb_model *m, int l, const char *name, int first, size_t off,
                        const int in_shape[3], const int out_shape[3])
{
    l -= m->part.first_layer; /* the whole model's layer l is the part's l - first */
    struct sb_layer_desc *d = &m->layers[l];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->first_tensor = first;
    d->n_tensors = m->n_tensors - first;
    d->offset = m->tensors[first].offset;
    d->count = off - d->offset;
    d->in_floats = d->out_floats = 1;
    for (int i = 0; i < 3; i++) {
        d->in_shape[i] = in_shape[i];
        d->out_shape[i] = out_shape[i];
        d->in_floats *= (size_t)in_shape[i];
        d->out_floats *= (size_t)out_shape[i];
    }
    m->n_layers = l + 1;
}

/* The layout and layer tables in buffer order (of this tp shard); fills
 * init[] per tensor and sets m->n_params. */
static void vit_layout(struct sb_model *m, struct vit_init_spec *init)
{
    struct vit *p = m->impl;
    size_t off = 0;
    int W = p->width, T = p->tokens, F = p->mlp_ratio * W;
    char name[32];
    const int image[3] = {SB_MNIST_PIXELS, 1, 1}, tokens[3] = {T, W, 1};
    const int logits[3] = {m->n_classes, 1, 1};
    int first_layer = m->part.first_layer;
    p->layout_next = 0;

    if (p->has_embed) {
        p->cls = add(m, init, "cls_token", (size_t)W, 1, VIT_INIT_TRUNC_NORMAL, 0,
                     SB_TP_REPLICATED, 0, &off);
        p->pos = add(m, init, "pos_embed", (size_t)T * W, 1, VIT_INIT_TRUNC_NORMAL, 0,
                     SB_TP_REPLICATED, 0, &off);
        p->embed_w = add(m, init, "patch_embed.weight", (size_t)W, (size_t)p->patch_dim,
                         VIT_INIT_LINEAR, p->patch_dim, SB_TP_REPLICATED, 0, &off);
        p->embed_b = add(m, init, "patch_embed.bias", (size_t)W, 1, VIT_INIT_LINEAR,
                         p->patch_dim, SB_TP_REPLICATED, 0, &off);
        close_layer(m, 0, "embed", 0, off, image, tokens);
        p->embed_off = m->layers[0].offset;
        p->embed_count = m->layers[0].count;
    } else {
        p->layout_next += 4; /* the embedding's tensors, not held */
    }

    for (int l = 0; l < p->depth; l++) {
        struct vit_block *b = &p->block[l];
        if (l < p->b0 || l >= p->b1) { /* not held */
            p->layout_next += VIT_BLOCK_TENSORS;
            continue;
        }
        int first = m->n_tensors, layer = l + 1;
        /* name suffix, field, whole (rows, cols), init, fan_in, split: q, k, v
         * and fc1 column-parallel (heads and the MLP's hidden units split),
         * proj and fc2 row-parallel (their inputs split), the rest replicated */
        struct {
            const char *suffix;
            size_t *at;
            size_t rows, cols;
            enum vit_init how;
            int fan;
            enum sb_tp_split split;
        } t[VIT_BLOCK_TENSORS] = {
            {"norm1.weight", &b->norm1_w, W, 1, VIT_INIT_ONES, 0, SB_TP_REPLICATED},
            {"norm1.bias", &b->norm1_b, W, 1, VIT_INIT_ZEROS, 0, SB_TP_REPLICATED},
            {"q.weight", &b->q_w, W, W, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"q.bias", &b->q_b, W, 1, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"k.weight", &b->k_w, W, W, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"k.bias", &b->k_b, W, 1, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"v.weight", &b->v_w, W, W, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"v.bias", &b->v_b, W, 1, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"proj.weight", &b->proj_w, W, W, VIT_INIT_LINEAR, W, SB_TP_ROW},
            {"proj.bias", &b->proj_b, W, 1, VIT_INIT_LINEAR, W, SB_TP_REPLICATED},
            {"norm2.weight", &b->norm2_w, W, 1, VIT_INIT_ONES, 0, SB_TP_REPLICATED},
            {"norm2.bias", &b->norm2_b, W, 1, VIT_INIT_ZEROS, 0, SB_TP_REPLICATED},
            {"fc1.weight", &b->fc1_w, F, W, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"fc1.bias", &b->fc1_b, F, 1, VIT_INIT_LINEAR, W, SB_TP_COLUMN},
            {"fc2.weight", &b->fc2_w, W, F, VIT_INIT_LINEAR, F, SB_TP_ROW},
            {"fc2.bias", &b->fc2_b, W, 1, VIT_INIT_LINEAR, F, SB_TP_REPLICATED},
        };
        for (int i = 0; i < VIT_BLOCK_TENSORS; i++) {
            snprintf(name, sizeof name, "blocks.%d.%s", l, t[i].suffix);
            *t[i].at = add(m, init, name, t[i].rows, t[i].cols, t[i].how, t[i].fan, t[i].split,
                           layer, &off);
        }
        snprintf(name, sizeof name, "block%d", l);
        close_layer(m, layer, name, first, off, tokens, tokens);
        m->layers[layer - first_layer].split_units = p->heads_local; /* tp holds whole heads */
        b->offset = m->layers[layer - first_layer].offset;
        b->count = m->layers[layer - first_layer].count;
    }

    if (!p->has_head) {
        m->n_params = off;
        return;
    }
    int first = m->n_tensors, layer = p->depth + 1;
    p->norm_w = add(m, init, "norm.weight", (size_t)W, 1, VIT_INIT_ONES, 0,
                    SB_TP_REPLICATED, layer, &off);
    p->norm_b = add(m, init, "norm.bias", (size_t)W, 1, VIT_INIT_ZEROS, 0,
                    SB_TP_REPLICATED, layer, &off);
    p->head_w = add(m, init, "head.weight", (size_t)m->n_classes, (size_t)W, VIT_INIT_LINEAR,
                    W, SB_TP_REPLICATED, layer, &off);
    p->head_b = add(m, init, "head.bias", (size_t)m->n_classes, 1, VIT_INIT_LINEAR, W,
                    SB_TP_REPLICATED, layer, &off);
    close_layer(m, layer, "head", first, off, tokens, logits);
    p->head_off = m->layers[layer - first_layer].offset;
    p->head_count = m->layers[layer - first_layer].count;
    m->n_params = off;
}

/* N(0, std^2) truncated to [-2, 2] by redrawing (Box-Muller from two
 * uniforms; timm's trunc_normal_ bounds are absolute, so at std 0.02 the
 * cut never bites in practice). */
static double trunc_normal(struct sb_rng *rng, double std)
{
    for (;;) {
        double u1 = sb_rng_uniform(rng), u2 = sb_rng_uniform(rng);
        double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2) * std;
        if (z >= -2.0 && z <= 2.0) return z;
    }
}

/* Fills m->params per init[] (host copy uploaded on a device backend): one
 * generator stream per tensor run over the whole tensor in row-major
 * order, keeping this model's piece, so a tp shard holds exactly the whole
 * model's values. Errors: SB_ERR_NOMEM; the upload's. */
static sb_status vit_init_params(struct sb_model *m, const struct vit_init_spec *init,
                                 uint64_t seed)
{
    const struct sb_backend_ops *be = m->be;
    float *host = be->host_memory ? m->params : malloc(m->n_params * sizeof *host);
    if (!host) return sb_error(SB_ERR_NOMEM, "vit: out of memory");
    for (int t = 0; t < m->n_tensors; t++) {
        struct sb_rng rng;
        sb_rng_seed(&rng, seed, 1000 + (uint64_t)init[t].global);
        float *x = host + m->tensors[t].offset;
        const struct vit_init_spec *sp = &init[t];
        double bound = sp->fan_in > 0 ? 1.0 / sqrt((double)sp->fan_in) : 0.0;
        size_t whole = m->tensors[t].rows * sp->cols;
        for (size_t i = 0; i < whole; i++) {
            float v = 0.0f;
            switch (sp->how) {
            case VIT_INIT_LINEAR: v = (float)((2.0 * sb_rng_uniform(&rng) - 1.0) * bound); break;
            case VIT_INIT_ONES: v = 1.0f; break;
            case VIT_INIT_ZEROS: v = 0.0f; break;
            case VIT_INIT_TRUNC_NORMAL: v = (float)trunc_normal(&rng, VIT_TRUNC_STD); break;
            }
            size_t row = i / sp->cols, col = i % sp->cols;
            if (row >= sp->row0 && row < sp->row0 + sp->n_rows && col >= sp->col0 &&
                col < sp->col0 + sp->n_cols)
                x[(row - sp->row0) * sp->n_cols + (col - sp->col0)] = v;
        }
    }
    sb_status st = be->host_memory ? SB_OK : be->upload(m->params, host, m->n_params * sizeof *host);
    if (host != m->params) free(host);
    return st;
}

/* The whole model (part NULL), or a part of it: a run of layers [first,
 * first + n) (the embedding is layer 0, block i layer i + 1, the final
 * LayerNorm and head layer depth + 1), of it a tensor-parallel shard (the
 * heads [r H/T, (r+1) H/T) of q, k, v and proj's matching input columns,
 * the MLP's hidden units [r F/T, (r+1) F/T) of fc1 and fc2's matching
 * columns; the rest replicated), with part->slots activation slots.
 * Between parts the activation is the residual stream (n, T, W), whole on
 * every tp rank (with sequence parallelism too: a part gathers its output
 * and keeps its tokens of its input). SB_ERR_USAGE: the shape flags'
 * errors; a part outside the model (sb_part_check); --tp not dividing
 * --heads, the MLP's hidden width or (sequence parallelism) the tokens. */
/* Each slot's split-backward state (vit_split.c), slot 0 bound after. */
static sb_status split_alloc(struct sb_model *m)
{
    struct vit *p = m->impl;
    for (int k = 0; k < p->n_slots; k++) {
        p->split = NULL;
        sb_status st = sb_vit_split_alloc(m);
        p->slot[k].split = p->split;
        SB_TRY(st);
    }
    sb_vit_bind_slot(m, 0);
    return SB_OK;
}

static sb_status vit_create_part(const struct sb_config *cfg, const struct sb_backend_ops *be,
                                 int max_batch, const struct sb_part *part,
                                 struct sb_model **out)
{
    *out = NULL;
    const struct sb_vit_config *v = &cfg->vit;
    if (!be->layernorm_forward || !be->sgemm_strided_batched || !be->patchify)
        return sb_error(SB_ERR_USAGE, "--workload vit: backend '%s' lacks the transformer ops",
                        be->name);
    if (v->patch < 1 || SB_MNIST_SIDE % v->patch != 0)
        return sb_error(SB_ERR_USAGE, "--patch: %d does not divide %d", v->patch, SB_MNIST_SIDE);
    if (v->heads < 1 || v->width < 1 || v->width % v->heads != 0)
        return sb_error(SB_ERR_USAGE, "--heads: %d does not divide --width %d", v->heads,
                        v->width);
    if (v->depth < 1 || v->depth > VIT_MAX_DEPTH)
        return sb_error(SB_ERR_USAGE, "--depth: expected 1..%d, got %d", VIT_MAX_DEPTH, v->depth);
    if (v->mlp_ratio < 1)
        return sb_error(SB_ERR_USAGE, "--mlp-ratio: expected >= 1, got %d", v->mlp_ratio);
    struct sb_part whole = {0, v->depth + 2, 0, 1, 1, 0, 0, 0};
    if (part) {
        SB_TRY(sb_part_check(part, whole.n_layers, "vit", &whole));
        if (part->tp_size < 1 || part->tp_rank < 0 || part->tp_rank >= part->tp_size)
            return sb_error(SB_ERR_USAGE, "vit: tp rank %d of %d", part->tp_rank,
                            part->tp_size);
        part = &whole;
        if (v->heads % part->tp_size != 0)
            return sb_error(SB_ERR_USAGE, "--tp: %d does not divide --heads %d (each tp rank "
                            "holds whole heads)", part->tp_size, v->heads);
        if ((v->mlp_ratio * v->width) % part->tp_size != 0)
            return sb_error(SB_ERR_USAGE, "--tp: %d does not divide the MLP's hidden width %d "
                            "(--mlp-ratio x --width)", part->tp_size, v->mlp_ratio * v->width);
        int tokens = (SB_MNIST_SIDE / v->patch) * (SB_MNIST_SIDE / v->patch) + 1;
        if (part->sequence_parallel && tokens % part->tp_size != 0)
            return sb_error(SB_ERR_USAGE, "--sequence-parallel: the sequence of %d tokens (the "
                            "class token included) does not divide by --tp %d", tokens,
                            part->tp_size);
        if (part->split_backward && part->sequence_parallel && part->tp_size > 1)
            return sb_error(SB_ERR_USAGE, "--sequence-parallel: the vit's split backward "
                            "(zb-h1) is not built with sequence parallelism");
    }

    struct sb_model *m = calloc(1, sizeof *m);
    struct vit *p = calloc(1, sizeof *p);
    int n_tensors = 4 + VIT_BLOCK_TENSORS * v->depth + 4;
    if (m) {
        m->tensors = calloc((size_t)n_tensors, sizeof *m->tensors);
        m->layers = calloc((size_t)v->depth + 2, sizeof *m->layers);
    }
    struct vit_init_spec *init = malloc((size_t)n_tensors * sizeof *init);
    if (!m || !p || !m->tensors || !m->layers || !init) {
        if (m) {
            free(m->tensors);
            free(m->layers);
        }
        free(m);
        free(p);
        free(init);
        return sb_error(SB_ERR_NOMEM, "vit: out of memory");
    }
    m->impl = p;
    m->be = be;
    m->in_dim = SB_MNIST_PIXELS;
    m->n_classes = SB_MNIST_CLASSES;
    m->max_batch = max_batch;
    p->patch = v->patch;
    p->width = v->width;
    p->depth = v->depth;
    p->heads = v->heads;
    p->head_dim = v->width / v->heads;
    p->mlp_ratio = v->mlp_ratio;
    p->grid = SB_MNIST_SIDE / v->patch;
    p->n_patches = p->grid * p->grid;
    p->tokens = p->n_patches + 1;
    p->patch_dim = v->patch * v->patch;
    p->cap = cfg->batch > 0 && cfg->batch < max_batch ? cfg->batch : max_batch;
    p->tp_rank = whole.tp_rank;
    p->tp_size = whole.tp_size;
    p->heads_local = v->heads / whole.tp_size;
    p->width_local = p->heads_local * p->head_dim;
    p->hidden_local = v->mlp_ratio * v->width / whole.tp_size;
    p->sp = whole.sequence_parallel && whole.tp_size > 1;
    p->tokens_local = p->sp ? p->tokens / whole.tp_size : p->tokens;

    m->part = whole;
    m->whole_layers = v->depth + 2;
    int last = whole.first_layer + whole.n_layers; /* one past the part's last layer */
    p->has_embed = whole.first_layer == 0;
    p->has_head = last == m->whole_layers;
    p->b0 = whole.first_layer > 0 ? whole.first_layer - 1 : 0;
    p->b1 = last - 1 < v->depth ? last - 1 : v->depth;
    vit_layout(m, init);
    sb_status st = SB_OK;
    if ((st = be->alloc((void **)&m->params, m->n_params * sizeof(float))) ||
        (st = be->alloc((void **)&m->grads, m->n_params * sizeof(float))) ||
        (st = sb_vit_slots_alloc(m)) || (whole.split_backward && (st = split_alloc(m))) ||
        (whole.accumulate && (st = sb_vit_acc_alloc(m))) ||
        (st = vit_init_params(m, init, cfg->seed))) {
        free(init);
        vit_destroy(m);
        return st;
    }
    free(init);
    /* --precision bf16|fp16: every layer rounds what it writes (vit_pass.c,
     * vit_sp.c), and the parameters are 16-bit from the start */
    sb_model_set_precision(m, cfg);
    p->fused_attention = sb_vit_fused_attention(m); /* the backend and precision are set */
    sb_vit_qkv_layout(m);
    sb_model_round(m, m->params, m->n_params);
    m->activation_bytes = p->alloc_bytes; /* with the accumulation buffer, if allocated */
    m->block_activation_bytes = p->block_bytes;
    m->ops = &sb_workload_vit;
    *out = m;
    return SB_OK;
}

static sb_status vit_create(const struct sb_config *cfg, const struct sb_backend_ops *be,
                            int max_batch, struct sb_model **out)
{
    return vit_create_part(cfg, be, max_batch, NULL, out);
}

static sb_status vit_forward(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             float grad_scale, double *loss_sum)
{
    struct vit *p = m->impl;
    SB_TRY(sb_part_check_whole(m, "vit"));
    if (n <= 0 || n > p->cap)
        return sb_error(SB_ERR_INTERNAL, "vit: batch %d outside 1..%d", n, p->cap);
    sb_vit_bind_slot(m, 0);
    sb_vit_forward_logits(m, x, n);
    m->be->softmax_xent(p->logits, y, n, m->n_classes, grad_scale, p->dlogits, loss_sum);
    p->slot[0].n = n;
    return SB_OK;
}

static sb_status vit_backward(struct sb_model *m, sb_grad_ready_fn ready, void *ctx)
{
    SB_TRY(sb_part_check_whole(m, "vit"));
    sb_vit_backward(m, ready, ctx);
    return SB_OK;
}

/* Runs x in chunks of cap samples through forward (the kept activations are
 * overwritten: predict comes between steps). */
static sb_status vit_predict(struct sb_model *m, const float *x, const uint8_t *y, int n,
                             long *correct)
{
    struct vit *p = m->impl;
    SB_TRY(sb_part_check_whole(m, "vit"));
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "vit: batch %d outside 1..%d", n, m->max_batch);
    long total = 0;
    sb_vit_bind_slot(m, 0);
    for (int s = 0; s < n; s += p->cap) {
        int k = n - s < p->cap ? n - s : p->cap;
        long hits = 0;
        sb_vit_forward_logits(m, x + (size_t)s * m->in_dim, k);
        m->be->count_correct(p->logits, y + s, k, m->n_classes, &hits);
        total += hits;
    }
    *correct = total;
    return SB_OK;
}

const struct sb_workload_ops sb_workload_vit = {
    .name = "vit",
    .size = sb_vit_size,
    .create = vit_create,
    .create_part = vit_create_part,
    .part_size = sb_vit_part_size,
    .forward_part = sb_vit_forward_part,
    .part_output = sb_vit_part_output,
    .backward_part = sb_vit_backward_part,
    .backward_input_part = sb_vit_backward_input_part,
    .backward_weight_part = sb_vit_backward_weight_part,
    .forward = vit_forward,
    .backward = vit_backward,
    .predict = vit_predict,
    .destroy = vit_destroy,
};
