/* Unit tests for the split backward of the workloads' parts (workload.h's
 * backward_input_part and backward_weight_part: zb-h1's B and W, Qi et al.,
 * "Zero Bubble Pipeline Parallelism", ICLR 2024) on the cpu backend:
 *
 * - for mlp (fp32 and bf16) and cnn, each part of a 2- and a 3-part cut,
 *   MICRO micro-batches in MICRO slots: B of every micro-batch and W of
 *   each, in zb-h1's interleaving (W of a micro-batch after B of a later
 *   one, in micro-batch order), give the input gradients and the
 *   accumulated parameter gradients of backward_part (fused, in micro-batch
 *   order) byte for byte, and W reports each layer ready once, last first,
 *   as backward_part does;
 * - W before B, and B on a part built without split_backward, are refused;
 * - split_backward adds the kept pre-activation gradients to a slot's
 *   activation bytes (what the pipeline counts per live slot);
 * - the vit (its one slot, a shard of every layer, tp 1 and 2): B then W
 *   equals the fused backward byte for byte, B makes the fused backward's
 *   tp all-reduces of input gradients and W none.
 * Exits 0 when every test passes, non-zero otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/rng.h"
#include "core/status.h"
#include "workloads/workload.h"

#define BATCH 5 /* samples of one micro-batch */
#define MICRO 4 /* micro-batches, one slot each */
#define MAX_PARTS 3

static struct sb_config config(const char *workload, const int *hidden, int n_hidden,
                               enum sb_precision precision)
{
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.workload, sizeof cfg.workload, "%s", workload);
    for (int i = 0; i < n_hidden; i++) cfg.hidden[i] = hidden[i];
    cfg.n_hidden = n_hidden;
    cfg.seed = 42;
    cfg.precision = precision;
    return cfg;
}

static struct sb_model *create(const struct sb_config *cfg, int first, int n_layers, int split)
{
    const struct sb_workload_ops *ops = sb_workload_find(cfg->workload);
    assert_non_null(ops);
    struct sb_part part = {first, n_layers, 0, 1, MICRO, 0, split, 0};
    struct sb_model *m = NULL;
    assert_int_equal(ops->create_part(cfg, &sb_backend_cpu, BATCH, &part, &m), SB_OK);
    return m;
}

/* n x count uniform floats in [-1, 1) (seeded by `seed`). */
static float *random_floats(size_t count, uint64_t seed)
{
    float *v = malloc(count * sizeof *v);
    assert_non_null(v);
    struct sb_rng rng;
    sb_rng_seed(&rng, seed, 1);
    for (size_t i = 0; i < count; i++) v[i] = (float)(2 * sb_rng_uniform(&rng) - 1);
    return v;
}

/* The layers a backward reports ready, in order. */
struct ready {
    size_t offset[64];
    int n;
};

static void on_ready(void *ctx, size_t offset, size_t count)
{
    struct ready *r = ctx;
    (void)count;
    if (r->n < 64) r->offset[r->n++] = offset;
}

/* The part [first, first + n_layers) of cfg's model, fused against split:
 * the same forwards of MICRO micro-batches (random inputs, or images on the
 * first part; random output gradients on a part before the last), then the
 * fused backward of each in order against B of each with W of micro-batch
 * k run after B of k + 1 (the last W's after the last B). */
