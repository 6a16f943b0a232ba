/* comm/wait_policy.h: --wait's names, auto's rule (sleep exactly when the
 * machine's compute threads exceed its cores), and the backoff: no pause
 * under spin or within the first SB_WAIT_SPIN_S, then sleeps of
 * sqrt(2 c t) after a wait of t, within [SB_WAIT_SLEEP_MIN_S,
 * SB_WAIT_SLEEP_MAX_S], that leave the CPU (CPU time far below the wall
 * time spent), started over by a poll that did work. */
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
    for (int i = 0; i < 1000; i++) sb_wait_backoff_idle(&b, t0 + 1.0, 0.0); /* long past the spin */
    assert_true(b.sleep_s == 0.0);
    assert_true(sb_now_s() - t0 < 0.05); /* 1000 sleeps would take >= 10 ms */
}

static void test_sleep_grows_with_the_wait_and_leaves_the_cpu(void **state)
{
    (void)state;
    sb_wait_policy_set(SB_WAIT_SLEEP);
    struct sb_wait_backoff b;
    double t0 = sb_now_s();
    sb_wait_backoff_begin(&b, t0);
    /* Within the spin: no sleep. */
    sb_wait_backoff_idle(&b, t0 + 0.5 * SB_WAIT_SPIN_S, 0.0);
    assert_true(b.sleep_s == 0.0);
    /* Then sqrt(2 c t) within [min, max]: c = 15 us, t = 1 ms: 173 us; t = 0.1 ms: 55 us;
     * t = 60 us: 42 us; t = 10 s: capped at 1 ms. */
    double at[] = {60e-6, 100e-6, 1e-3, 10.0}, want[] = {42.4e-6, 54.8e-6, 173.2e-6, 1e-3};
    for (int i = 0; i < 4; i++) {
        sb_wait_backoff_begin(&b, t0);
        sb_wait_backoff_idle(&b, t0 + at[i], 0.0);
        assert_true(b.sleep_s > want[i] * 0.99 && b.sleep_s < want[i] * 1.01);
    }
    /* A poll that did work starts the wait over: no sleep, the next one the shortest. */
    sb_wait_backoff_begin(&b, t0);
    sb_wait_backoff_idle(&b, t0 + 10.0, 1e-3);
    assert_true(b.sleep_s == 0.0 && b.start_s == t0 + 10.0);
    sb_wait_backoff_idle(&b, t0 + 10.0 + SB_WAIT_SPIN_S, 0.0);
    assert_true(b.sleep_s > 0 && b.sleep_s < 2 * SB_WAIT_SPIN_S);
    /* 50 sleeps of 1 ms: >= 50 ms of wall time, a few ms of CPU at most. */
    sb_wait_backoff_begin(&b, t0 - 10.0);
    double w0 = sb_now_s(), c0 = cpu_now_s();
    for (int i = 0; i < 50; i++) sb_wait_backoff_idle(&b, sb_now_s(), 0.0);
    double wall = sb_now_s() - w0, cpu = cpu_now_s() - c0;
    assert_true(wall >= 50 * SB_WAIT_SLEEP_MAX_S * 0.99);
    assert_true(cpu < 0.25 * wall);
    sb_wait_policy_set(SB_WAIT_SPIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_auto_rule),
        cmocka_unit_test(test_spin_never_pauses),
        cmocka_unit_test(test_sleep_grows_with_the_wait_and_leaves_the_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
