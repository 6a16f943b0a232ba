/* Unit tests for the vit workload's tensor-parallel shards
 * (workloads/vit.c create_part, forward_part, backward_part) on the cpu
 * backend:
 *
 * - a small ViT split over tp = 2 and 4 ranks (the shards run in threads
 *   of this process; the tp hook sums their buffers in rank order) gives
 *   the whole model's logits, loss and gradients within 1e-6 (relative
 *   to the largest gradient of the layer; each
 *   shard's gradient against the matching slice of the whole model's: q,
 *   k, v and fc1 by rows, proj and fc2 by columns, the rest whole), and
 *   each shard's initial parameters are exactly its slice;
 * - the hook runs 2 times per block forward and 2 backward, each over
 *   b x s x h floats (Megatron-LM's g after proj and fc2, f before q/k/v
 *   and fc1);
 * - every split tensor of a shard is exactly 1/T of the whole tensor and
 *   the replicated ones are whole; the shard's parameters equal the
 *   part_size formula, its activation bytes and one block's are within 1 %
 *   of it (docs/tensor.md);
 * - --tp not dividing the heads or the MLP's hidden width is refused,
 *   naming --tp; a part outside the model is refused;
 * - pipeline stages: the vit cut into 2 and 3 parts of fewer layers (the
 *   embedding alone, blocks, a block with the head, the head alone), with 4
 *   slots, tp 1 and 2, run part by part (all forwards, then the backwards
 *   in micro-batch order, each part's input gradient handed to the part
 *   before, accumulated from the second micro-batch on; the fused backward,
 *   and the split one: every input half, then the weight halves) gives the
 *   loss and every gradient byte for byte as the whole model (its tp
 *   shard) accumulating the same micro-batches one at a time, also with
 *   sequence parallelism at tp 2 (fused backward; the same
 *   operations per tensor in the same order: only exact copies differ);
 *   each part's parameters equal the part_size formula, its activation
 *   bytes within 1 % (the accumulation buffer included: the parts declare
 *   part.accumulate and allocate it at create_part, counted then and by
 *   part_size; the whole model allocates it on first use and its
 *   activation_bytes grow by exactly 4 bytes a parameter then).
 * Exits 0 when every test passes, non-zero otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/rng.h"
#include "core/status.h"
#include "workloads/workload.h"

#define BATCH 3
#define MAX_TP 4
#define TOL 1e-6

/* A small ViT: patch 7 (16 patches + the class token: s = 17), width 32,
 * 4 heads, depth 2, MLP ratio 2. */
static int sp_patch; /* nonzero: the patch size (sequence parallelism needs tp | tokens) */

static struct sb_config config(void)
{
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.workload, sizeof cfg.workload, "vit");
    cfg.vit = (struct sb_vit_config){.patch = sp_patch ? sp_patch : 7, .width = 32, .depth = 2,
                                     .heads = 4, .mlp_ratio = 2};
    cfg.batch = BATCH;
    cfg.seed = 42;
    return cfg;
}

static void batch(int n, float *x, uint8_t *y)
{
    struct sb_rng rng;
    sb_rng_seed(&rng, 7, 1);
    for (size_t i = 0; i < (size_t)n * 784; i++) x[i] = (float)sb_rng_uniform(&rng);
    for (int i = 0; i < n; i++) y[i] = (uint8_t)sb_rng_below(&rng, 10);
}

struct tp_group {
    int size;
    pthread_barrier_t barrier;
    float *bufs[MAX_TP];
    float *sum;
    size_t calls, floats; /* hook calls, and the floats of each (all equal) */
    const float *cbufs[MAX_TP]; /* the sequence-parallel hooks' inputs */
};

struct shard {
    struct tp_group *g;
    int rank;
    struct sb_model *m;
    const float *x;
    const uint8_t *y;
    double loss;
    sb_status st;
};

