/* Order statistics of timing samples. */
#ifndef SB_STATS_H
#define SB_STATS_H

#include <stddef.h>

#include "core/status.h"

struct sb_summary {
    size_t n;      /* number of samples; the rest is 0 when n == 0 */
    double median;
    double p95;
    double p99;
    double min;
    double max;
    double mean;
};

/* Summarises x[0..n) (x is not modified). Percentiles use linear
 * interpolation between closest ranks (NumPy's default "linear" method,
 * Hyndman & Fan type 7). SB_ERR_NOMEM if the scratch copy fails. */
sb_status sb_summarize(const double *x, size_t n, struct sb_summary *out);

/* The stall fraction of step times x[0..n) (ms) with median `median`: the
 * share of the summed step time spent in steps slower than 2 x median,
 *   sum(x_i : x_i > 2 median) / sum(x_i),
 * so a few preempted steps show up even when the median does not move.
 * 0 when n == 0 or the sum is 0. */
double sb_stall_fraction(const double *x, size_t n, double median);

/* The q-quantile (0 <= q <= 1) of sorted[0..n), type 7 as above; n > 0. */
double sb_quantile_sorted(const double *sorted, size_t n, double q);

#endif
