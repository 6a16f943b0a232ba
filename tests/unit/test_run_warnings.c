/* sb_run_warnings_check: oversubscription (compute threads > cores), a noisy
 * run (stall fraction above SB_WARN_STALL_FRACTION, involuntary context
 * switches per second of training above SB_WARN_NIVCSW_PER_S on any rank),
 * each at and just past its threshold, and the one printed line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "harness/run_warnings.h"

/* A quiet two-rank record of 2 s of training. */
static void quiet(struct sb_run_record *rec, struct sb_rank_noise noise[2])
{
    memset(rec, 0, sizeof *rec);
    memset(noise, 0, 2 * sizeof *noise);
    rec->world_size = 2;
    rec->train_seconds = 2.0;
    rec->noise_by_rank = noise;
}

static void test_quiet_run_has_no_warning(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_rank_noise noise[2];
    quiet(&rec, noise);
    noise[1].involuntary_context_switches = 2.0 * SB_WARN_NIVCSW_PER_S; /* exactly at it */
    sb_run_warnings_check(&rec, 2, 2, SB_WARN_STALL_FRACTION);          /* 2 threads, 2 cores */
    assert_int_equal(rec.n_warnings, 0);
}

static void test_oversubscribed(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_rank_noise noise[2];
    quiet(&rec, noise);
    sb_run_warnings_check(&rec, 3, 2, 0.0);
    assert_int_equal(rec.n_warnings, 1);
    assert_non_null(strstr(rec.warnings[0], "oversubscribed: 3 compute threads"));
    assert_non_null(strstr(rec.warnings[0], "on 2 cores"));
}

static void test_noisy(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_rank_noise noise[2];
    quiet(&rec, noise);
    noise[1].involuntary_context_switches = 2.0 * SB_WARN_NIVCSW_PER_S + 2; /* rank 1 only */
    sb_run_warnings_check(&rec, 1, 2, SB_WARN_STALL_FRACTION + 0.01);
    assert_int_equal(rec.n_warnings, 2);
    assert_non_null(strstr(rec.warnings[0], "11% of the step time in stalled steps"));
    assert_non_null(strstr(rec.warnings[1], "1001 involuntary context switches per second"));
}

/* Pipeline messages above the eager limit in effect warn on a job of
 * several hosts (each goes by rendezvous); not on one host (no TCP), not
 * when they fit (64 bytes of header room), not when the limit is unknown. */
static void test_rendezvous(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_rank_noise noise[2];
    quiet(&rec, noise);
    rec.n_hosts = 2;
    rec.p2p_max_bytes = 65536;
    rec.tcp_eager_limit_bytes = 65536;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 1);
    assert_non_null(strstr(rec.warnings[0], "rendezvous: pipeline messages of 65536 bytes"));
    assert_non_null(strstr(rec.warnings[0], "(65536 bytes, 64 of them header room)"));
    rec.n_hosts = 1;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 0);
    rec.n_hosts = 2;
    rec.tcp_eager_limit_bytes = 65536 + 64;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 0);
    rec.tcp_eager_limit_bytes = 0;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 0);
}

/* All-reduce messages above the eager limit in effect warn on several
 * hosts, naming the limit that would send them eagerly; a message that fits
 * the default under a smaller user limit names the default. */
static void test_collective_rendezvous(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_rank_noise noise[2];
    quiet(&rec, noise);
    rec.n_hosts = 2;
    rec.collective_max_bytes = 1048576;
    rec.tcp_eager_limit_bytes = 65536;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 1);
    assert_non_null(strstr(rec.warnings[0], "rendezvous: collectives' messages of up to 1048576 "
                                            "bytes exceed the TCP eager limit in effect (65536"));
    assert_non_null(strstr(rec.warnings[0], "raise it to 1052672"));
    rec.collective_max_bytes = 32768;
    rec.tcp_eager_limit_bytes = 16384;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 1);
    assert_non_null(strstr(rec.warnings[0], "raise it to 65536"));
    rec.n_hosts = 1;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 0);
    rec.n_hosts = 2;
    rec.tcp_eager_limit_bytes = 1052672;
    rec.collective_max_bytes = 1048576;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 0);
    /* both kinds at once: two entries */
    rec.tcp_eager_limit_bytes = 65536;
    rec.p2p_max_bytes = 131072;
    sb_run_warnings_check(&rec, 2, 2, 0.0);
    assert_int_equal(rec.n_warnings, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_run_has_no_warning),
        cmocka_unit_test(test_oversubscribed),
        cmocka_unit_test(test_noisy),
        cmocka_unit_test(test_rendezvous),
        cmocka_unit_test(test_collective_rendezvous),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