static void hook(void *ctx, float *buf, size_t count)
{
    struct shard *s = ctx;
    struct tp_group *g = s->g;
    g->bufs[s->rank] = buf;
    pthread_barrier_wait(&g->barrier);
    if (s->rank == 0) {
        g->sum = malloc(count * sizeof *g->sum);
        memcpy(g->sum, g->bufs[0], count * sizeof *g->sum);
        for (int r = 1; r < g->size; r++)
            for (size_t i = 0; i < count; i++) g->sum[i] += g->bufs[r][i];
        if (g->floats && g->floats != count) g->floats = (size_t)-1;
        else g->floats = count;
        g->calls++;
    }
    pthread_barrier_wait(&g->barrier);
    memcpy(buf, g->sum, count * sizeof *buf);
    pthread_barrier_wait(&g->barrier);
    if (s->rank == 0) free(g->sum);
}

/* The sequence-parallel hooks (workload.h's sb_tp_allgather_fn and
 * sb_tp_reduce_scatter_fn) over the threads of the group, sums in rank
 * order. */
static void gather_hook(void *ctx, const float *shard, float *whole, size_t count)
{
    struct shard *s = ctx;
    struct tp_group *g = s->g;
    g->cbufs[s->rank] = shard;
    pthread_barrier_wait(&g->barrier);
    for (int r = 0; r < g->size; r++) memcpy(whole + r * count, g->cbufs[r], count * sizeof *whole);
    pthread_barrier_wait(&g->barrier);
}

static void scatter_hook(void *ctx, const float *whole, float *shard, size_t count)
{
    struct shard *s = ctx;
    struct tp_group *g = s->g;
    g->cbufs[s->rank] = whole;
    pthread_barrier_wait(&g->barrier);
    for (size_t i = 0; i < count; i++) {
        float sum = g->cbufs[0][s->rank * count + i];
        for (int r = 1; r < g->size; r++) sum += g->cbufs[r][s->rank * count + i];
        shard[i] = sum;
    }
    pthread_barrier_wait(&g->barrier);
}

static void *step(void *arg)
{
    struct shard *s = arg;
    s->st = s->m->ops->forward_part(s->m, 0, s->x, s->y, BATCH, 1.0f / BATCH, &s->loss);
    if (!s->st) s->st = s->m->ops->backward_part(s->m, 0, NULL, NULL, 0, NULL, NULL);
    return NULL;
}

static const struct sb_tensor_desc *find(const struct sb_model *w, const char *name)
{
    for (int i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return &w->tensors[i];
    return NULL;
}

/* Compares shard tensor t (rank r of size) with its slice of the whole
 * model's buffer, within tol of the largest value of its layer (0: byte
 * for byte); checks that a split tensor is exactly 1/size of the whole. */
static void check_slice(const struct sb_model *w, const float *whole, const struct sb_model *m,
                        const float *mine, int t, int r, int size, double tol)
{
    const struct sb_tensor_desc *d = &m->tensors[t], *e = find(w, d->name);
    assert_non_null(e);
    assert_int_equal(d->tp_split, e->tp_split);
    assert_int_equal(d->rows, e->rows);
    size_t rows = e->rows, cols = e->count / rows, r0 = 0, nr = rows, c0 = 0, nc = cols;
    if (d->tp_split == SB_TP_COLUMN) nr = rows / (size_t)size, r0 = (size_t)r * nr;
    if (d->tp_split == SB_TP_ROW) nc = cols / (size_t)size, c0 = (size_t)r * nc;
    assert_int_equal(d->count, nr * nc);
    if (d->tp_split != SB_TP_REPLICATED) assert_int_equal(d->count * (size_t)size, e->count);
    /* Relative to the largest value of the tensor's layer: the key biases'
     * exact gradient is zero (softmax ignores a constant per row), so theirs
     * is rounding noise of order 1e-10 on both sides. */
    const struct sb_layer_desc *L = &w->layers[e->layer];
    double scale = 0.0;
    for (size_t i = 0; i < L->count; i++)
        if (fabs(whole[L->offset + i]) > scale) scale = fabs(whole[L->offset + i]);
    for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < nc; j++) {
            double a = mine[d->offset + i * nc + j];
            double b = whole[e->offset + (r0 + i) * cols + c0 + j];
            if (tol == 0.0 ? a != b : fabs(a - b) > tol * scale)
                fail_msg("tp %d rank %d %s[%zu][%zu]: %.9g vs %.9g", size, r, d->name, i, j,
                         a, b);
        }
}

