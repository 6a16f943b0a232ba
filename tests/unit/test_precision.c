/* Unit tests for mixed precision (strategies/shared/precision.h,
 * docs/precision.md) on the cpu backend:
 *
 * - the summation-order bound of docs/precision.md: the bf16 mlp's
 *   gradient of a batch of 64 (single) and the two half batches' bf16
 *   gradients summed in fp32 and rounded once (what ddp's and zero's
 *   16-bit ring does with 2 ranks) differ, element by element, by at most
 *   u (|g_d| + |g_s| + |g_a| + |g_b|) + 2 gamma_64 A (u = 2^-8, A the sum of
 *   the per-sample gradients' magnitudes, gamma_n = n 2^-24 / (1 - n 2^-24));
 *   and the same with a gradient scale off by 2 fails the bound;
 * - every value a bf16 model computes with is a bf16 value: its parameters
 *   after create and its gradients after backward;
 * - the loss scaler follows torch.amp.GradScaler: S = 2^16, halved and the
 *   step skipped on inf/NaN, doubled after 2000 good steps in a row; the
 *   unscale divides by S exactly and finds an inf or a NaN anywhere;
 * - fp16 rounding of a buffer (vector path) equals the scalar conversion;
 * - the optimizer's master weights: the compute copy is the master rounded
 *   after every step, and the master keeps what the rounding drops.
 * Exits 0 when every test passes, non-zero otherwise. */
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
#include "core/half.h"
#include "core/rng.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/precision.h"
#include "workloads/workload.h"

#define GLOBAL 64
#define HALF 32
#define U_BF16 (1.0 / 256.0) /* bf16's unit roundoff: 8 significand bits */

static struct sb_config config(enum sb_precision p)
{
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.workload, sizeof cfg.workload, "mlp");
    cfg.hidden[0] = 64;
    cfg.n_hidden = 1;
    cfg.seed = 42;
    cfg.precision = p;
    cfg.lr = 0.03;
    cfg.momentum = 0.9;
    cfg.replicas = 1;
    return cfg;
}

static struct sb_model *create(const struct sb_config *cfg, int max_batch)
{
    struct sb_model *m = NULL;
    assert_int_equal(sb_workload_find("mlp")->create(cfg, &sb_backend_cpu, max_batch, &m), SB_OK);
    return m;
}

/* MNIST-like inputs: n samples of in_dim features in [0, 2.8) rounded to
 * bf16 (as the replica's data pass does), labels 0..9 (seeded). */
static void batch(int in_dim, int n, float *x, uint8_t *y)
{
    struct sb_rng rng;
    sb_rng_seed(&rng, 7, 1);
    for (size_t i = 0; i < (size_t)n * in_dim; i++) x[i] = (float)(2.8 * sb_rng_uniform(&rng));
    sb_half_round(SB_HALF_BF16, x, (size_t)n * in_dim);
    for (int i = 0; i < n; i++) y[i] = (uint8_t)sb_rng_below(&rng, 10);
}

/* out = the gradient of samples [first, first + n) with gradient scale
 * `scale` (the replica's 1/global batch). */
static void gradient(struct sb_model *m, const float *x, const uint8_t *y, int first, int n,
                     float scale, float *out)
{
    double loss = 0.0;
    assert_int_equal(m->ops->forward(m, x + (size_t)first * m->in_dim, y + first, n, scale, &loss),
                     SB_OK);
    assert_int_equal(m->ops->backward(m, NULL, NULL), SB_OK);
    memcpy(out, m->grads, m->n_params * sizeof *out);
}

