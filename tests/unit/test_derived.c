/* Known-answer tests for every number the report derives rather than
 * measures: wait at the synchronisation point, hidden and exposed
 * communication (busy time of overlapping buckets), the cross-rank spread
 * and slowest rank, algbw and busbw per kind and rank count, the order
 * statistics (median, p95, p99, stall fraction), the bootstrap intervals on
 * a fixed seed, speedup and efficiency (strong and weak), throughput and the
 * /proc/stat and noise arithmetic. Each expected value is worked out by
 * hand in the comment beside it (or, for the bootstrap, by an independent
 * Python implementation of the same resampling), so a broken formula fails
 * here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "cli/stats_tests.h"
#include "cli/sweep_stats.h"
#include "comm/comm.h"
#include "core/phase.h"
#include "core/stats.h"
#include "harness/consistency.h"
#include "harness/rank_stats.h"
#include "harness/straggler.h"
#include "harness/run_noise.h"
#include "report/report.h"
#include "strategies/shared/buckets.h"

/* cmocka's assert_float_equal compares floats (and casts its unparenthesised
 * arguments); these numbers are doubles. */
static void near(double a, double b, double eps, const char *file, int line)
{
    if (!(fabs(a - b) <= eps)) {
        print_error("%.17g != %.17g (tolerance %g) at %s:%d\n", a, b, eps, file, line);
        fail();
    }
}
#define assert_near(a, b, eps) near((a), (b), (eps), __FILE__, __LINE__)


#define EPS 1e-12

/* Sets rank r's step s: the given compute phases (data, forward, backward)
 * and a step time. */
static void set_step(struct sb_rank_timings *t, int r, size_t s, double data, double fwd,
                     double bwd, double step_ms)
{
    sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(SB_PHASE_DATA))[s] = data;
    sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(SB_PHASE_FORWARD))[s] = fwd;
    sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(SB_PHASE_BACKWARD))[s] = bwd;
    sb_rank_timings_at(t, r, SB_RANK_FIELD_STEP)[s] = step_ms;
}

static void test_compute_and_wait(void **state)
{
    (void)state;
    double ph[SB_PHASE_COUNT] = {0};
    ph[SB_PHASE_DATA] = 1, ph[SB_PHASE_H2D] = 2, ph[SB_PHASE_FORWARD] = 4;
    ph[SB_PHASE_BACKWARD] = 8, ph[SB_PHASE_COMM] = 16, ph[SB_PHASE_OPTIMIZER] = 32;
    ph[SB_PHASE_WAIT] = 64, ph[SB_PHASE_COMM_EXPOSED] = 128;
    assert_near(sb_phase_compute_ms(ph), 15.0, EPS); /* 1 + 2 + 4 + 8 only */
    const double c[] = {3.0, 7.5, 5.0};
    assert_near(sb_phase_wait_ms(c, 3, 0), 4.5, EPS);
    assert_near(sb_phase_wait_ms(c, 3, 1), 0.0, EPS); /* the slowest never waits */
    assert_near(sb_phase_wait_ms(c, 3, 2), 2.5, EPS);
    assert_near(sb_phase_wait_ms(c, 1, 0), 0.0, EPS);
}

/* 3 ranks, 2 steps: wait_r(s) = max_q compute_q(s) - compute_r(s). */
static void test_fill_wait(void **state)
{
    (void)state;
    double ms[3 * SB_RANK_FIELDS * 2] = {0};
    struct sb_rank_timings t = {.n_ranks = 3, .n_steps = 2, .ms = ms};
    set_step(&t, 0, 0, 1, 2, 3, 10);   /* compute 6 */
    set_step(&t, 1, 0, 1, 4, 5, 11);   /* compute 10: slowest of step 0 */
    set_step(&t, 2, 0, 0, 3, 4, 12);   /* compute 7 */
    set_step(&t, 0, 1, 2, 5, 6, 13);   /* compute 13: slowest of step 1 */
    set_step(&t, 1, 1, 1, 1, 1, 14);   /* compute 3 */
    set_step(&t, 2, 1, 1, 2, 3, 15);   /* compute 6 */
    /* What a strategy reported is replaced. */
    sb_rank_timings_at(&t, 0, SB_RANK_FIELD_PHASE(SB_PHASE_WAIT))[0] = 99;
    assert_int_equal(sb_rank_timings_fill_wait(&t), SB_OK);
    const double want[3][2] = {{4, 0}, {0, 10}, {3, 7}};
    for (int r = 0; r < 3; r++)
        for (size_t s = 0; s < 2; s++)
            assert_near(sb_rank_timings_at(&t, r, SB_RANK_FIELD_PHASE(SB_PHASE_WAIT))[s],
                               want[r][s], EPS);
    /* One rank: untouched. */
    double one[SB_RANK_FIELDS] = {0};
    struct sb_rank_timings t1 = {.n_ranks = 1, .n_steps = 1, .ms = one};
    one[SB_RANK_FIELD_PHASE(SB_PHASE_WAIT)] = 0.25;
    assert_int_equal(sb_rank_timings_fill_wait(&t1), SB_OK);
    assert_near(one[SB_RANK_FIELD_PHASE(SB_PHASE_WAIT)], 0.25, EPS);
}

