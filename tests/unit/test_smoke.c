/* Smoke test of the unit-test pipeline (configure.py -> ninja -> pytest), on
 * the order statistics of src/core/stats.c: medians of odd and even counts,
 * p95 by linear interpolation (NumPy's default, Hyndman & Fan type 7), and
 * the empty input. Exits 0 when every test passes, non-zero otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "core/stats.h"

/* Fails the test unless |a - b| <= 1e-12 (cmocka's float assert is single precision). */
#define assert_close(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-12)

static void test_median_odd_count(void **state)
{
    (void)state;
    const double x[] = {3.0, 1.0, 2.0};
    struct sb_summary s;
    assert_int_equal(sb_summarize(x, 3, &s), SB_OK);
    assert_int_equal(s.n, 3);
    assert_close(s.median, 2.0);
    assert_close(s.min, 1.0);
    assert_close(s.max, 3.0);
    assert_close(s.mean, 2.0);
}

static void test_median_even_count_interpolates(void **state)
{
    (void)state;
    const double x[] = {4.0, 1.0, 3.0, 2.0};
    struct sb_summary s;
    assert_int_equal(sb_summarize(x, 4, &s), SB_OK);
    assert_close(s.median, 2.5);
    assert_close(s.mean, 2.5);
}

static void test_input_not_modified(void **state)
{
    (void)state;
    double x[] = {5.0, -1.0, 3.0};
    const double before[] = {5.0, -1.0, 3.0};
    struct sb_summary s;
    assert_int_equal(sb_summarize(x, 3, &s), SB_OK);
    assert_memory_equal(x, before, sizeof x);
}

/* numpy.percentile(range(1, 21), 95) == 19.05: h = 0.95 * 19 = 18.05, so
 * x[18] + 0.05 * (x[19] - x[18]) on the sorted 0-based samples. */
static void test_p95_interpolates(void **state)
{
    (void)state;
    double x[20];
    for (int i = 0; i < 20; i++) x[i] = (double)(20 - i); /* 20..1, unsorted */
    struct sb_summary s;
    assert_int_equal(sb_summarize(x, 20, &s), SB_OK);
    assert_close(s.p95, 19.05);
    assert_close(s.median, 10.5);
    assert_close(s.min, 1.0);
    assert_close(s.max, 20.0);
}

static void test_empty_input_is_zero(void **state)
{
    (void)state;
    struct sb_summary s;
    memset(&s, 0xff, sizeof s); /* garbage that must be cleared */
    assert_int_equal(sb_summarize(NULL, 0, &s), SB_OK);
    assert_int_equal(s.n, 0);
    assert_close(s.median, 0.0);
    assert_close(s.p95, 0.0);
    assert_close(s.min, 0.0);
    assert_close(s.max, 0.0);
    assert_close(s.mean, 0.0);
}

static void test_quantile_ends_and_single_sample(void **state)
{
    (void)state;
    const double sorted[] = {1.0, 2.0, 4.0, 8.0};
    assert_close(sb_quantile_sorted(sorted, 4, 0.0), 1.0);
    assert_close(sb_quantile_sorted(sorted, 4, 1.0), 8.0);
    assert_close(sb_quantile_sorted(sorted, 4, 0.5), 3.0);
    const double one[] = {7.0};
    assert_close(sb_quantile_sorted(one, 1, 0.95), 7.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_odd_count),
        cmocka_unit_test(test_median_even_count_interpolates),
        cmocka_unit_test(test_input_not_modified),
        cmocka_unit_test(test_p95_interpolates),
        cmocka_unit_test(test_empty_input_is_zero),
        cmocka_unit_test(test_quantile_ends_and_single_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
