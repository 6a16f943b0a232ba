/* How a device failure and the training loss travel through a step
 * (strategies/shared/replica.c), on a fake backend: the cpu backend with a
 * check() that fails on a chosen call and a download() that can fail.
 * No GPU needed; the cuda backend's own check() (recorded launch and
 * library errors, cudaStreamQuery) is exercised on a GPU by
 * STRATBENCH_TEST_CUDA_FAULT (docs/gpu.md).
 *
 * - a failure that check() reports after forward ends sb_replica_gradients
 *   with SB_ERR_DEVICE and the backend's message; after the optimizer it
 *   ends sb_replica_update; through the "single" strategy it ends that step;
 * - the loss is read once per epoch (on the epoch's last step) and equals
 *   the sum over the epoch's samples; a failed read is an error, not 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "strategies/shared/replica.h"
#include "strategies/strategy.h"

#define TRAIN_N 256
#define TEST_N 100
#define BATCH 32 /* 8 steps per epoch */

static long check_calls, fail_check_at; /* 1-based; 0 = never fail */
static int fail_downloads;

static sb_status fake_check(void)
{
    check_calls++;
    if (fail_check_at && check_calls == fail_check_at)
        return sb_error(SB_ERR_DEVICE, "fake device: injected fault at check %ld", check_calls);
    return SB_OK;
}

static sb_status fake_download(void *host, const void *src, size_t bytes)
{
    if (fail_downloads) return sb_error(SB_ERR_DEVICE, "fake device: download failed");
    return sb_backend_cpu.download(host, src, bytes);
}

static struct sb_backend_ops fake;
static struct sb_mnist data;
static struct sb_config cfg;
static struct sb_strategy_env env;

static void split_init(struct sb_split *sp, int n, unsigned seed)
{
    sp->n = n;
    sp->rows = sp->cols = 28;
    sp->pixels = malloc((size_t)n * 784);
    sp->labels = malloc((size_t)n);
    assert_non_null(sp->pixels);
    assert_non_null(sp->labels);
    for (size_t i = 0; i < (size_t)n * 784; i++) sp->pixels[i] = (uint8_t)((i * 2654435761u + seed) >> 24);
    for (int i = 0; i < n; i++) sp->labels[i] = (uint8_t)((i * 7 + seed) % 10);
}

static int setup(void **state)
{
    (void)state;
    fake = sb_backend_cpu;
    fake.check = fake_check;
    fake.download = fake_download;
    split_init(&data.train, TRAIN_N, 1);
    split_init(&data.test, TEST_N, 2);
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.strategy, "single");
    strcpy(cfg.workload, "mlp");
    strcpy(cfg.device, "cpu");
    cfg.hidden[0] = 16;
    cfg.n_hidden = 1;
    cfg.replicas = 1;
    cfg.epochs = 2;
    cfg.batch = BATCH;
    cfg.lr = 0.03;
    cfg.momentum = 0.9;
    cfg.seed = 42;
    cfg.eval_batch = TEST_N;
    env = (struct sb_strategy_env){.cfg = &cfg, .data = &data, .be = &fake,
                                   .workload = sb_workload_find("mlp")};
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

static int32_t idx[TRAIN_N];

static void reset_fakes(long fail_at)
{
    check_calls = 0;
    fail_check_at = fail_at;
    fail_downloads = 0;
    for (int i = 0; i < TRAIN_N; i++) idx[i] = i;
}

static void error_after_forward_ends_the_step(void **state)
{
    (void)state;
    reset_fakes(1); /* the first check: after forward */
    struct sb_replica *r = NULL;
    assert_int_equal(sb_replica_create(&env, 1, &r), SB_OK);
    struct sb_step_result res = {0};
    assert_int_equal(sb_replica_gradients(r, idx, BATCH, BATCH, NULL, NULL, &res),
                     SB_ERR_DEVICE);
    assert_non_null(strstr(sb_error_message(), "injected fault at check 1"));
    sb_replica_destroy(r);
}