/* Per-rank medians, then min / median / max / skew / slowest across ranks. */
/* The straggler (rank_stats.h): the rank with the largest median compute,
 * its cost the median over steps of the others' mean wait for it (0 in a
 * step where it is not the slowest), per rank compute and wait; a rank
 * slowest only by chance costs little. Worked by hand. */
static void test_straggler(void **state)
{
    (void)state;
    double ms[3 * SB_RANK_FIELDS * 4] = {0};
    struct sb_rank_timings t = {.n_ranks = 3, .n_steps = 4, .ms = ms};
    /* compute per step: rank 0 {5,6,5,7}, rank 1 {45,46,44,8}, rank 2 {6,5,7,6} */
    const double c[3][4] = {{5, 6, 5, 7}, {45, 46, 44, 8}, {6, 5, 7, 6}};
    for (int r = 0; r < 3; r++)
        for (size_t s = 0; s < 4; s++) set_step(&t, r, s, 0, c[r][s], 0, 50);
    assert_int_equal(sb_rank_timings_fill_wait(&t), SB_OK);
    struct sb_straggler g;
    assert_int_equal(sb_rank_timings_straggler(&t, &g), SB_OK);
    assert_int_equal(g.ranks, 3);
    assert_int_equal(g.rank, 1);
    /* 45 - 5.5, 46 - 5.5, 44 - 6, 8 - 6.5 = 39.5, 40.5, 38, 1.5 -> median 38.75 */
    assert_near(g.cost_ms, 38.75, EPS);
    assert_near(g.slowest_fraction, 1.0, EPS);
    assert_near(g.compute_ms, 44.5, EPS);
    assert_near(g.others_compute_ms, 6.5, EPS); /* max of others: 6, 6, 7, 7 */
    assert_near(g.by_rank[1].wait_median, 0, EPS);
    assert_near(g.by_rank[0].wait_median, 39.5, EPS); /* waits 40, 40, 39, 1 */
    assert_near(g.by_rank[2].compute_mean, 6, EPS);
    sb_straggler_free(&g);

    /* Two ranks taking turns: the larger median is rank 1's but it is the
     * slowest only in half the steps: its cost is small. */
    double ms2[2 * SB_RANK_FIELDS * 4] = {0};
    struct sb_rank_timings u = {.n_ranks = 2, .n_steps = 4, .ms = ms2};
    const double d[2][4] = {{5, 7, 5, 7}, {6, 6.5, 8, 6.5}};
    for (int r = 0; r < 2; r++)
        for (size_t s = 0; s < 4; s++) set_step(&u, r, s, 0, d[r][s], 0, 10);
    assert_int_equal(sb_rank_timings_fill_wait(&u), SB_OK);
    assert_int_equal(sb_rank_timings_straggler(&u, &g), SB_OK);
    assert_int_equal(g.rank, 1);
    assert_near(g.cost_ms, 0.5, EPS); /* excess 1, 0, 3, 0 -> median 0.5 */
    assert_near(g.slowest_fraction, 0.5, EPS);
    sb_straggler_free(&g);

    /* A server (rank 0 of central: no compute in any step) is not among
     * the others: workers 1 and 2 at {6, 6, 6, 6} and {7, 7, 7, 7} cost 1
     * per step (not (7 + 1) / 2 with the server's wait); one worker and a
     * server: no one waits for it. */
    double ms3[3 * SB_RANK_FIELDS * 4] = {0};
    struct sb_rank_timings v = {.n_ranks = 3, .n_steps = 4, .ms = ms3};
    for (size_t s = 0; s < 4; s++) {
        set_step(&v, 0, s, 0, 0, 0, 8);
        set_step(&v, 1, s, 0, 6, 0, 8);
        set_step(&v, 2, s, 0, 7, 0, 8);
    }
    assert_int_equal(sb_rank_timings_fill_wait(&v), SB_OK);
    assert_int_equal(sb_rank_timings_straggler(&v, &g), SB_OK);
    assert_int_equal(g.rank, 2);
    assert_near(g.cost_ms, 1.0, EPS);
    assert_near(g.others_compute_ms, 6.0, EPS);
    assert_near(g.slowest_fraction, 1.0, EPS);
    assert_near(g.by_rank[0].wait_median, 7.0, EPS); /* the server still waits */
    sb_straggler_free(&g);
    v.n_ranks = 2; /* the server and worker 1 */
    assert_int_equal(sb_rank_timings_straggler(&v, &g), SB_OK);
    assert_int_equal(g.ranks, 2);
    assert_int_equal(g.rank, 1);
    assert_near(g.cost_ms, 0.0, EPS);
    assert_near(g.slowest_fraction, 0.0, EPS);
    assert_near(g.others_compute_ms, 0.0, EPS);
    sb_straggler_free(&g);

    /* One rank: none. */
    double one[SB_RANK_FIELDS] = {0};
    struct sb_rank_timings t1 = {.n_ranks = 1, .n_steps = 1, .ms = one};
    assert_int_equal(sb_rank_timings_straggler(&t1, &g), SB_OK);
    assert_int_equal(g.ranks, 0);
    assert_null(g.by_rank);
}

