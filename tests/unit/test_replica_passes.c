/* The replica passes (strategies/shared/replica.c) on the cpu backend and
 * the mlp, over a small synthetic data set:
 *
 * - data, forward and backward run as separate passes (then the step's
 *   count) give gradients, loss sums, samples and parameters after the
 *   optimizer byte for byte equal to the fused sb_replica_gradients, step
 *   after step across an epoch's end (where the loss is read);
 * - each pass adds its own phase time (data, forward, backward) and no
 *   other;
 * - the passes refuse what the workload cannot do yet: a backward whose
 *   forward did not run last, a forward of a slot other than 0, an
 *   accumulating backward, a slot out of range; data fills any slot of a
 *   replica with several;
 * - a bubble is timed as the bubble phase alone, in an NVTX range
 *   "bubble" of the category whose trace name is "bubble". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/nvtx.h"
#include "strategies/shared/replica.h"
#include "strategies/strategy.h"

#define TRAIN_N 192
#define TEST_N 50
#define BATCH 32 /* 6 steps per epoch */

static struct sb_mnist data;
static struct sb_config cfg;
static struct sb_strategy_env env;
static int32_t idx[TRAIN_N];

static void split_init(struct sb_split *sp, int n, unsigned seed)
{
    sp->n = n;
    sp->rows = sp->cols = 28;
    sp->pixels = malloc((size_t)n * 784);
    sp->labels = malloc((size_t)n);
    assert_non_null(sp->pixels);
    assert_non_null(sp->labels);
    for (size_t i = 0; i < (size_t)n * 784; i++)
        sp->pixels[i] = (uint8_t)((i * 2654435761u + seed) >> 24);
    for (int i = 0; i < n; i++) sp->labels[i] = (uint8_t)((i * 7 + seed) % 10);
}

static int setup(void **state)
{
    (void)state;
    split_init(&data.train, TRAIN_N, 1);
    split_init(&data.test, TEST_N, 2);
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.strategy, "single");
    strcpy(cfg.workload, "mlp");
    strcpy(cfg.device, "cpu");
    cfg.hidden[0] = 24;
    cfg.hidden[1] = 16;
    cfg.n_hidden = 2;
    cfg.replicas = 1;
    cfg.epochs = 2;
    cfg.batch = BATCH;
    cfg.lr = 0.05;
    cfg.momentum = 0.9;
    cfg.seed = 42;
    cfg.eval_batch = TEST_N;
    env = (struct sb_strategy_env){.cfg = &cfg, .data = &data, .be = &sb_backend_cpu,
                                   .workload = sb_workload_find("mlp")};
    /* A batch order that is not the identity, so the gather matters. */
    for (int i = 0; i < TRAIN_N; i++) idx[i] = (i * 37 + 5) % TRAIN_N;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(data.train.pixels);
    free(data.train.labels);
    free(data.test.pixels);
    free(data.test.labels);
    return 0;
}

/* Runs the step's passes one by one on slot 0 and counts the step. */
static void passes_step(struct sb_replica *r, const int32_t *batch, struct sb_step_result *res)
{
    assert_int_equal(sb_replica_data(r, 0, batch, BATCH, res), SB_OK);
    assert_int_equal(sb_replica_forward(r, 0, BATCH, res), SB_OK);
    assert_int_equal(sb_replica_backward(r, 0, NULL, NULL, 0, res), SB_OK);
    assert_int_equal(sb_replica_count_step(r, res), SB_OK);
}

static void passes_equal_the_fused_step(void **state)
{
    (void)state;
    struct sb_replica *fused = NULL, *split = NULL;
    assert_int_equal(sb_replica_create(&env, 1, &fused), SB_OK);
    assert_int_equal(sb_replica_create(&env, 1, &split), SB_OK);
    size_t n = fused->model->n_params;
    assert_int_equal(split->model->n_params, n);
    /* Two epochs' worth of steps: the loss is read at each epoch's end. */
    int reads = 0;
    for (int s = 0; s < 2 * TRAIN_N / BATCH; s++) {
        const int32_t *batch = idx + (s % (TRAIN_N / BATCH)) * BATCH;
        struct sb_step_result a = {0}, b = {0};
        assert_int_equal(sb_replica_gradients(fused, batch, BATCH, BATCH, NULL, NULL, &a),
                         SB_OK);
        passes_step(split, batch, &b);
        assert_memory_equal(fused->model->grads, split->model->grads, n * sizeof(float));
        assert_memory_equal(fused->loss_acc, split->loss_acc, sizeof(double));
        assert_memory_equal(&a.loss_sum, &b.loss_sum, sizeof a.loss_sum);
        assert_int_equal(a.samples, BATCH);
        assert_int_equal(b.samples, BATCH);
        assert_int_equal(fused->steps, split->steps);
        reads += a.loss_sum != 0.0;
        assert_int_equal(sb_replica_update(fused, fused->model->grads, &a), SB_OK);
        assert_int_equal(sb_replica_update(split, split->model->grads, &b), SB_OK);
        assert_memory_equal(fused->model->params, split->model->params, n * sizeof(float));
    }
    assert_int_equal(reads, 2);
    sb_replica_destroy(fused);
    sb_replica_destroy(split);
}

