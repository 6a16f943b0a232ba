/* Median, Mann-Whitney U test and bootstrap intervals; see stats_tests.h. */
#include "cli/stats_tests.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of scratch[0..n), sorting it in place. */
static double median_inplace(double *scratch, size_t n)
{
    if (n == 0) return NAN;
    qsort(scratch, n, sizeof *scratch, cmp_double);
    return sb_quantile_sorted(scratch, n, 0.5);
}

sb_status sb_median(const double *x, size_t n, double *out)
{
    *out = NAN;
    if (n == 0) return SB_OK;
    double *s = malloc(n * sizeof *s);
    if (!s) return sb_error(SB_ERR_NOMEM, "median: out of memory for %zu samples", n);
    memcpy(s, x, n * sizeof *s);
    *out = median_inplace(s, n);
    free(s);
    return SB_OK;
}

struct tagged {
    double v;
    int from_x;
};

static int cmp_tagged(const void *a, const void *b)
{
    return cmp_double(&((const struct tagged *)a)->v, &((const struct tagged *)b)->v);
}

/* P(U >= u) under the null for sizes m, n (no ties), by counting: f[i][j][k]
 * = arrangements of i x's and j y's with U_x = k. */
static double exact_upper_tail(int m, int n, double u)
{
    int maxu = m * n;
    size_t stride_j = (size_t)maxu + 1, stride_i = (size_t)(n + 1) * stride_j;
    double *f = calloc((size_t)(m + 1) * stride_i, sizeof *f);
    if (!f) return NAN;
#define F(i, j, k) f[(size_t)(i) * stride_i + (size_t)(j) * stride_j + (size_t)(k)]
    for (int i = 0; i <= m; i++)
        for (int j = 0; j <= n; j++) {
            if (i == 0 || j == 0) {
                F(i, j, 0) = 1;
                continue;
            }
            /* The largest element is an x (beats all j y's) or a y. */
            for (int k = 0; k <= i * j; k++)
                F(i, j, k) = (k >= j ? F(i - 1, j, k - j) : 0) + F(i, j - 1, k);
        }
    double total = 0, tail = 0;
    for (int k = 0; k <= maxu; k++) {
        total += F(m, n, k);
        if (k >= u - 1e-9) tail += F(m, n, k);
    }
#undef F
    free(f);
    return tail / total;
}

sb_status sb_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                          struct sb_mwu_result *out)
{
    memset(out, 0, sizeof *out);
    if (nx == 0 || ny == 0)
        return sb_error(SB_ERR_USAGE, "Mann-Whitney U: a sample is empty (%zu and %zu values)",
                        nx, ny);
    size_t n = nx + ny;
    struct tagged *all = malloc(n * sizeof *all);
    if (!all) return sb_error(SB_ERR_NOMEM, "Mann-Whitney U: out of memory");
    for (size_t i = 0; i < nx; i++) all[i] = (struct tagged){x[i], 1};
    for (size_t i = 0; i < ny; i++) all[nx + i] = (struct tagged){y[i], 0};
    qsort(all, n, sizeof *all, cmp_tagged);

    /* Mid-ranks (from 1) and the tie term sum(t^3 - t). */
    double rank_sum_x = 0, tie_term = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && all[j + 1].v == all[i].v) j++;
        double t = (double)(j - i + 1), mid = (double)(i + j) / 2.0 + 1.0;
        for (size_t k = i; k <= j; k++)
            if (all[k].from_x) rank_sum_x += mid;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    free(all);

    double dnx = (double)nx, dny = (double)ny, dn = (double)n;
    out->u_x = rank_sum_x - dnx * (dnx + 1) / 2;
    double u_big = fmax(out->u_x, dnx * dny - out->u_x);
    double mu = dnx * dny / 2;
    double sigma_plain = sqrt(dnx * dny * (dn + 1) / 12);

    if (tie_term == 0 && nx <= SB_MWU_EXACT_MAX && ny <= SB_MWU_EXACT_MAX) {
        double tail = exact_upper_tail((int)nx, (int)ny, u_big);
        if (isnan(tail)) return sb_error(SB_ERR_NOMEM, "Mann-Whitney U: out of memory");
        out->exact = 1;
        out->p_two_sided = fmin(1.0, 2 * tail);
        out->min_p = fmin(1.0, 2 * exact_upper_tail((int)nx, (int)ny, dnx * dny));
        return SB_OK;
    }
    double var = dnx * dny / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
    if (var <= 0) { /* every value equal: no evidence of a difference */
        out->p_two_sided = 1;
    } else {
        double z = (u_big - mu - 0.5) / sqrt(var);
        out->p_two_sided = fmin(1.0, erfc(z / sqrt(2.0)));
    }
    out->min_p = fmin(1.0, erfc((dnx * dny - mu - 0.5) / sigma_plain / sqrt(2.0)));
    return SB_OK;
}

/* One bootstrap replicate of the median of x[0..n) into scratch. */
static double resampled_median(struct sb_rng *rng, const double *x, size_t n, double *scratch)
{
    for (size_t i = 0; i < n; i++) scratch[i] = x[sb_rng_below(rng, (uint32_t)n)];
    return median_inplace(scratch, n);
}

static sb_status bootstrap(const double *num, size_t n_num, const double *den, size_t n_den,
                           double level, int resamples, uint64_t seed, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (n_num == 0 || (den && n_den == 0)) return SB_OK;
    if (resamples < 1) resamples = 1;
    size_t scratch_n = n_num > n_den ? n_num : n_den;
    double *scratch = malloc(scratch_n * sizeof *scratch);
    double *stat = malloc((size_t)resamples * sizeof *stat);
    if (!scratch || !stat) {
        free(scratch);
        free(stat);
        return sb_error(SB_ERR_NOMEM, "bootstrap: out of memory for %d resamples", resamples);
    }
    struct sb_rng rng;
    sb_rng_seed(&rng, seed, 0);
    for (int b = 0; b < resamples; b++) {
        double m = resampled_median(&rng, num, n_num, scratch);
        stat[b] = den ? m / resampled_median(&rng, den, n_den, scratch) : m;
    }
    qsort(stat, (size_t)resamples, sizeof *stat, cmp_double);
    *lo = sb_quantile_sorted(stat, (size_t)resamples, (1 - level) / 2);
    *hi = sb_quantile_sorted(stat, (size_t)resamples, (1 + level) / 2);
    free(scratch);
    free(stat);
    return SB_OK;
}

sb_status sb_bootstrap_median_ci(const double *x, size_t n, double level, int resamples,
                                 uint64_t seed, double *lo, double *hi)
{
    return bootstrap(x, n, NULL, 0, level, resamples, seed, lo, hi);
}

sb_status sb_bootstrap_ratio_ci(const double *num, size_t n_num, const double *den,
                                size_t n_den, double level, int resamples, uint64_t seed,
                                double *lo, double *hi)
{
    return bootstrap(num, n_num, den, n_den, level, resamples, seed, lo, hi);
}
