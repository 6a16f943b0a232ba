/* Finite-difference gradient checks of the workloads on the cpu backend.
 *
 * For mlp (one and two hidden layers), cnn and vit (depth 2, width 16, 2
 * heads, patch 7; and 1 head, whose head dim 16 takes the cpu's fused
 * attention): a tiny random batch, the
 * analytic gradient (forward with grad_scale = 1/n, then backward) against
 * central differences of the mean loss, (L(p + eps) - L(p - eps)) / 2eps,
 * for a sample of entries of EVERY tensor (an entry whose eps-interval holds
 * a ReLU or max-pool kink must match the one-sided difference on its smooth
 * side instead). Also: backward reports each
 * layer ready exactly once, last layer first, with ranges that tile the
 * buffer; backward overwrites stale gradients; the checker catches a
 * deliberately wrong gradient; and the conv/pool backend ops on hand-worked
 * inputs. Exits 0 when every test passes, non-zero otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/rng.h"
#include "workloads/workload.h"

#define BATCH 3           /* samples in the checked batch */
#define MAX_BATCH 4       /* the model accepts more than it is given */
#define SAMPLES 10        /* checked entries per tensor (plus first and last) */
#ifndef EPS
#define EPS 1e-3          /* finite-difference step */
#endif
#define REL_TOL 1e-2      /* |analytic - numeric| <= REL_TOL * scale + ABS_TOL */
#define ABS_TOL 2e-4
#define MAX_READY 16

/* A model with its random batch and the analytic gradient (host copy). */
struct fixture {
    struct sb_model *m;
    float *x;             /* (BATCH, in_dim) */
    uint8_t y[BATCH];
    float *grad;          /* (n_params) analytic gradient of the mean loss */
    size_t ready_off[MAX_READY], ready_count[MAX_READY];
    int n_ready;
};

static void record_ready(void *ctx, size_t offset, size_t count)
{
    struct fixture *f = ctx;
    if (f->n_ready < MAX_READY) {
        f->ready_off[f->n_ready] = offset;
        f->ready_count[f->n_ready] = count;
    }
    f->n_ready++;
}

/* The vit's heads: 2 (head dim 8: the batched attention), 1 in
 * test_vit_fused (head dim 16: the cpu's fused attention where the CPU has
 * AVX-512). */
static int vit_heads = 2;

/* Builds workload `name` with mlp widths hidden[n_hidden], a random batch
 * and its analytic gradient. Stale values are put in the gradient buffer
 * first, so a backward that accumulates instead of overwriting fails. */
static void fixture_init(struct fixture *f, const char *name, const int *hidden, int n_hidden)
{
    memset(f, 0, sizeof *f);
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.workload, sizeof cfg.workload, "%s", name);
    for (int i = 0; i < n_hidden; i++) cfg.hidden[i] = hidden[i];
    cfg.n_hidden = n_hidden;
    cfg.vit = (struct sb_vit_config){.patch = 7, .width = 16, .depth = 2, .heads = vit_heads,
                                     .mlp_ratio = 2};
    cfg.seed = 42;
    const struct sb_workload_ops *ops = sb_workload_find(name);
    assert_non_null(ops);
    assert_int_equal(ops->create(&cfg, &sb_backend_cpu, MAX_BATCH, &f->m), SB_OK);
    struct sb_model *m = f->m;

    struct sb_rng rng;
    sb_rng_seed(&rng, 7, 1);
    f->x = malloc((size_t)BATCH * m->in_dim * sizeof *f->x);
    f->grad = malloc(m->n_params * sizeof *f->grad);
    assert_non_null(f->x);
    assert_non_null(f->grad);
    for (size_t i = 0; i < (size_t)BATCH * m->in_dim; i++) f->x[i] = (float)sb_rng_uniform(&rng);
    for (int i = 0; i < BATCH; i++) f->y[i] = (uint8_t)sb_rng_below(&rng, 10);

    for (size_t i = 0; i < m->n_params; i++) m->grads[i] = 1e30f; /* cpu: host memory */
    double loss = 0.0;
    assert_int_equal(m->ops->forward(m, f->x, f->y, BATCH, 1.0f / BATCH, &loss), SB_OK);
    assert_true(isfinite(loss) && loss > 0.0);
    assert_int_equal(m->ops->backward(m, record_ready, f), SB_OK);
    memcpy(f->grad, m->grads, m->n_params * sizeof *f->grad);
}