static void check_part(const struct sb_config *cfg, int first, int n_layers)
{
    struct sb_model *fused = create(cfg, first, n_layers, 0);
    struct sb_model *split = create(cfg, first, n_layers, 1);
    int last = first + n_layers == fused->whole_layers;
    size_t in = first == 0 ? (size_t)fused->in_dim : fused->layers[0].in_floats;
    size_t out = fused->layers[fused->n_layers - 1].out_floats;
    float *x[MICRO], *dout[MICRO], *din_f[MICRO], *din_s[MICRO];
    uint8_t y[MICRO][BATCH];
    for (int k = 0; k < MICRO; k++) {
        x[k] = random_floats((size_t)BATCH * in, 10 + (uint64_t)k);
        dout[k] = last ? NULL : random_floats((size_t)BATCH * out, 20 + (uint64_t)k);
        din_f[k] = first ? calloc((size_t)BATCH * in, sizeof(float)) : NULL;
        din_s[k] = first ? calloc((size_t)BATCH * in, sizeof(float)) : NULL;
        for (int i = 0; i < BATCH; i++) y[k][i] = (uint8_t)((k * 7 + i * 3) % 10);
    }
    double loss_f = 0, loss_s = 0;
    for (int k = 0; k < MICRO; k++) {
        assert_int_equal(fused->ops->forward_part(fused, k, x[k], y[k], BATCH, 0.05f, &loss_f),
                         SB_OK);
        assert_int_equal(split->ops->forward_part(split, k, x[k], y[k], BATCH, 0.05f, &loss_s),
                         SB_OK);
    }
    /* W before its B, and B on a part without the split's state: refused. */
    assert_int_equal(split->ops->backward_weight_part(split, 0, 0, NULL, NULL), SB_ERR_INTERNAL);
    assert_int_equal(fused->ops->backward_input_part(fused, 0, dout[0], din_f[0]),
                     SB_ERR_INTERNAL);
    struct ready rf = {0}, rs = {0};
    for (int k = 0; k < MICRO; k++)
        assert_int_equal(fused->ops->backward_part(fused, k, dout[k], din_f[k], k > 0, on_ready,
                                                   &rf),
                         SB_OK);
    for (size_t i = 0; i < split->n_params; i++) split->grads[i] = 1e30f; /* stale */
    int next_w = 0;
    for (int k = 0; k < MICRO; k++) {
        assert_int_equal(split->ops->backward_input_part(split, k, dout[k], din_s[k]), SB_OK);
        if (k >= 1) {
            assert_int_equal(split->ops->backward_weight_part(split, next_w, next_w > 0,
                                                              on_ready, &rs),
                             SB_OK);
            next_w++;
        }
    }
    for (; next_w < MICRO; next_w++)
        assert_int_equal(split->ops->backward_weight_part(split, next_w, next_w > 0, on_ready,
                                                          &rs),
                         SB_OK);
    for (int k = 0; k < MICRO; k++)
        if (din_f[k])
            assert_memory_equal(din_f[k], din_s[k], (size_t)BATCH * in * sizeof(float));
    assert_memory_equal(fused->grads, split->grads, fused->n_params * sizeof(float));
    assert_int_equal(rf.n, rs.n);
    assert_int_equal(rs.n, MICRO * fused->n_layers);
    assert_memory_equal(rf.offset, rs.offset, (size_t)rf.n * sizeof rf.offset[0]);
    /* A W twice is refused: its slot's kept gradients are spent. */
    assert_int_equal(split->ops->backward_weight_part(split, 0, 1, NULL, NULL), SB_ERR_INTERNAL);
    /* The kept gradients are activation bytes of the part (none more for the
     * model's last layer alone: W reads its dlogits, kept anyway). */
    if (n_layers > 1 || !last) assert_true(split->activation_bytes > fused->activation_bytes);
    else assert_int_equal(split->activation_bytes, fused->activation_bytes);
    for (int k = 0; k < MICRO; k++) {
        free(x[k]);
        free(dout[k]);
        free(din_f[k]);
        free(din_s[k]);
    }
    fused->ops->destroy(fused);
    split->ops->destroy(split);
}

/* Every part of the cut at cuts[0..n) (first layers) of cfg's model. */
static void check_cut(const struct sb_config *cfg, const int *cuts, int n)
{
    const struct sb_workload_ops *ops = sb_workload_find(cfg->workload);
    struct sb_model *whole = NULL;
    assert_int_equal(ops->create(cfg, &sb_backend_cpu, 1, &whole), SB_OK);
    int layers = whole->n_layers;
    whole->ops->destroy(whole);
    for (int k = 0; k < n; k++) {
        int end = k + 1 < n ? cuts[k + 1] : layers;
        check_part(cfg, cuts[k], end - cuts[k]);
    }
}

static void test_mlp(void **state)
{
    (void)state;
    struct sb_config cfg = config("mlp", (int[]){64, 32, 32}, 3, SB_PRECISION_FP32);
    check_cut(&cfg, (int[]){0}, 1);
    check_cut(&cfg, (int[]){0, 2}, 2);
    check_cut(&cfg, (int[]){0, 1, 3}, 3);
    struct sb_config bf16 = config("mlp", (int[]){64, 32, 32}, 3, SB_PRECISION_BF16);
    check_cut(&bf16, (int[]){0, 1, 3}, 3);
}

static void test_cnn(void **state)
{
    (void)state;
    struct sb_config cfg = config("cnn", NULL, 0, SB_PRECISION_FP32);
    check_cut(&cfg, (int[]){0}, 1);
    check_cut(&cfg, (int[]){0, 2}, 2); /* convolutions | dense */
    check_cut(&cfg, (int[]){0, 1, 3}, 3); /* conv1 | conv2, fc1 | fc2, fc3 */
}

/* Counts the tp hook's all-reduces (and sums nothing: fused and split get
 * the same no-op, so their results stay comparable byte for byte). */
static void count_allreduce(void *ctx, float *buf, size_t count)
{
    (void)buf;
    (void)count;
    ++*(int *)ctx;
}

/* The vit (one slot, a shard of every layer): B then W against the fused
 * backward, byte for byte, the ready calls the same; B makes the fused
 * backward's tp all-reduces of input gradients, W none. Under bf16 both
 * round alike: the gradients reported ready are bf16 values. */
