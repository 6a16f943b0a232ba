/* Unit tests for src/cli/stats_tests.c: the Mann-Whitney U statistic and its
 * two-sided p-value (exact and normal approximation), the median, and the
 * bootstrap percentile intervals.
 *
 * Reference values: the first case is the example of SciPy's documentation
 * of scipy.stats.mannwhitneyu (U = 17, p = 0.1111 exact, 0.11134688653314041
 * asymptotic). The others were computed offline in Python: exact p by
 * enumerating every split of the pooled sample (itertools.combinations),
 * asymptotic p from the tie-corrected normal formula with continuity
 * correction, math.erfc(z / sqrt(2)). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "cli/stats_tests.h"

static void test_scipy_docs_example_exact(void **state)
{
    (void)state;
    const double male[] = {19, 22, 16, 29, 24}, female[] = {20, 11, 17, 12};
    struct sb_mwu_result r;
    assert_int_equal(sb_mann_whitney(male, 5, female, 4, &r), SB_OK);
    assert_true(r.exact);
    assert_float_equal(r.u_x, 17.0, 1e-12);
    assert_float_equal(r.p_two_sided, 1.0 / 9.0, 1e-12);
    /* Swapping the samples gives U_y = nx*ny - U_x and the same p. */
    assert_int_equal(sb_mann_whitney(female, 4, male, 5, &r), SB_OK);
    assert_float_equal(r.u_x, 3.0, 1e-12);
    assert_float_equal(r.p_two_sided, 1.0 / 9.0, 1e-12);
}

static void test_asymptotic_with_ties(void **state)
{
    (void)state;
    /* A tie (the 2s, 6s) forces the normal approximation. */
    const double x[] = {1, 2, 2, 3, 5, 7}, y[] = {2, 4, 6, 6, 8, 9, 10};
    struct sb_mwu_result r;
    assert_int_equal(sb_mann_whitney(x, 6, y, 7, &r), SB_OK);
    assert_false(r.exact);
    assert_float_equal(r.u_x, 8.0, 1e-12);
    assert_float_equal(r.p_two_sided, 0.07216011300239515, 1e-9);
}

static void test_asymptotic_large_samples(void **state)
{
    (void)state;
    double x[30], y[30];
    for (int i = 0; i < 30; i++) {
        x[i] = i + 1;
        y[i] = i + 11.5;
    }
    struct sb_mwu_result r;
    assert_int_equal(sb_mann_whitney(x, 30, y, 30, &r), SB_OK);
    assert_false(r.exact); /* 30 > SB_MWU_EXACT_MAX */
    assert_float_equal(r.u_x, 190.0, 1e-12);
    assert_float_equal(r.p_two_sided, 0.00012477053789099963, 1e-9);
}

static void test_separated_four_against_four(void **state)
{
    (void)state;
    /* Complete separation: p = 2 / C(8, 4) = 2/70, also the smallest p. */
    const double x[] = {1, 2, 3, 4}, y[] = {5, 6, 7, 8};
    struct sb_mwu_result r;
    assert_int_equal(sb_mann_whitney(x, 4, y, 4, &r), SB_OK);
    assert_float_equal(r.u_x, 0.0, 1e-12);
    assert_float_equal(r.p_two_sided, 2.0 / 70.0, 1e-12);
    assert_float_equal(r.min_p, 2.0 / 70.0, 1e-12);
    /* Three against three can never reach 0.05: min p = 2/20. */
    assert_int_equal(sb_mann_whitney(x, 3, y, 3, &r), SB_OK);
    assert_float_equal(r.min_p, 0.1, 1e-12);
}

static void test_identical_samples_are_not_different(void **state)
{
    (void)state;
    const double x[] = {5, 5, 5}, y[] = {5, 5, 5};
    struct sb_mwu_result r;
    assert_int_equal(sb_mann_whitney(x, 3, y, 3, &r), SB_OK);
    assert_float_equal(r.p_two_sided, 1.0, 1e-12);
    assert_int_equal(sb_mann_whitney(x, 0, y, 3, &r), SB_ERR_USAGE);
}

static void test_median(void **state)
{
    (void)state;
    const double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2};
    double m;
    assert_int_equal(sb_median(odd, 3, &m), SB_OK);
    assert_float_equal(m, 2.0, 1e-12);
    assert_int_equal(sb_median(even, 4, &m), SB_OK);
    assert_float_equal(m, 2.5, 1e-12);
    assert_int_equal(sb_median(even, 0, &m), SB_OK);
    assert_true(isnan(m));
}

static void test_bootstrap_interval(void **state)
{
    (void)state;
    const double x[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    double lo, hi, lo2, hi2;
    assert_int_equal(sb_bootstrap_median_ci(x, 10, 0.95, 2000, 7, &lo, &hi), SB_OK);
    assert_true(lo >= 10 && lo <= 14.5);
    assert_true(hi >= 14.5 && hi <= 19);
    assert_true(hi > lo);
    /* Reproducible from the seed. */
    assert_int_equal(sb_bootstrap_median_ci(x, 10, 0.95, 2000, 7, &lo2, &hi2), SB_OK);
    assert_float_equal(lo, lo2, 0);
    assert_float_equal(hi, hi2, 0);
    /* One sample: a point. */
    assert_int_equal(sb_bootstrap_median_ci(x, 1, 0.95, 100, 7, &lo, &hi), SB_OK);
    assert_float_equal(lo, 10, 0);
    assert_float_equal(hi, 10, 0);
    /* Ratio of constant samples is exact. */
    const double a[] = {6, 6, 6}, b[] = {3, 3};
    assert_int_equal(sb_bootstrap_ratio_ci(a, 3, b, 2, 0.95, 500, 1, &lo, &hi), SB_OK);
    assert_float_equal(lo, 2.0, 1e-12);
    assert_float_equal(hi, 2.0, 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scipy_docs_example_exact),
        cmocka_unit_test(test_asymptotic_with_ties),
        cmocka_unit_test(test_asymptotic_large_samples),
        cmocka_unit_test(test_separated_four_against_four),
        cmocka_unit_test(test_identical_samples_are_not_different),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_bootstrap_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