static void each_pass_times_its_own_phase(void **state)
{
    (void)state;
    struct sb_replica *r = NULL;
    assert_int_equal(sb_replica_create(&env, 1, &r), SB_OK);
    struct sb_step_result res = {0};
    assert_int_equal(sb_replica_data(r, 0, idx, BATCH, &res), SB_OK);
    for (int p = 0; p < SB_PHASE_COUNT; p++)
        if (p != SB_PHASE_DATA) assert_true(res.phase_ms[p] == 0.0);
    double data_ms = res.phase_ms[SB_PHASE_DATA];
    assert_true(data_ms > 0.0);
    assert_int_equal(sb_replica_forward(r, 0, BATCH, &res), SB_OK);
    assert_true(res.phase_ms[SB_PHASE_FORWARD] > 0.0);
    assert_true(res.phase_ms[SB_PHASE_BACKWARD] == 0.0);
    assert_true(res.phase_ms[SB_PHASE_DATA] == data_ms);
    assert_int_equal(sb_replica_backward(r, 0, NULL, NULL, 0, &res), SB_OK);
    assert_true(res.phase_ms[SB_PHASE_BACKWARD] > 0.0);
    assert_true(res.phase_ms[SB_PHASE_OPTIMIZER] == 0.0);
    assert_true(res.phase_ms[SB_PHASE_BUBBLE] == 0.0);
    sb_replica_destroy(r);
}

static void passes_refuse_what_the_workload_cannot_do(void **state)
{
    (void)state;
    struct sb_replica *r = NULL;
    assert_int_equal(sb_replica_create_slots(&env, 1, 3, &r), SB_OK);
    assert_int_equal(r->slots, 3);
    struct sb_step_result res = {0};
    /* Backward before any forward; forward before any data. */
    assert_int_equal(sb_replica_backward(r, 0, NULL, NULL, 0, &res), SB_ERR_INTERNAL);
    assert_int_equal(sb_replica_forward(r, 0, BATCH, &res), SB_ERR_INTERNAL);
    /* Data fills every slot, each its own samples. */
    for (int k = 0; k < 3; k++)
        assert_int_equal(sb_replica_data(r, k, idx + k * BATCH, BATCH, &res), SB_OK);
    assert_memory_not_equal(r->slot[0].x, r->slot[1].x, BATCH * 784 * sizeof(float));
    assert_int_equal(sb_replica_data(r, 3, idx, BATCH, &res), SB_ERR_INTERNAL);
    assert_int_equal(sb_replica_data(r, -1, idx, BATCH, &res), SB_ERR_INTERNAL);
    assert_int_equal(sb_replica_data(r, 0, idx, 0, &res), SB_ERR_INTERNAL);
    /* One batch's activations: slot 0 only, overwriting gradients only. */
    assert_int_equal(sb_replica_forward(r, 1, BATCH, &res), SB_ERR_INTERNAL);
    assert_int_equal(sb_replica_forward(r, 0, BATCH, &res), SB_OK);
    assert_int_equal(sb_replica_backward(r, 1, NULL, NULL, 0, &res), SB_ERR_INTERNAL);
    assert_int_equal(sb_replica_backward(r, 0, NULL, NULL, 1, &res), SB_ERR_INTERNAL);
    assert_int_equal(sb_replica_backward(r, 0, NULL, NULL, 0, &res), SB_OK);
    /* That forward's activations are used up. */
    assert_int_equal(sb_replica_backward(r, 0, NULL, NULL, 0, &res), SB_ERR_INTERNAL);
    sb_replica_destroy(r);
}

/* The ranges the NVTX hook saw: the last push's name and category, and
 * how many are open. */
static const char *pushed_name;
static int pushed_category, open_ranges;

static void hook_push(const char *name, int category, uint64_t payload, int is_bytes)
{
    (void)payload;
    (void)is_bytes;
    pushed_name = name;
    pushed_category = category;
    open_ranges++;
}

static void hook_pop(void) { open_ranges--; }

static void bubble_is_its_own_phase_and_range(void **state)
{
    (void)state;
    static const struct sb_nvtx_hook hook = {hook_push, hook_pop};
    sb_nvtx_set_hook(&hook);
    struct sb_step_result res = {0};
    double t0 = sb_replica_bubble_begin();
    assert_int_equal(open_ranges, 1);
    assert_string_equal(pushed_name, "bubble");
    assert_int_equal(pushed_category, SB_NVTX_BUBBLE);
    assert_string_equal(sb_nvtx_category_name(SB_NVTX_BUBBLE), "bubble");
    assert_string_equal(sb_phase_name(SB_PHASE_BUBBLE), "bubble");
    while (sb_now_s() - t0 < 2e-3) { /* idle 2 ms */ }
    sb_replica_bubble_end(t0, &res);
    sb_nvtx_set_hook(NULL);
    assert_int_equal(open_ranges, 0);
    assert_true(res.phase_ms[SB_PHASE_BUBBLE] >= 2.0);
    for (int p = 0; p < SB_PHASE_COUNT; p++)
        if (p != SB_PHASE_BUBBLE) assert_true(res.phase_ms[p] == 0.0);
    /* Not compute: the bubble is idle time. */
    assert_true(sb_phase_compute_ms(res.phase_ms) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(passes_equal_the_fused_step),
        cmocka_unit_test(each_pass_times_its_own_phase),
        cmocka_unit_test(passes_refuse_what_the_workload_cannot_do),
        cmocka_unit_test(bubble_is_its_own_phase_and_range),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
