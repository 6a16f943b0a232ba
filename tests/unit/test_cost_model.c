/* Unit tests for the α–β cost model (src/comm/cost_model.c), the auto
 * rule of --allreduce (src/comm/allreduce_algo.c) and the strategies' own
 * formulas (central's in strategies/central.c, the buckets' overlap bound
 * in strategies/shared/buckets.c): each formula against an
 * answer worked by hand on a link of α = 100 µs, B = 100 MB/s, M = 8 MB
 * (one message of M: 0.0801 s). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "comm/allreduce_algo.h"
#include "comm/cost_model.h"
#include "strategies/shared/buckets.h"
#include "strategies/shared/central.h"

#define M 8e6
static const struct sb_link link = {.alpha_s = 1e-4, .bandwidth_Bps = 1e8, .gamma_s_per_byte = 0.0};
#define EPS 1e-12

static void test_message(void **state)
{
    (void)state;
    assert_float_equal(sb_cost_message_s(&link, M), 0.0801, EPS);
    assert_float_equal(sb_cost_message_s(&link, 0), 1e-4, EPS);
}

static void test_ring(void **state)
{
    (void)state;
    /* 2(p-1)(α + M/(pB)) */
    assert_float_equal(sb_cost_ring_allreduce_s(&link, 1, M), 0.0, EPS);
    assert_float_equal(sb_cost_ring_allreduce_s(&link, 2, M), 2 * (1e-4 + 0.04), EPS);
    assert_float_equal(sb_cost_ring_allreduce_s(&link, 4, M), 6 * (1e-4 + 0.02), EPS);
    assert_float_equal(sb_cost_ring_allreduce_s(&link, 3, M), 4 * (1e-4 + 0.08 / 3), EPS);
    /* γ: (p-1)/p M γ */
    struct sb_link g = link;
    g.gamma_s_per_byte = 1e-9;
    assert_float_equal(sb_cost_ring_allreduce_s(&g, 2, M), 2 * (1e-4 + 0.04) + 0.004, EPS);
}

static void test_recursive_doubling(void **state)
{
    (void)state;
    assert_float_equal(sb_cost_recursive_doubling_s(&link, 1, M), 0.0, EPS);
    assert_float_equal(sb_cost_recursive_doubling_s(&link, 2, M), 0.0801, EPS);
    assert_float_equal(sb_cost_recursive_doubling_s(&link, 4, M), 2 * 0.0801, EPS);
    /* p = 3: one exchange among p' = 2, plus the pre- and post-step */
    assert_float_equal(sb_cost_recursive_doubling_s(&link, 3, M), 3 * 0.0801, EPS);
    assert_float_equal(sb_cost_recursive_doubling_s(&link, 6, M), 4 * 0.0801, EPS);
    struct sb_link g = link;
    g.gamma_s_per_byte = 1e-9; /* lg p' M γ, + M γ for the pre-step */
    assert_float_equal(sb_cost_recursive_doubling_s(&g, 3, M), 3 * 0.0801 + 2 * 0.008, EPS);
}

static void test_binomial(void **state)
{
    (void)state;
    /* 2 ceil(lg p) (α + M/B): the 2M/B issue 8 measured at p = 2 */
    assert_float_equal(sb_cost_binomial_allreduce_s(&link, 1, M), 0.0, EPS);
    assert_float_equal(sb_cost_binomial_allreduce_s(&link, 2, M), 2 * 0.0801, EPS);
    assert_float_equal(sb_cost_binomial_allreduce_s(&link, 3, M), 4 * 0.0801, EPS);
    assert_float_equal(sb_cost_binomial_allreduce_s(&link, 8, M), 6 * 0.0801, EPS);
}