static void check_tp(int size)
{
    struct sb_config cfg = config();
    const struct sb_workload_ops *ops = sb_workload_find("vit");
    float x[BATCH * 784];
    uint8_t y[BATCH];
    batch(BATCH, x, y);
    struct sb_model *w = NULL;
    assert_int_equal(ops->create(&cfg, &sb_backend_cpu, BATCH, &w), SB_OK);
    double whole_loss = 0.0;
    assert_int_equal(w->ops->forward(w, x, y, BATCH, 1.0f / BATCH, &whole_loss), SB_OK);
    assert_int_equal(w->ops->backward(w, NULL, NULL), SB_OK);
    const float *logits = w->ops->part_output(w, 0);

    struct tp_group g = {.size = size};
    struct shard s[MAX_TP];
    pthread_t th[MAX_TP];
    pthread_barrier_init(&g.barrier, NULL, (unsigned)size);
    for (int r = 0; r < size; r++) {
        struct sb_part part = {0, w->n_layers, r, size, 1, 0, 0, 0};
        s[r] = (struct shard){&g, r, NULL, x, y, 0.0, SB_OK};
        assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &part, &s[r].m), SB_OK);
        s[r].m->tp_allreduce = hook;
        s[r].m->tp_ctx = &s[r];
        assert_int_equal(s[r].m->n_tensors, w->n_tensors);
        /* The ledger's formulas (docs/tensor.md): parameters exactly, the
         * activation bytes and a block's within 1 %. */
        struct sb_model_size f = ops->part_size(&cfg, BATCH, &part);
        assert_int_equal((size_t)f.n_params, s[r].m->n_params);
        assert_true(fabs(f.activation_bytes - (double)s[r].m->activation_bytes) <=
                    0.01 * f.activation_bytes);
        assert_true(s[r].m->block_activation_bytes > 0);
        assert_true(fabs(f.block_activation_bytes - (double)s[r].m->block_activation_bytes) <=
                    0.01 * f.block_activation_bytes);
        for (int t = 0; t < s[r].m->n_tensors; t++)
            check_slice(w, w->params, s[r].m, s[r].m->params, t, r, size, 0.0);
    }
    for (int r = 0; r < size; r++) assert_int_equal(pthread_create(&th[r], NULL, step, &s[r]), 0);
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
    /* 2 forward + 2 backward per block, each b x s x h floats */
    assert_int_equal(g.calls, 4 * cfg.vit.depth);
    assert_int_equal(g.floats, (size_t)BATCH * 17 * cfg.vit.width);
    for (int r = 0; r < size; r++) {
        assert_int_equal(s[r].st, SB_OK);
        assert_true(fabs(s[r].loss - whole_loss) <= TOL * whole_loss);
        const float *mine = s[r].m->ops->part_output(s[r].m, 0);
        for (int i = 0; i < BATCH * 10; i++)
            if (fabs(mine[i] - logits[i]) > TOL * (1.0 + fabs(logits[i])))
                fail_msg("tp %d rank %d logit %d: %.9g vs %.9g", size, r, i, mine[i], logits[i]);
        for (int t = 0; t < s[r].m->n_tensors; t++)
            check_slice(w, w->grads, s[r].m, s[r].m->grads, t, r, size, TOL);
        s[r].m->ops->destroy(s[r].m);
    }
    pthread_barrier_destroy(&g.barrier);
    w->ops->destroy(w);
}

