/* Unit tests for the learning-rate schedule (strategies/shared/optimizer.c):
 * sb_lr_at's values at chosen steps against the formula (linear warm-up,
 * cosine to 0, the constant schedule), sb_optimizer_lr's step count (one
 * per training step, or central --async's several), and one SGD step on
 * the cpu backend taking the scheduled lr. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "strategies/shared/optimizer.h"

#define TOL 1e-12

static void test_constant(void **state)
{
    (void)state;
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 0.1, 0, 100, 0), 0.1, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 0.1, 0, 100, 99), 0.1, TOL);
    /* No length known: still the lr. */
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 0.1, 0, 0, 5000), 0.1, TOL);
}

static void test_linear_warmup(void **state)
{
    (void)state;
    /* w(t) = (t + 1) / warmup for t < warmup, then 1. */
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 1e-3, 4, 100, 0), 0.25e-3, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 1e-3, 4, 100, 1), 0.5e-3, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 1e-3, 4, 100, 3), 1e-3, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_CONSTANT, 1e-3, 4, 100, 4), 1e-3, TOL);
    /* Under cosine the warm-up is the same ramp. */
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, 1e-3, 4, 100, 2), 0.75e-3, TOL);
}

static void test_cosine(void **state)
{
    (void)state;
    const double lr = 2.0;
    const long warmup = 10, total = 110; /* 100 steps of decay */
    /* Peak right after the warm-up, half way at the middle, 0 at the end. */
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 10), 2.0, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 60), 1.0, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 35),
                       1.0 + cos(M_PI / 4.0), TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 85),
                       1.0 - cos(M_PI / 4.0), TOL);
    double last = sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 109);
    assert_float_equal(last, 1.0 + cos(M_PI * 99.0 / 100.0), TOL);
    assert_true(last > 0.0 && last < 1e-3);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 110), 0.0, TOL);
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, 500), 0.0, TOL);
    /* Non-increasing over the decay. */
    for (long t = warmup; t < total; t++)
        assert_true(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, t + 1) <=
                    sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, warmup, total, t));
    /* No warm-up: the decay starts at step 0. */
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, 0, 4, 2), 1.0, TOL);
    /* A length not known (0) holds the lr. */
    assert_float_equal(sb_lr_at(SB_LR_SCHEDULE_COSINE, lr, 0, 0, 7), lr, TOL);
}

static void test_optimizer_lr_steps(void **state)
{
    (void)state;
    struct sb_optimizer o;
    memset(&o, 0, sizeof o);
    o.lr = 0.1f;
    o.updates_per_step = 1;
    o.t = 1234;
    assert_true(sb_optimizer_lr(&o) == 0.1f); /* constant, no warm-up: exactly lr */
    o.schedule = SB_LR_SCHEDULE_COSINE;
    o.warmup = 0;
    o.total = 4;
    o.t = 2;
    assert_float_equal(sb_optimizer_lr(&o), 0.05f, 1e-7);
    /* central --async: 3 updates per training step; update 6 is step 2. */
    o.updates_per_step = 3;
    o.t = 6;
    assert_float_equal(sb_optimizer_lr(&o), 0.05f, 1e-7);
    o.t = 8;
    assert_float_equal(sb_optimizer_lr(&o), 0.05f, 1e-7);
    o.t = 9; /* step 3 */
    assert_float_equal(sb_optimizer_lr(&o), (float)(0.05 * (1.0 + cos(M_PI * 0.75))), 1e-7);
}

/* SGD without momentum on the cpu backend: p -= lr(t) g at each step. */
static void test_sgd_steps_take_scheduled_lr(void **state)
{
    (void)state;
    const struct sb_backend_ops *be = sb_backend_find("cpu");
    assert_non_null(be);
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.optimizer = SB_OPTIMIZER_SGD;
    cfg.lr = 1.0;
    cfg.momentum = 0.0;
    cfg.replicas = 1;
    cfg.lr_schedule = SB_LR_SCHEDULE_COSINE;
    cfg.lr_warmup_steps = 2;
    cfg.run_steps = 6;
    struct sb_optimizer o;
    assert_int_equal(sb_optimizer_init(&o, be, &cfg, 1), SB_OK);
    float p = 0.0f, g = 1.0f;
    double expect = 0.0;
    for (long t = 0; t < 6; t++) {
        sb_optimizer_step(&o, &p, &g);
        expect -= sb_lr_at(SB_LR_SCHEDULE_COSINE, 1.0, 2, 6, t);
        assert_float_equal(p, expect, 1e-6);
    }
    /* 0.5 + 1 + 1 + (1 + cos(pi/4)) / 2 + 0.5 + (1 + cos(3 pi/4)) / 2 */
    assert_float_equal(p, -(0.5 + 1.0 + 1.0 + 0.5 + 1.0), 1e-6);
    sb_optimizer_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_linear_warmup),
        cmocka_unit_test(test_cosine),
        cmocka_unit_test(test_optimizer_lr_steps),
        cmocka_unit_test(test_sgd_steps_take_scheduled_lr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