static void test_central(void **state)
{
    (void)state;
    /* k dedicated servers: max(2(kα + M/B), 2n(α + M/(kB))) (BytePS's bound; a
     * message each way per peer, α each); M/B = 0.08 s */
    assert_float_equal(sb_central_cost_s(&link, 2, 1, M), 4 * (1e-4 + 0.08), EPS);
    assert_float_equal(sb_central_cost_s(&link, 2, 2, M), 4e-4 + 0.16, EPS); /* both links */
    assert_float_equal(sb_central_cost_s(&link, 2, 4, M), 8e-4 + 0.16, EPS); /* the worker's */
    assert_float_equal(sb_central_cost_s(&link, 8, 2, M), 16 * (1e-4 + 0.04), EPS);
    assert_float_equal(sb_central_cost_s(&link, 1, 1, M), 2e-4 + 0.16, EPS);
    /* rank 0 serves and trains: n - 1 gradients cross its link, a message each */
    assert_float_equal(sb_central_cost_s(&link, 3, 0, M), 4 * (1e-4 + 0.08), EPS);
    assert_float_equal(sb_central_cost_s(&link, 2, 0, M), 2 * (1e-4 + 0.08), EPS);
    assert_float_equal(sb_central_cost_s(&link, 1, 0, M), 0.0, EPS);
}

/* The ring's reduce-scatter and all-gather: p-1 steps of one block each
 * (the all-gather reduces nothing: no γ); M in u units in flight together
 * pays α for each ring step and once more per unit after the first, the
 * bytes once (Pješivac-Grbović et al. 2007's pipelined chain). */
static void test_reduce_scatter_allgather(void **state)
{
    (void)state;
    assert_float_equal(sb_cost_reduce_scatter_s(&link, 1, M, 1), 0.0, EPS);
    assert_float_equal(sb_cost_reduce_scatter_s(&link, 1, M, 3), 0.0, EPS);
    /* 1 step of M/2 */
    assert_float_equal(sb_cost_reduce_scatter_s(&link, 2, M, 1), 1e-4 + 0.04, EPS);
    /* 4 steps of M/5 */
    assert_float_equal(sb_cost_reduce_scatter_s(&link, 5, M, 1), 4 * (1e-4 + 0.016), EPS);
    const struct sb_link g = {.alpha_s = 1e-4,
                              .bandwidth_Bps = 1e8,
                              .gamma_s_per_byte = 1e-9}; /* γ: 3/4 of M reduced, 6 ms */
    assert_float_equal(sb_cost_reduce_scatter_s(&g, 4, M, 1), 3 * (1e-4 + 0.02) + 0.006, EPS);
    assert_float_equal(sb_cost_allgather_s(&link, 1, M, 1), 0.0, EPS);
    /* 3 steps of M/4 */
    assert_float_equal(sb_cost_allgather_s(&link, 4, M, 1), 3 * (1e-4 + 0.02), EPS);
    assert_float_equal(sb_cost_allgather_s(&g, 4, M, 1), 3 * (1e-4 + 0.02), EPS);
    /* 3 units at p = 4: (4 - 2 + 3) = 5 α, not 3 x 3 = 9; the bytes the
     * same; u < 1 counts as 1; at p = 2 the units' α add up (u α) */
    assert_float_equal(sb_cost_allgather_s(&link, 4, M, 3), 5e-4 + 3 * 0.02, EPS);
    assert_float_equal(sb_cost_reduce_scatter_s(&g, 4, M, 3), 5e-4 + 3 * 0.02 + 0.006, EPS);
    assert_float_equal(sb_cost_allgather_s(&link, 4, M, 0), 3 * (1e-4 + 0.02), EPS);
    assert_float_equal(sb_cost_reduce_scatter_s(&link, 2, M, 3), 3e-4 + 0.04, EPS);
    assert_float_equal(sb_cost_allgather_s(&link, 8, M, 8), 14e-4 + 7 * M / 8 / 1e8, EPS);
}