static void test_vit_tensor_parallel(void **state)
{
    (void)state;
    sb_backend_cpu_set_threads(1);
    check_tp(2);
    check_tp(4);
}

static void test_vit_bad_shards(void **state)
{
    (void)state;
    struct sb_config cfg = config();
    const struct sb_workload_ops *ops = sb_workload_find("vit");
    struct sb_model *m = NULL;
    struct sb_part three = {0, 4, 0, 3, 1, 0, 0, 0}; /* 3 does not divide 4 heads */
    assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &three, &m), SB_ERR_USAGE);
    assert_non_null(strstr(sb_error_message(), "--tp"));
    assert_null(m);
    cfg.vit.heads = 8;
    cfg.vit.width = 24;
    cfg.vit.mlp_ratio = 1; /* hidden width 24: divides by 8 heads, 3 divides neither */
    struct sb_part eight = {0, 4, 0, 16, 1, 0, 0, 0};
    assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &eight, &m), SB_ERR_USAGE);
    cfg = config();
    struct sb_part outside = {3, 2, 0, 1, 1, 0, 0, 0}; /* layers 3..4 of 0..3 */
    assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &outside, &m), SB_ERR_USAGE);
    assert_null(m);
}

/* ---- pipeline stages: the vit cut into parts of fewer layers ---- */

#define MICRO 4 /* micro-batches, each BATCH samples */
#define MAX_PARTS 3

/* One tp rank's chain of parts (cut[i], cut[i + 1]) with MICRO slots, run as
 * a pipeline runs them: every micro-batch forward through the parts, then
 * every micro-batch backward from the last part to the first in
 * micro-batch order, the input gradient handed back, accumulated from the
 * second on (split: each backward as its input half, then every weight
 * half in order). n_parts 0: the whole model (or tp shard) in one slot,
 * forward then backward per micro-batch as single --microbatches runs it. */
struct chain {
    struct tp_group *g;
    int rank, size, n_parts, split, sp;
    const int *cut;
    struct sb_model *part[MAX_PARTS];
    size_t built_bytes[MAX_PARTS]; /* activation_bytes as created */
    struct shard hook_ctx; /* the tp hook's ctx (g, rank) */
    const float *x;
    const uint8_t *y;
    double loss;
    sb_status st;
};

static sb_status run_whole(struct chain *c, struct sb_model *m)
{
    for (int k = 0; k < MICRO; k++) {
        SB_TRY(m->ops->forward_part(m, 0, c->x + (size_t)k * BATCH * 784, c->y + k * BATCH, BATCH,
                                    1.0f / (BATCH * MICRO), &c->loss));
        SB_TRY(m->ops->backward_part(m, 0, NULL, NULL, k > 0, NULL, NULL));
    }
    return SB_OK;
}

static sb_status run_parts(struct chain *c)
{
    float *dbuf[2];
    const struct sb_config cfg = config();
    int side = 28 / cfg.vit.patch;
    /* the residual stream (n, s, h) */
    size_t stream = (size_t)BATCH * (size_t)(side * side + 1) * (size_t)cfg.vit.width;
    dbuf[0] = calloc(stream, sizeof(float));
    dbuf[1] = calloc(stream, sizeof(float));
    for (int k = 0; k < MICRO; k++) {
        const float *in = c->x + (size_t)k * BATCH * 784;
        for (int i = 0; i < c->n_parts; i++) {
            struct sb_model *m = c->part[i];
            SB_TRY(m->ops->forward_part(m, k, in, c->y + k * BATCH, BATCH,
                                        1.0f / (BATCH * MICRO), &c->loss));
            in = m->ops->part_output(m, k);
        }
    }
    for (int k = 0; k < MICRO; k++) {
        const float *dout = NULL;
        for (int i = c->n_parts - 1; i >= 0; i--) {
            struct sb_model *m = c->part[i];
            float *din = i > 0 ? dbuf[i % 2] : NULL;
            if (c->split) SB_TRY(m->ops->backward_input_part(m, k, dout, din));
            else SB_TRY(m->ops->backward_part(m, k, dout, din, k > 0, NULL, NULL));
            dout = din;
        }
    }
    for (int k = 0; c->split && k < MICRO; k++)
        for (int i = c->n_parts - 1; i >= 0; i--)
            SB_TRY(c->part[i]->ops->backward_weight_part(c->part[i], k, k > 0, NULL, NULL));
    free(dbuf[0]);
    free(dbuf[1]);
    return SB_OK;
}

