/* Unit tests for ddp's bucket planning (strategies/shared/buckets.c): buckets are
 * contiguous ranges that tile the whole gradient buffer from its end
 * backwards (launch order = reverse layer order), never split a layer, stay
 * within the cap unless one layer alone exceeds it, and close exactly when
 * the next layer would not fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "strategies/shared/buckets.h"

#define MIB 1048576.0

/* A tensor table for an MLP with layer widths dims[0..n_dims): fcL.weight
 * (out * in) then fcL.bias (out) per layer, contiguous. Returns tensors. */
static int mlp_table(const int *dims, int n_dims, struct sb_tensor_desc *t)
{
    size_t off = 0;
    int n = 0;
    for (int l = 0; l + 1 < n_dims; l++) {
        size_t w = (size_t)dims[l] * (size_t)dims[l + 1], b = (size_t)dims[l + 1];
        t[n] = t[n + 1] = (struct sb_tensor_desc){0}; /* no layer table: by name */
        snprintf(t[n].name, sizeof t[n].name, "fc%d.weight", l + 1);
        t[n].offset = off;
        t[n++].count = w;
        off += w;
        snprintf(t[n].name, sizeof t[n].name, "fc%d.bias", l + 1);
        t[n].offset = off;
        t[n++].count = b;
        off += b;
    }
    return n;
}

/* Buckets tile [0, n_floats) from the end, in launch order, layer-aligned. */
static void assert_tiles_backwards(const struct sb_bucket_plan *p)
{
    size_t end = p->n_floats;
    int next_layer = p->n_layers - 1;
    for (int i = 0; i < p->n; i++) {
        const struct sb_bucket *b = &p->buckets[i];
        assert_true(b->count > 0);
        assert_int_equal(b->offset + b->count, end);
        assert_int_equal(b->first_layer + b->n_layers - 1, next_layer);
        end = b->offset;
        next_layer = b->first_layer - 1;
    }
    assert_int_equal(end, 0);
    assert_int_equal(next_layer, -1);
}

static void test_default_mlp_one_bucket(void **state)
{
    (void)state;
    int dims[] = {784, 256, 10};
    struct sb_tensor_desc t[4];
    int n = mlp_table(dims, 3, t);
    struct sb_bucket_plan p;
    assert_int_equal(sb_bucket_plan_create(t, n, 25.0, &p), SB_OK);
    assert_int_equal(p.n_layers, 2);
    assert_int_equal(p.n_floats, 203530);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.buckets[0].offset, 0);
    assert_int_equal(p.buckets[0].count, 203530);
    assert_tiles_backwards(&p);
    sb_bucket_plan_free(&p);
    assert_null(p.buckets);
}

static void test_small_cap_one_bucket_per_big_layer(void **state)
{
    (void)state;
    int dims[] = {784, 256, 10};
    struct sb_tensor_desc t[4];
    int n = mlp_table(dims, 3, t);
    struct sb_bucket_plan p;
    /* 0.05 MiB = 52,428.8 bytes: fc2 (2,570 floats = 10,280 B) fits, fc1
     * (200,960 floats) is larger than the cap and is a bucket of its own. */
    assert_int_equal(sb_bucket_plan_create(t, n, 0.05, &p), SB_OK);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.buckets[0].offset, 200960);
    assert_int_equal(p.buckets[0].count, 2570);
    assert_int_equal(p.buckets[1].offset, 0);
    assert_int_equal(p.buckets[1].count, 200960);
    assert_tiles_backwards(&p);
    sb_bucket_plan_free(&p);
}

static void test_layers_grouped_until_next_would_exceed(void **state)
{
    (void)state;
    /* Layers (floats): fc1 50,240; fc2 4,160; fc3 4,160; fc4 650. From the
     * end: 650 + 4,160 + 4,160 = 8,970 floats = 35,880 B <= 52,428.8 B;
     * adding fc1 would exceed, so fc1 starts a new bucket. */
    int dims[] = {784, 64, 64, 64, 10};
    struct sb_tensor_desc t[8];
    int n = mlp_table(dims, 5, t);
    struct sb_bucket_plan p;
    assert_int_equal(sb_bucket_plan_create(t, n, 0.05, &p), SB_OK);
    assert_int_equal(p.n_layers, 4);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.buckets[0].count, 8970);
    assert_int_equal(p.buckets[0].n_layers, 3);
    assert_int_equal(p.buckets[1].count, 50240);
    assert_tiles_backwards(&p);
    sb_bucket_plan_free(&p);
}

static void test_cap_is_inclusive_and_respected(void **state)
{
    (void)state;
    /* Three layers of 2 tensors, 256 floats = 1 KiB each. */
    struct sb_tensor_desc t[6] = {0}; /* no layer table: by name */
    const char *names[] = {"a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias"};
    for (int i = 0; i < 6; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s", names[i]);
        t[i].offset = (size_t)i * 128;
        t[i].count = 128;
    }
    struct sb_bucket_plan p;
    /* Cap exactly 2 KiB: two layers fill a bucket to the cap. */
    assert_int_equal(sb_bucket_plan_create(t, 6, 2048.0 / MIB, &p), SB_OK);
    assert_int_equal(p.n_layers, 3);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.buckets[0].count, 512);
    assert_int_equal(p.buckets[0].offset, 256);
    assert_int_equal(p.buckets[1].count, 256);
    assert_tiles_backwards(&p);
    for (int i = 0; i < p.n; i++) assert_true(p.buckets[i].count * 4.0 <= 2048.0);
    sb_bucket_plan_free(&p);
    /* One byte less: every layer alone. */
    assert_int_equal(sb_bucket_plan_create(t, 6, 2047.0 / MIB, &p), SB_OK);
    assert_int_equal(p.n, 3);
    assert_tiles_backwards(&p);
    sb_bucket_plan_free(&p);
    /* Smaller than any layer: still one bucket per layer, never a split. */
    assert_int_equal(sb_bucket_plan_create(t, 6, 1e-6, &p), SB_OK);
    assert_int_equal(p.n, 3);
    for (int i = 0; i < p.n; i++) assert_int_equal(p.buckets[i].count, 256);
    sb_bucket_plan_free(&p);
    /* Huge: everything in one. */
    assert_int_equal(sb_bucket_plan_create(t, 6, 1e6, &p), SB_OK);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.buckets[0].count, 768);
    sb_bucket_plan_free(&p);
}

static void test_bad_input(void **state)
{
    (void)state;
    int dims[] = {784, 256, 10};
    struct sb_tensor_desc t[4];
    int n = mlp_table(dims, 3, t);
    struct sb_bucket_plan p;
    assert_int_equal(sb_bucket_plan_create(t, n, 0.0, &p), SB_ERR_USAGE);
    assert_int_equal(sb_bucket_plan_create(t, n, -1.0, &p), SB_ERR_USAGE);
    assert_int_equal(sb_bucket_plan_create(t, 0, 25.0, &p), SB_ERR_INTERNAL);
    t[2].offset += 1; /* a gap */
    assert_int_equal(sb_bucket_plan_create(t, n, 25.0, &p), SB_ERR_INTERNAL);
    assert_null(p.buckets);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_mlp_one_bucket),
        cmocka_unit_test(test_small_cap_one_bucket_per_big_layer),
        cmocka_unit_test(test_layers_grouped_until_next_would_exceed),
        cmocka_unit_test(test_cap_is_inclusive_and_respected),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