/* The line's rule (straggler.h): more than 5% of the step and the slowest
 * in at least 75% of the steps, both needed; equality is not enough. */
static void test_straggler_line_rule(void **state)
{
    (void)state;
    struct sb_straggler g = {.ranks = 2, .cost_ms = 0.6, .slowest_fraction = 0.75};
    assert_true(sb_straggler_line_due(&g, 10.0));   /* 6% of the step, 75% of the steps */
    g.cost_ms = 0.5;                                /* 0.05 * 10.0 == 0.5 in doubles */
    assert_false(sb_straggler_line_due(&g, 10.0));  /* exactly 5%: no line */
    g.cost_ms = 0.6;
    assert_false(sb_straggler_line_due(&g, 0.0));   /* no step median */
    g.slowest_fraction = 0.74;
    assert_false(sb_straggler_line_due(&g, 10.0));  /* slowest by chance */
    g.slowest_fraction = 1.0;
    g.cost_ms = 100.0;
    assert_true(sb_straggler_line_due(&g, 150.0));
    g.ranks = 0;
    assert_false(sb_straggler_line_due(&g, 150.0)); /* one rank: none */
}

static void test_spread(void **state)
{
    (void)state;
    double ms[4 * SB_RANK_FIELDS * 3] = {0};
    struct sb_rank_timings t = {.n_ranks = 4, .n_steps = 3, .ms = ms};
    /* Step times: rank medians 2, 9, 5, 9 (ranks 1 and 3 tie: the lower wins). */
    const double steps[4][3] = {{1, 2, 30}, {9, 8, 10}, {5, 4, 6}, {9, 9, 9}};
    for (int r = 0; r < 4; r++)
        for (size_t s = 0; s < 3; s++) {
            set_step(&t, r, s, 0, 0, 0, steps[r][s]);
            /* forward = rank r's step + 10 r: medians 2, 19, 25, 39. */
            sb_rank_timings_at(&t, r, SB_RANK_FIELD_PHASE(SB_PHASE_FORWARD))[s] =
                steps[r][s] + 10.0 * r;
        }
    struct sb_rank_spread step, phases[SB_PHASE_COUNT];
    assert_int_equal(sb_rank_timings_spread(&t, &step, phases), SB_OK);
    assert_int_equal(step.ranks, 4);
    assert_near(step.min, 2, EPS);
    assert_near(step.median, 7, EPS); /* type 7 over {2, 5, 9, 9}: (5 + 9) / 2 */
    assert_near(step.max, 9, EPS);
    assert_near(step.skew, 7, EPS);
    assert_int_equal(step.slowest_rank, 1);
    const struct sb_rank_spread *f = &phases[SB_PHASE_FORWARD];
    assert_near(f->min, 2, EPS);
    assert_near(f->median, 22, EPS); /* (19 + 25) / 2 */
    assert_near(f->max, 39, EPS);
    assert_near(f->skew, 37, EPS);
    assert_int_equal(f->slowest_rank, 3);
}