static void *chain_main(void *arg)
{
    struct chain *c = arg;
    c->st = c->n_parts ? run_parts(c) : run_whole(c, c->part[0]);
    return NULL;
}

/* Builds rank `rank`'s models of chain c (n_parts 0: the whole model or
 * its tp shard, one slot). */
static void build_chain(struct chain *c)
{
    struct sb_config cfg = config();
    const struct sb_workload_ops *ops = sb_workload_find("vit");
    c->hook_ctx = (struct shard){c->g, c->rank, NULL, NULL, NULL, 0.0, SB_OK};
    int n = c->n_parts ? c->n_parts : 1;
    for (int i = 0; i < n; i++) {
        struct sb_part part = {0, cfg.vit.depth + 2, c->rank, c->size, 1, c->sp, 0, 0};
        if (c->n_parts) {
            part = (struct sb_part){c->cut[i], c->cut[i + 1] - c->cut[i], c->rank, c->size,
                                    MICRO, c->sp, c->split, 1};
        }
        assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &part, &c->part[i]),
                         SB_OK);
        struct sb_model *m = c->part[i];
        c->built_bytes[i] = m->activation_bytes;
        m->tp_allreduce = hook;
        if (c->sp) {
            m->tp_allgather = gather_hook;
            m->tp_reduce_scatter = scatter_hook;
        }
        m->tp_ctx = &c->hook_ctx;
        /* the ledger's formula: parameters exactly, activations within 1 % */
        struct sb_model_size f = ops->part_size(&cfg, BATCH, &part);
        assert_int_equal((size_t)f.n_params, m->n_params);
        if (fabs(f.activation_bytes - (double)m->activation_bytes) > 0.01 * f.activation_bytes)
            fail_msg("part %d (split %d, tp %d): activation bytes %zu, formula %.0f", i,
                     c->split, c->size, m->activation_bytes, f.activation_bytes);
    }
}

/* Every tensor of every part of `parts` equals the same tensor of `ref`
 * byte for byte: its parameters (the whole model's initial values) and its
 * accumulated gradients. */
static void check_same(const struct chain *ref, const struct chain *parts)
{
    const struct sb_model *w = ref->part[0];
    for (int i = 0; i < parts->n_parts; i++) {
        const struct sb_model *m = parts->part[i];
        for (int t = 0; t < m->n_tensors; t++) {
            const struct sb_tensor_desc *d = &m->tensors[t], *e = find(w, d->name);
            assert_non_null(e);
            assert_int_equal(d->count, e->count);
            assert_string_equal(m->layers[d->layer].name, w->layers[e->layer].name);
            assert_memory_equal(m->params + d->offset, w->params + e->offset,
                                d->count * sizeof(float));
            for (size_t j = 0; j < d->count; j++)
                if (memcmp(&m->grads[d->offset + j], &w->grads[e->offset + j], sizeof(float)))
                    fail_msg("tp %d rank %d part %d %s[%zu]: %.9g vs %.9g", parts->size,
                             parts->rank, i, d->name, j, m->grads[d->offset + j],
                             w->grads[e->offset + j]);
        }
    }
}