static void error_after_optimizer_ends_the_update(void **state)
{
    (void)state;
    reset_fakes(2); /* forward's check passes, the optimizer's fails */
    struct sb_replica *r = NULL;
    assert_int_equal(sb_replica_create(&env, 1, &r), SB_OK);
    struct sb_step_result res = {0};
    assert_int_equal(sb_replica_gradients(r, idx, BATCH, BATCH, NULL, NULL, &res), SB_OK);
    assert_int_equal(sb_replica_update(r, r->model->grads, &res), SB_ERR_DEVICE);
    assert_non_null(strstr(sb_error_message(), "injected fault at check 2"));
    sb_replica_destroy(r);
}

static void error_ends_a_strategy_step(void **state)
{
    (void)state;
    reset_fakes(6); /* two checks per step: step 3's forward */
    const struct sb_strategy_ops *ops = sb_strategy_find("single");
    assert_non_null(ops);
    struct sb_strategy s = {.ops = ops, .env = &env};
    assert_int_equal(ops->init(&s), SB_OK);
    sb_status st = SB_OK;
    long step = 0;
    for (; step < 8 && st == SB_OK; step++) {
        struct sb_step_result res = {0};
        st = ops->step(&s, step, idx + (step % 8) * BATCH, &res);
    }
    assert_int_equal(st, SB_ERR_DEVICE);
    assert_int_equal(step, 3);
    ops->destroy(&s);
}

static void loss_is_read_once_per_epoch(void **state)
{
    (void)state;
    reset_fakes(0);
    struct sb_replica *r = NULL;
    assert_int_equal(sb_replica_create(&env, 0, &r), SB_OK); /* no optimizer: fixed params */
    assert_int_equal(r->steps_per_epoch, TRAIN_N / BATCH);
    double per_step[TRAIN_N / BATCH], total = 0.0;
    for (int s = 0; s < TRAIN_N / BATCH; s++) {
        struct sb_step_result res = {0};
        /* The expected value: this batch's loss on its own (forward into a
         * fresh sum, in host memory on the fake cpu backend). */
        double alone = 0.0;
        assert_int_equal(sb_replica_gradients(r, idx + s * BATCH, BATCH, BATCH, NULL, NULL,
                                              &res), SB_OK);
        assert_int_equal(res.samples, BATCH);
        if (s + 1 < TRAIN_N / BATCH) assert_true(res.loss_sum == 0.0); /* not read yet */
        else total = res.loss_sum;
        struct sb_model *m = r->model;
        assert_int_equal(m->ops->forward(m, r->slot[0].x, r->slot[0].y, BATCH, 1.0f, &alone),
                         SB_OK);
        per_step[s] = alone;
    }
    double expect = 0.0;
    for (int s = 0; s < TRAIN_N / BATCH; s++) expect += per_step[s];
    assert_true(expect > 0.0);
    assert_true(fabs(total - expect) <= 1e-9 * expect);
    assert_true(*r->loss_acc == 0.0); /* zeroed after the read */
    sb_replica_destroy(r);
}

static void failed_loss_read_is_an_error(void **state)
{
    (void)state;
    reset_fakes(0);
    struct sb_replica *r = NULL;
    assert_int_equal(sb_replica_create(&env, 1, &r), SB_OK);
    sb_status st = SB_OK;
    int s = 0;
    fail_downloads = 1;
    for (; s < TRAIN_N / BATCH && st == SB_OK; s++) {
        struct sb_step_result res = {0};
        st = sb_replica_gradients(r, idx + s * BATCH, BATCH, BATCH, NULL, NULL, &res);
    }
    assert_int_equal(st, SB_ERR_DEVICE);
    assert_int_equal(s, TRAIN_N / BATCH); /* the epoch's last step, where the loss is read */
    assert_non_null(strstr(sb_error_message(), "download failed"));
    sb_replica_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_after_forward_ends_the_step),
        cmocka_unit_test(error_after_optimizer_ends_the_update),
        cmocka_unit_test(error_ends_a_strategy_step),
        cmocka_unit_test(loss_is_read_once_per_epoch),
        cmocka_unit_test(failed_loss_read_is_an_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
