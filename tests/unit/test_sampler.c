/* Unit tests for the data order (src/data/sampler.c) and the generator under
 * it (src/core/rng.c): per-epoch permutations are permutations, reproducible
 * from (seed, epoch), different across epochs and seeds; batch counting drops
 * the last partial batch; bounded draws stay in range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/sampler.h"

#define N 60000

static void assert_is_permutation(const int32_t *perm, int n)
{
    unsigned char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (int i = 0; i < n; i++) {
        assert_in_range(perm[i], 0, n - 1);
        assert_int_equal(seen[perm[i]], 0);
        seen[perm[i]] = 1;
    }
    free(seen);
}

/* Number of positions where two permutations agree. */
static int agreements(const int32_t *a, const int32_t *b, int n)
{
    int same = 0;
    for (int i = 0; i < n; i++) same += a[i] == b[i];
    return same;
}

static void test_permutation_is_permutation(void **state)
{
    (void)state;
    int32_t *perm = malloc(N * sizeof *perm);
    assert_non_null(perm);
    for (int epoch = 1; epoch <= 3; epoch++) {
        sb_epoch_permutation(42, epoch, perm, N);
        assert_is_permutation(perm, N);
    }
    /* Small and degenerate sizes. */
    int32_t small[7];
    for (int n = 0; n <= 7; n++) {
        sb_epoch_permutation(1, 1, small, n);
        assert_is_permutation(small, n);
    }
    free(perm);
}

static void test_permutation_deterministic(void **state)
{
    (void)state;
    int32_t *a = malloc(N * sizeof *a);
    int32_t *b = malloc(N * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    sb_epoch_permutation(1234, 5, a, N);
    sb_epoch_permutation(1234, 5, b, N);
    assert_memory_equal(a, b, N * sizeof *a);
    free(a);
    free(b);
}

static void test_permutation_varies(void **state)
{
    (void)state;
    int32_t *a = malloc(N * sizeof *a);
    int32_t *b = malloc(N * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    sb_epoch_permutation(7, 1, a, N);

    /* Not the identity: a shuffle leaves about one element in place. */
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += a[i] == i;
    assert_true(fixed < 20);

    /* Another epoch of the same seed: a different, unrelated order. */
    sb_epoch_permutation(7, 2, b, N);
    assert_true(agreements(a, b, N) < 20);

    /* Another seed, same epoch: different too. */
    sb_epoch_permutation(8, 1, b, N);
    assert_true(agreements(a, b, N) < 20);
    free(a);
    free(b);
}

static void test_steps_per_epoch(void **state)
{
    (void)state;
    assert_int_equal(sb_steps_per_epoch(60000, 256), 234);
    assert_int_equal(sb_steps_per_epoch(60000, 4 * 64), 234);
    assert_int_equal(sb_steps_per_epoch(60000, 60000), 1);
    assert_int_equal(sb_steps_per_epoch(60000, 60001), 0);
    assert_int_equal(sb_steps_per_epoch(60000, 1), 60000);
    assert_int_equal(sb_steps_per_epoch(60000, 0), 0);
    assert_int_equal(sb_steps_per_epoch(0, 256), 0);
}

static void test_rng_below_range(void **state)
{
    (void)state;
    struct sb_rng rng;
    sb_rng_seed(&rng, 99, 0);
    const uint32_t bounds[] = {1, 2, 3, 10, 1000, 60000, 0x80000001u,
                               0xFFFFFFFFu};
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        for (int i = 0; i < 20000; i++) {
            uint32_t v = sb_rng_below(&rng, bounds[k]);
            assert_true(v < bounds[k]);
        }
    }
    /* Every value of a small bound is reached, roughly uniformly. */
    int count[10] = {0};
    for (int i = 0; i < 100000; i++) count[sb_rng_below(&rng, 10)]++;
    for (int v = 0; v < 10; v++) assert_in_range(count[v], 9000, 11000);
}

static void test_rng_streams(void **state)
{
    (void)state;
    struct sb_rng a, b;
    sb_rng_seed(&a, 5, 1);
    sb_rng_seed(&b, 5, 1);
    for (int i = 0; i < 100; i++)
        assert_true(sb_rng_next(&a) == sb_rng_next(&b));
    sb_rng_seed(&a, 5, 1);
    sb_rng_seed(&b, 5, 2);
    assert_true(sb_rng_next(&a) != sb_rng_next(&b));
    for (int i = 0; i < 1000; i++) {
        double u = sb_rng_uniform(&a);
        assert_true(u >= 0.0 && u < 1.0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permutation_is_permutation),
        cmocka_unit_test(test_permutation_deterministic),
        cmocka_unit_test(test_permutation_varies),
        cmocka_unit_test(test_steps_per_epoch),
        cmocka_unit_test(test_rng_below_range),
        cmocka_unit_test(test_rng_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