/* Runs `size` tp ranks of chain template c (threads), each to completion. */
static void run_ranks(struct chain *c, int size)
{
    pthread_t th[MAX_TP];
    for (int r = 0; r < size; r++)
        assert_int_equal(pthread_create(&th[r], NULL, chain_main, &c[r]), 0);
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < size; r++) assert_int_equal(c[r].st, SB_OK);
}

static void destroy_chain(struct chain *c)
{
    for (int i = 0; i < MAX_PARTS; i++)
        if (c->part[i]) c->part[i]->ops->destroy(c->part[i]);
}

/* The vit cut at `cut` (n_parts parts) over tp `size` ranks, MICRO slots,
 * against the whole model (its tp shards) accumulating the same
 * micro-batches one at a time: the same gradients byte for byte, the same
 * loss. */
static void check_cut(const int *cut, int n_parts, int size, int split, int sp)
{
    float x[MICRO * BATCH * 784];
    uint8_t y[MICRO * BATCH];
    batch(MICRO * BATCH, x, y);
    struct tp_group g = {.size = size}, gp = {.size = size};
    pthread_barrier_init(&g.barrier, NULL, (unsigned)size);
    pthread_barrier_init(&gp.barrier, NULL, (unsigned)size);
    struct chain ref[MAX_TP], parts[MAX_TP];
    for (int r = 0; r < size; r++) {
        ref[r] = (struct chain){.g = &g, .rank = r, .size = size, .sp = sp, .x = x, .y = y};
        parts[r] = (struct chain){.g = &gp, .rank = r, .size = size, .n_parts = n_parts,
                                  .split = split, .sp = sp, .cut = cut, .x = x, .y = y};
        build_chain(&ref[r]);
        build_chain(&parts[r]);
    }
    run_ranks(ref, size);
    run_ranks(parts, size);
    for (int r = 0; r < size; r++) {
        /* the accumulation buffer: the parts (part.accumulate) allocated it
         * at create_part, counted there (and in part_size, checked there);
         * the whole model on first use, counted then: 4 bytes a parameter */
        for (int i = 0; i < n_parts; i++)
            assert_int_equal(parts[r].part[i]->activation_bytes, parts[r].built_bytes[i]);
        assert_int_equal(ref[r].part[0]->activation_bytes,
                         ref[r].built_bytes[0] + 4 * ref[r].part[0]->n_params);
        assert_memory_equal(&ref[r].loss, &parts[r].loss, sizeof(double));
        check_same(&ref[r], &parts[r]);
        destroy_chain(&ref[r]);
        destroy_chain(&parts[r]);
    }
    pthread_barrier_destroy(&g.barrier);
    pthread_barrier_destroy(&gp.barrier);
}

/* Depth 2: layers embed, block0, block1, head. Cuts into 2 and 3 parts
 * (the first part the embedding alone, a middle part of blocks, a last
 * part of a block and the head), tp 1 and 2, fused and split backward. */
static void test_vit_pipeline_parts(void **state)
{
    (void)state;
    sb_backend_cpu_set_threads(1);
    static const int two[] = {0, 2, 4}, three[] = {0, 1, 3, 4}, head_alone[] = {0, 3, 4};
    for (int split = 0; split <= 1; split++) {
        check_cut(two, 2, 1, split, 0);
        check_cut(three, 3, 1, split, 0);
        check_cut(head_alone, 2, 1, split, 0);
        check_cut(two, 2, 2, split, 0);
        check_cut(three, 3, 2, split, 0);
    }
    /* sequence parallelism (fused backward only): patch 4, 50 tokens, tp 2 */
    sp_patch = 4;
    check_cut(two, 2, 2, 0, 1);
    check_cut(three, 3, 2, 0, 1);
    sp_patch = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vit_tensor_parallel),
        cmocka_unit_test(test_vit_bad_shards),
        cmocka_unit_test(test_vit_pipeline_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