static void test_ddp_exposed(void **state)
{
    (void)state;
    double bytes[] = {4, 4}, comm[] = {3, 3};
    /* ready at 4 and 8; done 7, then max(8, 7) + 3 = 11: 3 after backward */
    assert_float_equal(sb_bucket_exposed_s(bytes, comm, 2, 8.0), 3.0, EPS);
    /* no overlap: everything exposed */
    assert_float_equal(sb_bucket_exposed_s(bytes, comm, 2, 0.0), 6.0, EPS);
    /* a long backward hides all but the last bucket */
    assert_float_equal(sb_bucket_exposed_s(bytes, comm, 2, 100.0), 3.0, EPS);
    /* one bucket is ready only at the end: nothing hides */
    double one_b[] = {8}, one_c[] = {5};
    assert_float_equal(sb_bucket_exposed_s(one_b, one_c, 1, 10.0), 5.0, EPS);
    /* comm slower than backward: the queue backs up */
    double b3[] = {1, 1, 2}, c3[] = {4, 4, 4};
    /* ready 1, 2, 4; done 5, 9, 13; backward 4 -> 9 exposed */
    assert_float_equal(sb_bucket_exposed_s(b3, c3, 3, 4.0), 9.0, EPS);
    assert_float_equal(sb_bucket_exposed_s(b3, c3, 0, 4.0), 0.0, EPS);
}

static void test_auto_rule(void **state)
{
    (void)state;
    /* p = 2: ring from 2α/γ = 160 kB on the reference link */
    assert_int_equal(sb_allreduce_choose(1000, 2), SB_ALLREDUCE_RECURSIVE_DOUBLING);
    assert_int_equal(sb_allreduce_choose(150000, 2), SB_ALLREDUCE_RECURSIVE_DOUBLING);
    assert_int_equal(sb_allreduce_choose(170000, 2), SB_ALLREDUCE_RING);
    assert_int_equal(sb_allreduce_choose(7454760, 2), SB_ALLREDUCE_RING);
    /* p = 3 (not a power of two): ring from ~12 kB */
    assert_int_equal(sb_allreduce_choose(4096, 3), SB_ALLREDUCE_RECURSIVE_DOUBLING);
    assert_int_equal(sb_allreduce_choose(16384, 3), SB_ALLREDUCE_RING);
    /* many ranks: small messages stay latency-bound */
    assert_int_equal(sb_allreduce_choose(4096, 64), SB_ALLREDUCE_RECURSIVE_DOUBLING);
    assert_int_equal(sb_allreduce_choose(100000000, 64), SB_ALLREDUCE_RING);
    assert_int_equal(sb_allreduce_choose(1000, 1), SB_ALLREDUCE_RING);
}

/* Two hosts of two ranks, M = 8 MB, every link alike (γ = 0): each
 * intra-host stage (L-1)(α + M/(LB)) = 0.0401 s, the cross ring over 2
 * hosts of M/2: 2(α + M/(4B)) = 0.0402 s; 0.1204 s against the flat
 * ring's 6(α + M/(4B)) = 0.1206 s: the same bandwidth term, 2α fewer. */
static void test_hierarchical(void **state)
{
    (void)state;
    double t = sb_cost_hierarchical_allreduce_s(&link, &link, SB_ALLREDUCE_RING, 2, 2, M);
    assert_float_equal(t, 0.1204, EPS);
    assert_float_equal(sb_cost_ring_allreduce_s(&link, 4, M), 0.1206, EPS);
    /* one rank per host: only the cross stage; one host: only the two ring passes */
    assert_float_equal(sb_cost_hierarchical_allreduce_s(&link, &link, SB_ALLREDUCE_RING, 1, 4, M),
                       sb_cost_ring_allreduce_s(&link, 4, M), EPS);
    assert_float_equal(sb_cost_hierarchical_allreduce_s(&link, &link, SB_ALLREDUCE_RING, 4, 1, M),
                       2 * 3 * (1e-4 + 2e6 / 1e8), EPS);
    /* auto with hosts: hierarchical only for 2+ hosts of 2+ ranks */
    assert_int_equal(sb_allreduce_choose_hosts(7454760, 4, 2), SB_ALLREDUCE_HIERARCHICAL);
    assert_int_equal(sb_allreduce_choose_hosts(7454760, 4, 1), SB_ALLREDUCE_RING);
    assert_int_equal(sb_allreduce_choose_hosts(7454760, 4, 4), SB_ALLREDUCE_RING);
    assert_int_equal(sb_allreduce_choose_hosts(1000, 2, 1), SB_ALLREDUCE_RECURSIVE_DOUBLING);
    assert_int_equal(sb_allreduce_choose_hosts(7454760, 6, 4), SB_ALLREDUCE_RING);
}