static struct sb_comm_request req(double start, double done)
{
    struct sb_comm_request r = {0};
    r.start_s = start;
    r.done_s = done;
    r.done = 1;
    return r;
}

/* Busy time is the union of the bucket intervals; exposed is its part after
 * backward ended; hidden = total - exposed. */
static void test_bucket_comm_times(void **state)
{
    (void)state;
    double total, exposed, hidden;
    /* Backward ends at 10. [1,4] and [3,6] merge to [1,6] (5, hidden);
     * [8,12] is 4, of which [10,12] = 2 exposed; [13,14] is 1 exposed. */
    const struct sb_comm_request r[] = {req(1, 4), req(3, 6), req(8, 12), req(13, 14)};
    sb_bucket_comm_times(r, 4, 10.0, &total, &exposed, &hidden);
    assert_near(total, 10.0, EPS);
    assert_near(exposed, 3.0, EPS);
    assert_near(hidden, 7.0, EPS);
    /* A request inside another counts once: [0,10] with [2,3]. */
    const struct sb_comm_request in[] = {req(0, 10), req(2, 3)};
    sb_bucket_comm_times(in, 2, 5.0, &total, &exposed, &hidden);
    assert_near(total, 10.0, EPS);
    assert_near(exposed, 5.0, EPS);
    assert_near(hidden, 5.0, EPS);
    /* No overlap (every bucket after backward): nothing hidden. */
    const struct sb_comm_request after[] = {req(10, 11), req(11.5, 12)};
    sb_bucket_comm_times(after, 2, 10.0, &total, &exposed, &hidden);
    assert_near(total, 1.5, EPS);
    assert_near(exposed, 1.5, EPS);
    assert_near(hidden, 0.0, EPS);
    sb_bucket_comm_times(r, 0, 10.0, &total, &exposed, &hidden);
    assert_near(total + exposed + hidden, 0.0, EPS);
}

/* nccl-tests PERFORMANCE.md: algbw = S / t; busbw = algbw x factor with
 * all-reduce 2(n-1)/n, broadcast 1; our push and pull are point-to-point, 1. */
static void test_bandwidths(void **state)
{
    (void)state;
    assert_near(sb_comm_algbw_GBps(3e9, 1.5), 2.0, EPS);
    assert_near(sb_comm_algbw_GBps(1e6, 0.0), 0.0, EPS);
    const int n[] = {1, 2, 3, 4, 8, 16};
    const double allreduce[] = {0.0, 1.0, 4.0 / 3.0, 1.5, 1.75, 1.875};
    for (int i = 0; i < 6; i++) {
        assert_near(sb_comm_busbw_factor(SB_COMM_ALLREDUCE, n[i]), allreduce[i], EPS);
        assert_near(sb_comm_busbw_factor(SB_COMM_BROADCAST, n[i]), 1.0, EPS);
        assert_near(sb_comm_busbw_factor(SB_COMM_PUSH, n[i]), 1.0, EPS);
        assert_near(sb_comm_busbw_factor(SB_COMM_PULL, n[i]), 1.0, EPS);
    }
    /* 4 ranks all-reducing 100 MB in 0.1 s: algbw 1 GB/s, busbw 1.5 GB/s. */
    double algbw = sb_comm_algbw_GBps(100e6, 0.1);
    assert_near(algbw * sb_comm_busbw_factor(SB_COMM_ALLREDUCE, 4), 1.5, 1e-9);
}

