/* comm/wait_policy.h: --wait's names, auto's rule (sleep exactly when the
 * machine's compute threads exceed its cores), and the backoff: no pause
 * under spin or within the first SB_WAIT_SPIN_S, then sleeps that double
 * from SB_WAIT_SLEEP_MIN_S to SB_WAIT_SLEEP_MAX_S and leave the CPU
 * (CPU time far below the wall time spent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <time.h>

#include "comm/wait_policy.h"
#include "core/clock.h"

static void test_names(void **state)
{
    (void)state;
    enum sb_wait_choice c = SB_WAIT_CHOICE_AUTO;
    assert_int_equal(sb_wait_choice_parse("sleep", &c), 0);
    assert_int_equal(c, SB_WAIT_CHOICE_SLEEP);
    assert_int_equal(sb_wait_choice_parse("spin", &c), 0);
    assert_int_equal(c, SB_WAIT_CHOICE_SPIN);
    assert_int_equal(sb_wait_choice_parse("auto", &c), 0);
    assert_int_equal(c, SB_WAIT_CHOICE_AUTO);
    assert_int_equal(sb_wait_choice_parse("yield", &c), -1);
    assert_int_equal(sb_wait_choice_parse("", &c), -1);
    assert_string_equal(sb_wait_policy_name(SB_WAIT_SLEEP), "sleep");
}

static void test_auto_rule(void **state)
{
    (void)state;
    /* 4 ranks x 1 thread on 2 cores (the 2 x 2 cluster fixture): sleep. */
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_AUTO, 4, 2), SB_WAIT_SLEEP);
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_AUTO, 3, 2), SB_WAIT_SLEEP);
    /* As many threads as cores: every rank has its own; spin. */
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_AUTO, 2, 2), SB_WAIT_SPIN);
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_AUTO, 1, 64), SB_WAIT_SPIN);
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_AUTO, 8, 0), SB_WAIT_SPIN);
    /* The user's choice wins either way. */
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_SPIN, 8, 2), SB_WAIT_SPIN);
    assert_int_equal(sb_wait_policy_resolve(SB_WAIT_CHOICE_SLEEP, 1, 8), SB_WAIT_SLEEP);
}

static double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_spin_never_pauses(void **state)
{
    (void)state;
    sb_wait_policy_set(SB_WAIT_SPIN);
    struct sb_wait_backoff b;
    double t0 = sb_now_s();
    sb_wait_backoff_begin(&b, t0);
    for (int i = 0; i < 1000; i++) sb_wait_backoff_idle(&b, t0 + 1.0); /* long past the spin */
    assert_true(b.sleep_s == SB_WAIT_SLEEP_MIN_S);
    assert_true(sb_now_s() - t0 < 0.05); /* 1000 sleeps would take >= 10 ms */
}

static void test_sleep_backs_off_and_leaves_the_cpu(void **state)
{
    (void)state;
    sb_wait_policy_set(SB_WAIT_SLEEP);
    struct sb_wait_backoff b;
    double t0 = sb_now_s();
    sb_wait_backoff_begin(&b, t0);
    /* Within the spin: no sleep, no growth. */
    sb_wait_backoff_idle(&b, t0);
    assert_true(b.sleep_s == SB_WAIT_SLEEP_MIN_S);
    /* Past it: 10, 20, 40, 80, then 100 us at most. */
    double want[] = {20e-6, 40e-6, 80e-6, 100e-6, 100e-6};
    for (int i = 0; i < 5; i++) {
        sb_wait_backoff_idle(&b, t0 + 1.0);
        assert_true(b.sleep_s > want[i] * 0.999 && b.sleep_s < want[i] * 1.001);
    }
    /* 200 sleeps of 100 us: >= 20 ms of wall time, a few ms of CPU. */
    double w0 = sb_now_s(), c0 = cpu_now_s();
    for (int i = 0; i < 200; i++) sb_wait_backoff_idle(&b, t0 + 1.0);
    double wall = sb_now_s() - w0, cpu = cpu_now_s() - c0;
    assert_true(wall >= 200 * SB_WAIT_SLEEP_MAX_S * 0.99);
    assert_true(cpu < 0.25 * wall);
    sb_wait_policy_set(SB_WAIT_SPIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_auto_rule),
        cmocka_unit_test(test_spin_never_pauses),
        cmocka_unit_test(test_sleep_backs_off_and_leaves_the_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