/* A sized link (issue 35): class 0 (below 1 MB) α 10 µs, B 1 GB/s; class
 * 1 (1 MB and up) α 100 µs, B 100 MB/s; γ 1 ns per byte. Each formula
 * prices each message by its own size's class and adds γ per byte
 * reduced (Thakur et al. 2005; Chan et al. 2007). */
static void test_sized(void **state)
{
    (void)state;
    struct sb_link s = {.alpha_s = 1.0, .bandwidth_Bps = 1.0, .gamma_s_per_byte = 1e-9,
                        .n_sizes = 2, .size_bytes = {0.0, 1e6},
                        .size_alpha_s = {1e-5, 1e-4}, .size_bandwidth_Bps = {1e9, 1e8}};
    struct sb_link c = sb_link_at(&s, 999999);
    assert_float_equal(c.alpha_s, 1e-5, EPS);
    assert_float_equal(c.bandwidth_Bps, 1e9, EPS);
    assert_int_equal(c.n_sizes, 0);
    assert_float_equal(c.gamma_s_per_byte, 1e-9, EPS);
    assert_float_equal(sb_link_at(&s, 1e6).bandwidth_Bps, 1e8, EPS);
    assert_float_equal(sb_link_at(&s, 1e12).alpha_s, 1e-4, EPS);
    assert_float_equal(sb_link_at(&link, 5).bandwidth_Bps, 1e8, EPS); /* unsized: itself */
    assert_float_equal(sb_cost_message_s(&s, 1e5), 1e-5 + 1e-4, EPS);
    assert_float_equal(sb_cost_message_s(&s, 2e6), 1e-4 + 0.02, EPS);
    /* ring p 4, M 8 MB: blocks of 2 MB (class 1), 6 (α + 0.02) + 3/4 M γ */
    assert_float_equal(sb_cost_ring_allreduce_s(&s, 4, M), 6 * (1e-4 + 0.02) + 0.006, EPS);
    /* ring p 4, M 2 MB: blocks of 500 kB (class 0) */
    assert_float_equal(sb_cost_ring_allreduce_s(&s, 4, 2e6), 6 * (1e-5 + 5e-4) + 1.5e-3, EPS);
    /* recursive doubling p 2, M 500 kB: one exchange of M and M γ */
    assert_float_equal(sb_cost_recursive_doubling_s(&s, 2, 5e5), 1e-5 + 5e-4 + 5e-4, EPS);
    /* recursive doubling p 4, M 2 MB: 2 exchanges of the whole M (class 1) */
    assert_float_equal(sb_cost_recursive_doubling_s(&s, 4, 2e6), 2 * (1e-4 + 0.02 + 2e-3), EPS);
    assert_float_equal(sb_cost_reduce_scatter_s(&s, 4, 2e6, 1), 3 * (1e-5 + 5e-4) + 1.5e-3, EPS);
    assert_float_equal(sb_cost_allgather_s(&s, 4, 8e6, 1), 3 * (1e-4 + 0.02), EPS);
    /* hierarchical 2 x 2, M 8 MB: intra passes of 4 MB (class 1), γ on 1/2 M, cross ring
     * of M/2 at p 2 (blocks 2 MB, class 1) with its own γ 1/2 x M/2 */
    double h = sb_cost_hierarchical_allreduce_s(&s, &s, SB_ALLREDUCE_RING, 2, 2, M);
    assert_float_equal(h, 2 * (1e-4 + 0.04) + 0.004 + 2 * (1e-4 + 0.02) + 0.002, EPS);
}