/* How many elements break the bound when the halves carry `half_scale`. */
static size_t bound_violations(float half_scale)
{
    struct sb_config cfg = config(SB_PRECISION_BF16);
    struct sb_model *m = create(&cfg, GLOBAL);
    size_t n = m->n_params;
    float *x = malloc((size_t)GLOBAL * m->in_dim * sizeof *x);
    uint8_t y[GLOBAL];
    float *gs = malloc(n * sizeof *gs), *ga = malloc(n * sizeof *ga), *gb = malloc(n * sizeof *gb);
    float *gd = malloc(n * sizeof *gd), *gk = malloc(n * sizeof *gk);
    double *a = calloc(n, sizeof *a);
    assert_true(x && gs && ga && gb && gd && gk && a);
    batch(m->in_dim, GLOBAL, x, y);
    const float scale = 1.0f / GLOBAL;
    gradient(m, x, y, 0, GLOBAL, scale, gs);         /* single: the whole batch */
    gradient(m, x, y, 0, HALF, half_scale, ga);      /* replica 0's half */
    gradient(m, x, y, HALF, HALF, half_scale, gb);   /* replica 1's half */
    for (size_t i = 0; i < n; i++) gd[i] = ga[i] + gb[i]; /* the ring's fp32 addition */
    sb_half_round(SB_HALF_BF16, gd, n);                   /* and its 16-bit result */
    for (int k = 0; k < GLOBAL; k++) {                    /* A: per-sample magnitudes */
        gradient(m, x, y, k, 1, scale, gk);
        for (size_t i = 0; i < n; i++) a[i] += fabs(gk[i]) * (1.0 + U_BF16);
    }
    double g64 = GLOBAL * 0x1p-24 / (1.0 - GLOBAL * 0x1p-24);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double bound = U_BF16 * (fabs(gd[i]) + fabs(gs[i]) + fabs(ga[i]) + fabs(gb[i])) +
                       2.0 * g64 * a[i];
        if (fabs((double)gd[i] - gs[i]) > bound) bad++;
    }
    free(x), free(gs), free(ga), free(gb), free(gd), free(gk), free(a);
    m->ops->destroy(m);
    return bad;
}

static void test_summation_order_bound(void **state)
{
    (void)state;
    assert_int_equal(bound_violations(1.0f / GLOBAL), 0);
    /* A reduction that averaged the halves wrongly breaks it. */
    assert_true(bound_violations(1.0f / HALF) > 0);
}

static int all_bf16(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        if (bits & 0xFFFFu) return 0;
    }
    return 1;
}

static void test_bf16_model_computes_with_bf16_values(void **state)
{
    (void)state;
    struct sb_config cfg = config(SB_PRECISION_BF16);
    struct sb_model *m = create(&cfg, HALF);
    assert_true(all_bf16(m->params, m->n_params));
    float *x = malloc((size_t)HALF * m->in_dim * sizeof *x), *g = malloc(m->n_params * sizeof *g);
    uint8_t y[HALF];
    batch(m->in_dim, HALF, x, y);
    gradient(m, x, y, 0, HALF, 1.0f / HALF, g);
    assert_true(all_bf16(g, m->n_params));
    free(x), free(g);
    m->ops->destroy(m);
    struct sb_config fp32 = config(SB_PRECISION_FP32);
    m = create(&fp32, HALF);
    assert_false(all_bf16(m->params, m->n_params)); /* fp32 keeps its init */
    m->ops->destroy(m);
}

static void test_loss_scaler_is_grad_scaler(void **state)
{
    (void)state;
    struct sb_config cfg = config(SB_PRECISION_FP16);
    struct sb_loss_scaler ls;
    sb_loss_scaler_init(&ls, &cfg);
    assert_true(ls.enabled && ls.scale == 65536.0 && sb_loss_scaler_factor(&ls) == 65536.0f);
    assert_int_equal(sb_loss_scaler_update(&ls, 1), 1); /* skipped, halved */
    assert_true(ls.scale == 32768.0 && ls.skipped == 1);
    for (int i = 0; i < 1999; i++) assert_int_equal(sb_loss_scaler_update(&ls, 0), 0);
    assert_true(ls.scale == 32768.0);
    assert_int_equal(sb_loss_scaler_update(&ls, 0), 0); /* the 2000th good step */
    assert_true(ls.scale == 65536.0 && ls.good_steps == 0);
    /* Unscale: exact, and an inf or a NaN anywhere is found. */
    float g[4] = {65536.0f, -3.0f * 65536.0f, 0.5f, 0.0f};
    int found = 0;
    sb_loss_scaler_unscale(&ls, &sb_backend_cpu, g, 4, &found);
    assert_true(found == 0 && g[0] == 1.0f && g[1] == -3.0f && g[2] == 0.5f / 65536.0f);
    g[3] = NAN;
    sb_loss_scaler_unscale(&ls, &sb_backend_cpu, g, 4, &found);
    assert_int_equal(found, 1);
    /* fp32 and bf16: S = 1, never a skip. */
    struct sb_config bf16 = config(SB_PRECISION_BF16);
    sb_loss_scaler_init(&ls, &bf16);
    assert_true(!ls.enabled && sb_loss_scaler_factor(&ls) == 1.0f);
    assert_int_equal(sb_loss_scaler_update(&ls, 1), 0);
}