static void test_summary(void **state)
{
    (void)state;
    /* 1..100 shuffled a little: type 7 quantile q = x[q (n-1)] interpolated. */
    double x[100];
    for (int i = 0; i < 100; i++) x[i] = (double)((i * 37) % 100 + 1);
    struct sb_summary s;
    assert_int_equal(sb_summarize(x, 100, &s), SB_OK);
    assert_int_equal((int)s.n, 100);
    assert_near(s.median, 50.5, EPS);
    assert_near(s.p95, 95.05, 1e-9); /* h = 94.05: 95 + 0.05 */
    assert_near(s.p99, 99.01, 1e-9); /* h = 98.01: 99 + 0.01 */
    assert_near(s.min, 1, EPS);
    assert_near(s.max, 100, EPS);
    assert_near(s.mean, 50.5, EPS);
    const double sorted[] = {1, 2, 4, 8};
    assert_near(sb_quantile_sorted(sorted, 4, 0.0), 1, EPS);
    assert_near(sb_quantile_sorted(sorted, 4, 0.5), 3, EPS);
    assert_near(sb_quantile_sorted(sorted, 4, 0.9), 6.8, 1e-12); /* h 2.7: 4 + .7 x 4 */
    assert_near(sb_quantile_sorted(sorted, 4, 1.0), 8, EPS);
    double m;
    assert_int_equal(sb_median(sorted, 4, &m), SB_OK);
    assert_near(m, 3, EPS);
    assert_int_equal(sb_summarize(x, 0, &s), SB_OK);
    assert_int_equal((int)s.n, 0);
}

/* Share of the time in steps slower than 2 x median: the case, most
 * steps at full speed and a few preempted for milliseconds. */
static void test_stall_fraction(void **state)
{
    (void)state;
    const double x[] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 5, 6}; /* median 1; 2 is not > 2 x 1 */
    assert_near(sb_stall_fraction(x, 11, 1.0), 11.0 / 21.0, EPS);
    const double flat[] = {3, 3, 3};
    assert_near(sb_stall_fraction(flat, 3, 3.0), 0.0, EPS);
    assert_near(sb_stall_fraction(x, 0, 1.0), 0.0, EPS);
}

/* Expected bounds from an independent Python implementation of the same
 * procedure (SplitMix64 as src/core/rng.c, Lemire's bounded draw,
 * numpy.median of each resample, numpy.percentile "linear"). */