static void fixture_free(struct fixture *f)
{
    if (f->m) f->m->ops->destroy(f->m);
    free(f->x);
    free(f->grad);
}

/* Mean cross-entropy over the batch at the model's current parameters. */
static double mean_loss(struct fixture *f)
{
    double loss = 0.0;
    assert_int_equal(f->m->ops->forward(f->m, f->x, f->y, BATCH, 1.0f / BATCH, &loss), SB_OK);
    return loss / BATCH;
}

/* One compared entry: the analytic value and three finite differences. */
struct fd_entry {
    double analytic, central, up, down; /* up: (L(p+e) - L(p)) / e; down: (L(p) - L(p-e)) / e */
};

/* 1 when the analytic value agrees with the central difference; else 1 when
 * it agrees with one one-sided difference while the two one-sided slopes
 * differ by at least the central mismatch: a ReLU or max-pool kink lies
 * within eps on the other side (float32 rules out an eps small enough to
 * avoid them), and *kink is set; else 0. */
static int entry_agrees(const struct fd_entry *e, int *kink)
{
    double scale = fmax(fabs(e->central), fabs(e->analytic));
    double miss = fabs(e->analytic - e->central);
    *kink = 0;
    if (miss <= REL_TOL * scale + ABS_TOL) return 1;
    double one_sided = fmin(fabs(e->analytic - e->up), fabs(e->analytic - e->down));
    if (fabs(e->up - e->down) >= miss && one_sided <= REL_TOL * scale + 2 * ABS_TOL) {
        *kink = 1;
        return 1;
    }
    return 0;
}

/* Compares `grad` with finite differences at the first, last and SAMPLES
 * random entries of every tensor; prints each mismatch. Returns the number
 * of mismatches (bad_by_tensor[t], when not NULL, those of tensor t);
 * *checked receives the number of entries compared and *kinks the number
 * that agreed only on one side of a kink. */
static int check_gradient(struct fixture *f, const float *grad, int *checked, int *kinks,
                          int *bad_by_tensor)
{
    struct sb_model *m = f->m;
    struct sb_rng rng;
    sb_rng_seed(&rng, 99, 2);
    int bad = 0;
    *checked = *kinks = 0;
    double l_mid = mean_loss(f);
    for (int t = 0; t < m->n_tensors; t++) {
        const struct sb_tensor_desc *d = &m->tensors[t];
        for (int s = 0; s < SAMPLES + 2; s++) {
            size_t i = s == 0   ? 0
                       : s == 1 ? d->count - 1
                                : sb_rng_below(&rng, (uint32_t)d->count);
            float *p = m->params + d->offset + i; /* cpu backend: host memory */
            float saved = *p;
            float up = saved + (float)EPS, down = saved - (float)EPS;
            *p = up;
            double l_up = mean_loss(f);
            *p = down;
            double l_down = mean_loss(f);
            *p = saved;
            struct fd_entry e = {
                .analytic = grad[d->offset + i],
                .central = (l_up - l_down) / ((double)up - (double)down),
                .up = (l_up - l_mid) / ((double)up - (double)saved),
                .down = (l_mid - l_down) / ((double)saved - (double)down),
            };
            int kink;
            if (!entry_agrees(&e, &kink)) {
                printf("# %s[%zu]: analytic %.6g, central %.6g (one-sided %.6g, %.6g)\n",
                       d->name, i, e.analytic, e.central, e.up, e.down);
                bad++;
                if (bad_by_tensor) bad_by_tensor[t]++;
            }
            *kinks += kink;
            (*checked)++;
        }
    }
    return bad;
}

/* Backward called ready once per layer (weight + bias tensors), last layer
 * first, so the ranges tile [0, n_params) from the end. */