static void test_master_weights_keep_what_rounding_drops(void **state)
{
    (void)state;
    struct sb_config cfg = config(SB_PRECISION_BF16);
    cfg.momentum = 0.0;
    cfg.lr = 1.0;
    struct sb_optimizer o;
    assert_int_equal(sb_optimizer_init(&o, &sb_backend_cpu, &cfg, 1), SB_OK);
    assert_true(o.master != NULL);
    assert_int_equal(sb_optimizer_state_floats(&cfg), 2); /* momentum + master */
    float p = 1.0f, g = -0x1p-10f; /* an update below half a bf16 ulp of 1 (2^-8) */
    for (int i = 0; i < 3; i++) sb_optimizer_step(&o, &p, &g);
    assert_true(p == 1.0f);                    /* the compute copy did not move */
    assert_true(o.master[0] == 1.0f + 0x1p-10f * 3); /* the master did */
    sb_optimizer_step(&o, &p, &g);
    assert_true(p == 1.0f);                    /* 1 + 2^-8: a tie, to even (1) */
    sb_optimizer_step(&o, &p, &g);
    assert_true(p == 1.0f + 0x1p-7f);          /* 1 + 5 * 2^-10: up to the next bf16 */
    sb_optimizer_free(&o);
}

/* sb_half_round (8 at a time with F16C where the CPU has it) equals the
 * scalar conversion for values across fp16's range: normals, ties,
 * subnormals, below the smallest subnormal, overflow, inf and NaN. */
static void test_fp16_round_matches_the_scalar_conversion(void **state)
{
    (void)state;
    enum { N = 4099 }; /* not a multiple of 8: the scalar tail runs too */
    static float x[N], want[N];
    struct sb_rng rng;
    sb_rng_seed(&rng, 11, 1);
    for (int i = 0; i < N; i++) {
        double e = -30.0 + 48.0 * sb_rng_uniform(&rng); /* 2^-30 .. 2^18 */
        x[i] = (float)((sb_rng_uniform(&rng) < 0.5 ? -1 : 1) * pow(2.0, e));
    }
    x[0] = 1.0f + 0x1p-11f;  /* a tie: to even (1) */
    x[1] = 65520.0f;         /* rounds to inf */
    x[2] = 0x1p-25f;         /* half the smallest subnormal: a tie, to 0 */
    x[3] = INFINITY;
    x[4] = NAN;
    x[5] = 0x1.8p-24f;       /* 1.5 subnormal quanta: a tie, to even (2 quanta) */
    for (int i = 0; i < N; i++) want[i] = sb_fp16_to_f32(sb_f32_to_fp16(x[i]));
    sb_half_round(SB_HALF_FP16, x, N);
    for (int i = 0; i < N; i++) {
        if (isnan(want[i])) assert_true(isnan(x[i]));
        else assert_true(memcmp(&x[i], &want[i], sizeof x[i]) == 0);
    }
    assert_true(x[0] == 1.0f && isinf(x[1]) && x[2] == 0.0f && x[5] == 0x1p-23f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summation_order_bound),
        cmocka_unit_test(test_bf16_model_computes_with_bf16_values),
        cmocka_unit_test(test_loss_scaler_is_grad_scaler),
        cmocka_unit_test(test_master_weights_keep_what_rounding_drops),
        cmocka_unit_test(test_fp16_round_matches_the_scalar_conversion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
