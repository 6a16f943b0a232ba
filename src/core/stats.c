/* Order statistics; see stats.h. */
#include "core/stats.h"

#include <stdlib.h>
#include <string.h>

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sb_quantile_sorted(const double *sorted, size_t n, double q)
{
    double h = q * (double)(n - 1);
    size_t lo = (size_t)h;
    if (lo + 1 >= n) return sorted[n - 1];
    return sorted[lo] + (h - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

sb_status sb_summarize(const double *x, size_t n, struct sb_summary *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0) return SB_OK;
    double *s = malloc(n * sizeof *s);
    if (!s) return sb_error(SB_ERR_NOMEM, "summary of %zu samples: out of memory", n);
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, compare_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += s[i];
    out->n = n;
    out->median = sb_quantile_sorted(s, n, 0.5);
    out->p95 = sb_quantile_sorted(s, n, 0.95);
    out->p99 = sb_quantile_sorted(s, n, 0.99);
    out->min = s[0];
    out->max = s[n - 1];
    out->mean = sum / (double)n;
    free(s);
    return SB_OK;
}

double sb_stall_fraction(const double *x, size_t n, double median)
{
    double total = 0.0, stalled = 0.0;
    for (size_t i = 0; i < n; i++) {
        total += x[i];
        if (x[i] > 2.0 * median) stalled += x[i];
    }
    return total > 0.0 ? stalled / total : 0.0;
}