/* Exchange classes (2026-11-29): a link whose one-way classes are slow
 * (10 MB/s) and whose exchange classes fast (100 MB/s, α 1 µs, and a
 * second class from 1 MB at 50 MB/s): the rings and recursive doubling's
 * swaps are priced with the exchange classes, one-way sends (a message,
 * the binomial tree, recursive doubling's post-step) with the one-way
 * ones; sb_link_exchange swaps the tables and clears its own. */
static void test_exchange(void **state)
{
    (void)state;
    struct sb_link s = {.alpha_s = 1.0, .bandwidth_Bps = 1.0, .gamma_s_per_byte = 0.0,
                        .n_sizes = 1, .size_bytes = {0.0}, .size_alpha_s = {1e-4},
                        .size_bandwidth_Bps = {1e7}, .n_exchange_sizes = 2,
                        .exchange_bytes = {0.0, 1e6}, .exchange_alpha_s = {1e-6, 2e-6},
                        .exchange_bandwidth_Bps = {1e8, 5e7}};
    struct sb_link x = sb_link_exchange(&s);
    assert_int_equal(x.n_sizes, 2);
    assert_int_equal(x.n_exchange_sizes, 0);
    assert_float_equal(x.size_bytes[1], 1e6, 0.0);
    assert_float_equal(x.size_bandwidth_Bps[1], 5e7, 0.0);
    assert_float_equal(x.alpha_s, 1.0, 0.0);
    struct sb_link plain = {.alpha_s = 1e-4, .bandwidth_Bps = 1e7};
    assert_float_equal(sb_link_exchange(&plain).bandwidth_Bps, 1e7, 0.0); /* none: itself */
    assert_float_equal(sb_cost_message_s(&s, 1e5), 1e-4 + 1e-2, EPS);
    /* ring p 4, M 2 MB: blocks of 500 kB in exchange class 0 */
    assert_float_equal(sb_cost_ring_allreduce_s(&s, 4, 2e6), 6 * (1e-6 + 5e-3), EPS);
    /* ring p 2, M 4 MB: blocks of 2 MB in exchange class 1 */
    assert_float_equal(sb_cost_ring_allreduce_s(&s, 2, 4e6), 2 * (2e-6 + 0.04), EPS);
    assert_float_equal(sb_cost_reduce_scatter_s(&s, 4, 2e6, 1), 3 * (1e-6 + 5e-3), EPS);
    assert_float_equal(sb_cost_allgather_s(&s, 4, 2e6, 1), 3 * (1e-6 + 5e-3), EPS);
    /* recursive doubling p 2: one swap; p 3: pre-step swap + swap + one-way post */
    assert_float_equal(sb_cost_recursive_doubling_s(&s, 2, 1e5), 1e-6 + 1e-3, EPS);
    assert_float_equal(sb_cost_recursive_doubling_s(&s, 3, 1e5),
                       2 * (1e-6 + 1e-3) + 1e-4 + 1e-2, EPS);
    /* the binomial tree's sends are one way */
    assert_float_equal(sb_cost_binomial_allreduce_s(&s, 2, 1e5), 2 * (1e-4 + 1e-2), EPS);
    /* hierarchical 2 x 2, M 2 MB: the within-host passes of 1 MB swap */
    double h = sb_cost_hierarchical_allreduce_s(&s, &s, SB_ALLREDUCE_RING, 2, 2, 2e6);
    assert_float_equal(h, 2 * (2e-6 + 0.02) + 2 * (1e-6 + 5e-3), EPS);
    /* the fit into the exchange classes leaves the one-way ones */
    double m[2] = {1e4, 1e5}, t[2] = {1e-4 + 1e-4, 1e-4 + 1e-3};
    sb_link_fit_exchange(m, t, 2, &s);
    assert_int_equal(s.n_exchange_sizes, 1);
    assert_float_equal(s.exchange_bandwidth_Bps[0], 1e8, 1e-3);
    assert_float_equal(s.exchange_alpha_s[0], 1e-4, 1e-12);
    assert_int_equal(s.n_sizes, 1);
    assert_float_equal(s.size_bandwidth_Bps[0], 1e7, 0.0);
}