static void assert_ready_order(const struct fixture *f)
{
    const struct sb_model *m = f->m;
    int layers = m->n_tensors / 2;
    assert_int_equal(f->n_ready, layers);
    size_t end = m->n_params;
    for (int i = 0; i < layers; i++) {
        const struct sb_tensor_desc *w = &m->tensors[2 * (layers - 1 - i)];
        const struct sb_tensor_desc *b = w + 1;
        assert_int_equal(f->ready_off[i], w->offset);
        assert_int_equal(f->ready_count[i], w->count + b->count);
        assert_int_equal(f->ready_off[i] + f->ready_count[i], end);
        end = f->ready_off[i];
    }
    assert_int_equal(end, 0);
}

/* Backward called ready once per entry of the layer table, last first,
 * with each layer's range; the layers tile [0, n_params) in order and
 * their tensors are consecutive. */
static void assert_ready_layers(const struct fixture *f)
{
    const struct sb_model *m = f->m;
    assert_true(m->n_layers > 0 && m->n_layers <= MAX_READY);
    assert_int_equal(f->n_ready, m->n_layers);
    size_t end = m->n_params;
    int tensors = m->n_tensors;
    for (int i = 0; i < m->n_layers; i++) {
        const struct sb_layer_desc *l = &m->layers[m->n_layers - 1 - i];
        assert_int_equal(f->ready_off[i], l->offset);
        assert_int_equal(f->ready_count[i], l->count);
        assert_int_equal(l->offset + l->count, end);
        assert_int_equal(l->first_tensor + l->n_tensors, tensors);
        for (int t = l->first_tensor; t < tensors; t++)
            assert_int_equal(m->tensors[t].layer, m->n_layers - 1 - i);
        end = l->offset;
        tensors = l->first_tensor;
    }
    assert_int_equal(end, 0);
    assert_int_equal(tensors, 0);
}

static void check_workload(const char *name, const int *hidden, int n_hidden)
{
    struct fixture f;
    fixture_init(&f, name, hidden, n_hidden);
    if (f.m->n_layers) assert_ready_layers(&f);
    else assert_ready_order(&f);
    int checked = 0, kinks = 0;
    int bad = check_gradient(&f, f.grad, &checked, &kinks, NULL);
    printf("# %s: %d of %d sampled gradient entries mismatch, %d next to a kink\n", name, bad,
           checked, kinks);
    assert_int_equal(bad, 0);
    assert_int_equal(checked, f.m->n_tensors * (SAMPLES + 2));
    assert_true(kinks * 4 <= checked); /* mostly smooth: the check is not vacuous */
    fixture_free(&f);
}

static void test_mlp_one_hidden_layer(void **state)
{
    (void)state;
    const int hidden[] = {16};
    check_workload("mlp", hidden, 1);
}

static void test_mlp_two_hidden_layers(void **state)
{
    (void)state;
    const int hidden[] = {16, 12};
    check_workload("mlp", hidden, 2);
}

static void test_cnn(void **state)
{
    (void)state;
    check_workload("cnn", NULL, 0);
}

static void test_vit(void **state)
{
    (void)state;
    check_workload("vit", NULL, 0);
}

static void test_vit_fused(void **state)
{
    (void)state;
    vit_heads = 1;
    check_workload("vit", NULL, 0);
    vit_heads = 2;
}

/* The check can fail: one wrong entry per tensor (the first, which is
 * always sampled) gives a mismatch in every tensor. */
static void test_wrong_gradient_is_detected(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, "cnn", NULL, 0);
    for (int t = 0; t < f.m->n_tensors; t++) {
        float *g = &f.grad[f.m->tensors[t].offset];
        *g += 0.05f * fabsf(*g) + 0.01f;
    }
    int checked = 0, kinks = 0, bad_by_tensor[16] = {0};
    assert_true(f.m->n_tensors <= 16);
    assert_true(check_gradient(&f, f.grad, &checked, &kinks, bad_by_tensor) > 0);
    for (int t = 0; t < f.m->n_tensors; t++) assert_true(bad_by_tensor[t] >= 1);
    fixture_free(&f);
}