static void test_bootstrap_known_answers(void **state)
{
    (void)state;
    const double x[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    double lo, hi;
    assert_int_equal(sb_bootstrap_median_ci(x, 10, 0.95, 2000, 7, &lo, &hi), SB_OK);
    assert_near(lo, 12.0, EPS);
    assert_near(hi, 17.0, EPS);
    const double y[] = {1, 2, 3, 4, 100};
    assert_int_equal(sb_bootstrap_median_ci(y, 5, 0.8, 500, 1, &lo, &hi), SB_OK);
    assert_near(lo, 2.0, EPS);
    assert_near(hi, 4.0, EPS);
    const double num[] = {3, 5, 4, 8}, den[] = {2, 1, 1.5};
    assert_int_equal(sb_bootstrap_ratio_ci(num, 4, den, 3, 0.9, 1000, 20261121u, &lo, &hi),
                     SB_OK);
    assert_near(lo, 2.0, EPS);
    assert_near(hi, 6.5, EPS);
}

/* strong: r = T1/TN (epoch time), speedup r, efficiency r/N; weak: r =
 * T1/TN (wall time per step), speedup N r, efficiency r. */
static void test_speedup_and_efficiency(void **state)
{
    (void)state;
    double sp, eff;
    sb_scaling_from_ratio(3.0, 4, 0, &sp, &eff); /* 12 s -> 4 s on 4 replicas */
    assert_near(sp, 3.0, EPS);
    assert_near(eff, 0.75, EPS);
    sb_scaling_from_ratio(0.8, 4, 1, &sp, &eff); /* a step 1.25x longer, 4x the work */
    assert_near(sp, 3.2, EPS);
    assert_near(eff, 0.8, EPS);
    sb_scaling_from_ratio(1.0, 1, 0, &sp, &eff);
    assert_near(sp, 1.0, EPS);
    assert_near(eff, 1.0, EPS);
    sb_scaling_from_ratio(1.0, 1, 1, &sp, &eff);
    assert_near(sp, 1.0, EPS);
    assert_near(eff, 1.0, EPS);
}

/* Throughput = samples / wall seconds (never global batch / median step). */
static void test_samples_per_s(void **state)
{
    (void)state;
    assert_near(sb_samples_per_s(59904, 0.708), 59904 / 0.708, 1e-9);
    assert_near(sb_samples_per_s(100, 0), 0.0, EPS);
}

static void test_proc_stat_and_noise(void **state)
{
    (void)state;
    double steal, total;
    /* user nice system idle iowait irq softirq steal guest guest_nice */
    assert_int_equal(sb_proc_stat_cpu_parse("cpu  100 2 30 400 5 6 7 50 9 1\n", &steal, &total),
                     0);
    assert_near(steal, 50, EPS);
    assert_near(total, 600, EPS); /* the first 8: guest is inside user */
    assert_int_equal(sb_proc_stat_cpu_parse("cpu0 1 2 3 4 5 6 7 8\n", &steal, &total), -1);
    assert_int_equal(sb_proc_stat_cpu_parse("cpu  1 2 3\n", &steal, &total), -1);
    struct sb_noise_sample a = {10, 50, 600, 1.5, 3.25}, b = {35, 80, 1100, 2.0, 4.0};
    struct sb_rank_noise z;
    sb_noise_delta(&a, &b, 100.0, &z);
    assert_near(z.cpu_s, 0.75, EPS); /* end - start */
    assert_near(z.involuntary_context_switches, 25, EPS);
    assert_near(z.runqueue_wait_s, 0.5, EPS); /* runnable, waiting for a CPU */
    assert_near(z.cpu_steal_s, 0.3, EPS);       /* 30 ticks at 100 per s */
    assert_near(z.cpu_steal_fraction, 0.06, EPS); /* 30 of 500 ticks */
    b.steal_ticks = -1;
    sb_noise_delta(&a, &b, 100.0, &z);
    assert_true(z.cpu_steal_s < 0 && z.cpu_steal_fraction < 0);
    /* A real sample reads: context switches never go backwards. */
    struct sb_noise_sample now;
    sb_noise_sample_now(&now);
    assert_true(now.nivcsw >= 0);
    /* schedstat: this machine's kernel has it (where it has not: -1) */
    assert_true(now.runqueue_wait_s >= 0 || now.runqueue_wait_s == -1.0);
    a.runqueue_wait_s = -1; /* unknown at the start: unknown delta */
    sb_noise_delta(&a, &b, 100.0, &z);
    assert_true(z.runqueue_wait_s < 0);
}

/* The consistency check's pieces: FNV-1a 64 (published test vector: the
 * empty input hashes to the offset basis; "a" = 0xaf63dc4c8601ec8c), the
 * largest absolute difference and the tolerance. */
static void test_consistency_pieces(void **state)
{
    (void)state;
    assert_true(sb_params_hash(NULL, 0) == 0xcbf29ce484222325ull);
    const float x[] = {1.0f, -2.0f, 3.5f}, y[] = {1.0f, -2.25f, 3.0f};
    assert_true(sb_params_hash(x, 3) == sb_params_hash(x, 3));
    assert_true(sb_params_hash(x, 3) != sb_params_hash(y, 3));
    const float z0[] = {0.0f}, zm[] = {-0.0f}; /* equal as numbers, not as bits */
    assert_true(sb_params_hash(z0, 1) != sb_params_hash(zm, 1));
    assert_near(sb_params_max_abs_diff(x, y, 3), 0.5, EPS);
    assert_near(sb_params_max_abs_diff(y, x, 3), 0.5, EPS);
    assert_near(sb_params_max_abs_diff(x, x, 3), 0.0, EPS);
    const float n[] = {1.0f, NAN, 3.5f};
    assert_true(isinf(sb_params_max_abs_diff(n, x, 3)));
    assert_near(sb_consistency_tolerance(0.2), 1e-4, EPS);
    assert_near(sb_consistency_tolerance(50.0), 5e-3, EPS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_and_wait),
        cmocka_unit_test(test_fill_wait),
        cmocka_unit_test(test_straggler),
        cmocka_unit_test(test_straggler_line_rule),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_bucket_comm_times),
        cmocka_unit_test(test_bandwidths),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_stall_fraction),
        cmocka_unit_test(test_bootstrap_known_answers),
        cmocka_unit_test(test_speedup_and_efficiency),
        cmocka_unit_test(test_samples_per_s),
        cmocka_unit_test(test_proc_stat_and_noise),
        cmocka_unit_test(test_consistency_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