/* The probe's class fit (sb_link_fit_sized): rungs on the Hockney lines of
 * a link that is 1 GB/s with α 10 µs up to 1 MB and 100 MB/s beyond (a
 * knee, as shared memory leaving the cache): each class recovers its line;
 * a time that does not grow falls back to m / t; a negative intercept is
 * clamped to 0; n < 2 gives no classes. */
static void test_fit_sized(void **state)
{
    (void)state;
    double m[3] = {2.5e5, 1e6, 4e6};
    double t[3] = {1e-5 + 2.5e5 / 1e9, 1e-5 + 1e6 / 1e9, 1e-5 + 1e6 / 1e9 + 3e6 / 1e8};
    struct sb_link l = {.alpha_s = 7.0, .bandwidth_Bps = 8.0, .gamma_s_per_byte = 9.0};
    sb_link_fit_sized(m, t, 3, &l);
    assert_int_equal(l.n_sizes, 2);
    assert_float_equal(l.size_bytes[0], 0.0, 0.0);
    assert_float_equal(l.size_bytes[1], 1e6, 0.0);
    assert_float_equal(l.size_bandwidth_Bps[0], 1e9, 1e-3);
    assert_float_equal(l.size_alpha_s[0], 1e-5, 1e-15);
    assert_float_equal(l.size_bandwidth_Bps[1], 1e8, 1e-6);
    /* the line through (1 MB, 1.01 ms) of slope 1/1e8: intercept < 0, clamped */
    assert_float_equal(l.size_alpha_s[1], 0.0, 0.0);
    assert_float_equal(l.alpha_s, 7.0, 0.0); /* α, B, γ untouched */
    assert_float_equal(l.gamma_s_per_byte, 9.0, 0.0);
    /* a 3 MB message is priced on the second line's slope */
    assert_float_equal(sb_cost_message_s(&l, 3e6), 3e6 / 1e8, 1e-12);
    double flat[2] = {1e-3, 1e-3};
    sb_link_fit_sized(m, flat, 2, &l);
    assert_int_equal(l.n_sizes, 1);
    assert_float_equal(l.size_bandwidth_Bps[0], 1e6 / 1e-3, 1e-3);
    sb_link_fit_sized(m, t, 1, &l);
    assert_int_equal(l.n_sizes, 0);
}

static void test_names(void **state)
{
    (void)state;
    const char *names[] = {"auto", "ring", "recursive-doubling", "mpi", "hierarchical"};
    for (int a = 0; a < SB_ALLREDUCE_NALGOS; a++) {
        enum sb_allreduce_algo got;
        assert_string_equal(sb_allreduce_algo_name((enum sb_allreduce_algo)a), names[a]);
        assert_int_equal(sb_allreduce_algo_parse(names[a], &got), 0);
        assert_int_equal(got, a);
    }
    enum sb_allreduce_algo got;
    assert_int_equal(sb_allreduce_algo_parse("tree", &got), -1);
    assert_int_equal(sb_allreduce_algo_parse("", &got), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message),       cmocka_unit_test(test_ring),
        cmocka_unit_test(test_recursive_doubling), cmocka_unit_test(test_binomial),
        cmocka_unit_test(test_central),
        cmocka_unit_test(test_reduce_scatter_allgather),       cmocka_unit_test(test_ddp_exposed),
        cmocka_unit_test(test_auto_rule),     cmocka_unit_test(test_names),
        cmocka_unit_test(test_hierarchical), cmocka_unit_test(test_sized),
        cmocka_unit_test(test_exchange),
        cmocka_unit_test(test_fit_sized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