/* LeNet-5's layout: PyTorch's names, shapes and 44,426 parameters. */
static void test_cnn_layout(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, "cnn", NULL, 0);
    static const char *const names[] = {"conv1.weight", "conv1.bias", "conv2.weight",
                                        "conv2.bias",   "fc1.weight", "fc1.bias",
                                        "fc2.weight",   "fc2.bias",   "fc3.weight",
                                        "fc3.bias"};
    static const size_t counts[] = {150, 6, 2400, 16, 30720, 120, 10080, 84, 840, 10};
    assert_int_equal(f.m->n_tensors, 10);
    size_t off = 0;
    for (int t = 0; t < 10; t++) {
        assert_string_equal(f.m->tensors[t].name, names[t]);
        assert_int_equal(f.m->tensors[t].offset, off);
        assert_int_equal(f.m->tensors[t].count, counts[t]);
        off += counts[t];
        /* Kaiming-uniform bound 1/sqrt(fan_in) */
        static const double fan_in[] = {25, 150, 256, 120, 84};
        double bound = 1.0 / sqrt(fan_in[t / 2]);
        for (size_t i = 0; i < counts[t]; i++)
            assert_true(fabs(f.m->params[f.m->tensors[t].offset + i]) <= bound);
    }
    assert_int_equal(f.m->n_params, 44426);
    assert_int_equal(f.m->in_dim, 784);
    fixture_free(&f);
}

/* im2col/col2im on x (1, 2, 3, 3) = 0..17 with k = 2: oh = ow = 2. */
static void test_im2col_col2im(void **state)
{
    (void)state;
    float x[18], cols[4 * 8], dx[18];
    for (int i = 0; i < 18; i++) x[i] = (float)i;
    sb_backend_cpu.im2col(x, 1, 2, 3, 3, 2, cols);
    /* row (oy=1, ox=0): channel 0 window {3,4,6,7}, channel 1 {12,13,15,16} */
    const float row2[8] = {3, 4, 6, 7, 12, 13, 15, 16};
    assert_memory_equal(cols + 2 * 8, row2, sizeof row2);
    for (int i = 0; i < 32; i++) cols[i] = 1.0f;
    for (int i = 0; i < 18; i++) dx[i] = 99.0f; /* overwritten, not accumulated */
    sb_backend_cpu.col2im(cols, 1, 2, 3, 3, 2, dx);
    /* each pixel receives one per window covering it: corners 1, edges 2, centre 4 */
    const float cover[9] = {1, 2, 1, 2, 4, 2, 1, 2, 1};
    for (int i = 0; i < 18; i++) assert_true(dx[i] == cover[i % 9]);
}

/* max-pool 2x2 on (1, 1, 4, 5): floor drops the last column; ties pick the
 * first element in row-major window order. */
static void test_maxpool2(void **state)
{
    (void)state;
    const float x[20] = {1, 5, 2, 2, 9,
                         3, 0, 2, 2, 9,
                         -1, -2, 7, 0, 9,
                         -3, -4, 0, 8, 9};
    float y[4], dx[20];
    int32_t idx[4];
    sb_backend_cpu.maxpool2_forward(x, 1, 1, 4, 5, y, idx);
    const float want_y[4] = {5, 2, -1, 8};
    const int32_t want_idx[4] = {1, 2, 10, 18};
    assert_memory_equal(y, want_y, sizeof y);
    assert_memory_equal(idx, want_idx, sizeof idx);
    const float dy[4] = {1, 2, 3, 4};
    sb_backend_cpu.maxpool2_backward(dy, idx, 1, 1, 4, 5, dx);
    for (int i = 0; i < 20; i++) {
        float want = i == 1 ? 1 : i == 2 ? 2 : i == 10 ? 3 : i == 18 ? 4 : 0;
        assert_true(dx[i] == want);
    }
}

static void test_transpose_batched(void **state)
{
    (void)state;
    const float x[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; /* (2, 2, 3) */
    float y[12];
    sb_backend_cpu.transpose_batched(x, 2, 2, 3, y);
    const float want[12] = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
    assert_memory_equal(y, want, sizeof y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_one_hidden_layer),
        cmocka_unit_test(test_mlp_two_hidden_layers),
        cmocka_unit_test(test_cnn),
        cmocka_unit_test(test_vit),
        cmocka_unit_test(test_vit_fused),
        cmocka_unit_test(test_wrong_gradient_is_detected),
        cmocka_unit_test(test_cnn_layout),
        cmocka_unit_test(test_im2col_col2im),
        cmocka_unit_test(test_maxpool2),
        cmocka_unit_test(test_transpose_batched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
