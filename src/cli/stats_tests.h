/* Statistics for comparing repeated benchmark measurements: the median, the
 * two-sided Mann-Whitney U rank test, and bootstrap percentile confidence
 * intervals for a median and for a ratio of medians.
 *
 * Used by `stratbench sweep` (confidence intervals over repeats) and
 * `stratbench compare` (is NEW slower than BASE, beyond noise?). */
#ifndef SB_STATS_TESTS_H
#define SB_STATS_TESTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Median of x[0..n) (type-7 quantile 0.5, as src/core/stats.h; x is not
 * modified) into *out; NaN when n == 0. SB_ERR_NOMEM if the scratch copy
 * fails. */
sb_status sb_median(const double *x, size_t n, double *out);

struct sb_mwu_result {
    double u_x;        /* U of x: pairs (x_i, y_j) with x_i > y_j, ties count 1/2 */
    double p_two_sided;/* two-sided p-value of "x and y come from one distribution" */
    double min_p;      /* the smallest p these sample sizes can give (no ties) */
    int exact;         /* 1: exact null distribution, 0: normal approximation */
};

/* Two-sided Mann-Whitney U test of x[0..nx) against y[0..ny) (Mann & Whitney,
 * Ann. Math. Statist. 18, 1947). U_x = R_x - nx(nx+1)/2 with R_x the sum of
 * x's mid-ranks in the pooled sample.
 *
 * p-value: with no ties and nx, ny <= SB_MWU_EXACT_MAX, exact: the null
 * distribution of U is counted by the recursion
 * f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u) (Mann & Whitney 1947), and
 * p = 2·P(U >= max(U_x, U_y)), capped at 1. Otherwise the normal
 * approximation with tie correction and continuity correction:
 * mu = nx·ny/2, sigma^2 = nx·ny/12 · ((N+1) - sum(t^3 - t)/(N(N-1))) over
 * tie groups of size t, z = (max(U_x, U_y) - mu - 1/2)/sigma,
 * p = 2·(1 - Phi(z)) = erfc(z/sqrt 2) (the definitions of SciPy's
 * scipy.stats.mannwhitneyu, methods "exact" and "asymptotic").
 * Errors: SB_ERR_USAGE if nx or ny is 0; SB_ERR_NOMEM. */
#define SB_MWU_EXACT_MAX 20
sb_status sb_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                          struct sb_mwu_result *out);

/* Bootstrap percentile interval (Efron & Tibshirani, "An Introduction to the
 * Bootstrap", 1993, ch. 13) of the median of x[0..n): `resamples` samples of
 * size n drawn with replacement (SplitMix64 seeded with `seed`, so the result
 * is reproducible), the median of each, then the (1-level)/2 and (1+level)/2
 * type-7 quantiles of those medians into *lo, *hi (level e.g. 0.95). n == 1
 * gives lo = hi = x[0]; n == 0 gives NaN. Errors: SB_ERR_NOMEM. */
sb_status sb_bootstrap_median_ci(const double *x, size_t n, double level, int resamples,
                                 uint64_t seed, double *lo, double *hi);

/* As sb_bootstrap_median_ci, for the ratio median(num)/median(den), num and
 * den resampled independently (two independent samples). Used for speedup
 * and efficiency. NaN bounds when either sample is empty. Errors:
 * SB_ERR_NOMEM. */
sb_status sb_bootstrap_ratio_ci(const double *num, size_t n_num, const double *den,
                                size_t n_den, double level, int resamples, uint64_t seed,
                                double *lo, double *hi);

#endif