static void check_vit(int tp_size, enum sb_precision precision)
{
    struct sb_config cfg = config("vit", NULL, 0, precision);
    cfg.vit = (struct sb_vit_config){.patch = 7, .width = 32, .depth = 2, .heads = 4,
                                     .mlp_ratio = 2};
    cfg.batch = BATCH;
    const struct sb_workload_ops *ops = sb_workload_find("vit");
    struct sb_model *fused = NULL, *split = NULL;
    struct sb_model *whole = NULL;
    assert_int_equal(ops->create(&cfg, &sb_backend_cpu, BATCH, &whole), SB_OK);
    struct sb_part part = {0, whole->n_layers, 0, tp_size, 1, 0, 0, 0};
    whole->ops->destroy(whole);
    assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &part, &fused), SB_OK);
    part.split_backward = 1;
    assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, BATCH, &part, &split), SB_OK);
    int calls_f = 0, calls_s = 0;
    fused->tp_allreduce = split->tp_allreduce = count_allreduce;
    fused->tp_ctx = &calls_f;
    split->tp_ctx = &calls_s;
    float *x = random_floats((size_t)BATCH * fused->in_dim, 3);
    uint8_t y[BATCH] = {1, 7, 3, 0, 9};
    double loss_f = 0, loss_s = 0;
    assert_int_equal(fused->ops->forward_part(fused, 0, x, y, BATCH, 0.2f, &loss_f), SB_OK);
    assert_int_equal(split->ops->forward_part(split, 0, x, y, BATCH, 0.2f, &loss_s), SB_OK);
    int fwd = calls_f;
    assert_int_equal(split->ops->backward_weight_part(split, 0, 0, NULL, NULL), SB_ERR_INTERNAL);
    assert_int_equal(fused->ops->backward_input_part(fused, 0, NULL, NULL), SB_ERR_INTERNAL);
    struct ready rf = {0}, rs = {0};
    assert_int_equal(fused->ops->backward_part(fused, 0, NULL, NULL, 0, on_ready, &rf), SB_OK);
    for (size_t i = 0; i < split->n_params; i++) split->grads[i] = 1e30f; /* stale */
    assert_int_equal(split->ops->backward_input_part(split, 0, NULL, NULL), SB_OK);
    assert_int_equal(rs.n, 0);
    int after_b = calls_s;
    assert_int_equal(split->ops->backward_weight_part(split, 0, 0, on_ready, &rs), SB_OK);
    assert_int_equal(calls_s, after_b);                  /* W: no collective */
    assert_int_equal(calls_s - fwd, calls_f - fwd);      /* B: the fused backward's */
    if (tp_size > 1) assert_int_equal(calls_f - fwd, 2 * cfg.vit.depth);
    assert_memory_equal(fused->grads, split->grads, fused->n_params * sizeof(float));
    for (size_t i = 0; precision == SB_PRECISION_BF16 && i < split->n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &split->grads[i], sizeof bits);
        assert_int_equal(bits & 0xFFFFu, 0); /* a bf16 value */
    }
    assert_int_equal(rf.n, rs.n);
    assert_int_equal(rs.n, fused->n_layers);
    assert_memory_equal(rf.offset, rs.offset, (size_t)rf.n * sizeof rf.offset[0]);
    assert_true(split->activation_bytes > fused->activation_bytes);
    free(x);
    fused->ops->destroy(fused);
    split->ops->destroy(split);
}

static void test_vit(void **state)
{
    (void)state;
    check_vit(1, SB_PRECISION_FP32);
    check_vit(2, SB_PRECISION_FP32);
    check_vit(1, SB_PRECISION_BF16);
    check_vit(2, SB_PRECISION_BF16);
    /* Not with sequence parallelism. */
    struct sb_config cfg = config("vit", NULL, 0, SB_PRECISION_FP32);
    cfg.vit = (struct sb_vit_config){.patch = 4, .width = 32, .depth = 2, .heads = 4,
                                     .mlp_ratio = 2}; /* 50 tokens: tp 2 divides them */
    cfg.batch = BATCH;
    struct sb_part sp = {0, 4, 0, 2, 1, 1, 1, 0};
    struct sb_model *m = NULL;
    assert_int_equal(sb_workload_find("vit")->create_part(&cfg, &sb_backend_cpu, BATCH, &sp, &m),
                     SB_ERR_USAGE);
    assert_non_null(strstr(sb_error_message(), "--sequence-parallel"));
    sp.split_backward = 0; /* and it is the split that is refused */
    assert_int_equal(sb_workload_find("vit")->create_part(&cfg, &sb_backend_cpu, BATCH, &sp, &m),
                     SB_OK);
    m->ops->destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_cnn),
        cmocka_unit_test(test_vit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
