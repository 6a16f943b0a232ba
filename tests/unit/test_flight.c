/* Unit tests of the flight recorder (src/comm/flight.c) and of the
 * deadlines that do not need MPI: the barrier's (src/core/barrier.c) and the
 * "local" communicator's (src/comm/local.c), which names the replica thread
 * that did not arrive. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/watchdog.h"
#include "core/barrier.h"
#include "core/clock.h"

/* The ring keeps the last 64 calls in order; older ones are gone. */
static void test_ring_keeps_the_last_64(void **state)
{
    (void)state;
    sb_flight_set_step(7);
    int64_t first = 0, last = 0;
    for (int i = 0; i < 100; i++) {
        last = sb_flight_issue(SB_FLIGHT_PUSH, 400, 3, -1);
        if (i == 0) first = last;
        sb_flight_complete(last, 1);
    }
    assert_int_equal(last - first, 99);
    struct sb_flight_entry e[SB_FLIGHT_CAPACITY];
    int n = sb_flight_snapshot(e, SB_FLIGHT_CAPACITY);
    assert_int_equal(n, SB_FLIGHT_CAPACITY);
    for (int i = 0; i < n; i++) {
        assert_int_equal(e[i].seq, last - (SB_FLIGHT_CAPACITY - 1) + i);
        assert_int_equal(e[i].state, SB_FLIGHT_COMPLETED);
        assert_int_equal(e[i].step, 7);
        assert_int_equal(e[i].peer, 3);
        assert_true(e[i].end_s >= e[i].start_s);
    }
    assert_null(sb_flight_current());
}

/* An issued call is the current one until it completes; a non-blocking one
 * can be entered again by its wait; describe names it. */
static void test_current_call_and_description(void **state)
{
    (void)state;
    sb_flight_set_step(28);
    int64_t seq = sb_flight_issue(SB_FLIGHT_ALLREDUCE, 814120, -1, 2);
    assert_int_equal(sb_flight_current()->seq, seq);
    sb_flight_leave();
    assert_null(sb_flight_current());
    sb_flight_enter(seq);
    struct sb_flight_entry *e = sb_flight_current();
    assert_non_null(e);
    char buf[160];
    sb_flight_describe(e, buf, sizeof buf);
    char want[160];
    snprintf(want, sizeof want, "all-reduce of bucket 2 (call %lld, step 28)", (long long)seq);
    assert_string_equal(buf, want);
    sb_flight_complete(seq, 0);
    assert_int_equal(e->state, SB_FLIGHT_FAILED);
    int64_t pull = sb_flight_issue(SB_FLIGHT_PULL, 4, 0, -1);
    sb_flight_mark_receive();
    sb_flight_describe(sb_flight_current(), buf, sizeof buf);
    snprintf(want, sizeof want, "pull from rank 0 (call %lld, step 28)", (long long)pull);
    assert_string_equal(buf, want);
    sb_flight_complete(pull, 1);
}

/* A barrier that one of two threads never reaches gives up at the deadline. */
static void test_barrier_gives_up_at_the_deadline(void **state)
{
    (void)state;
    struct sb_barrier b;
    assert_int_equal(sb_barrier_init(&b, 2), SB_OK);
    double t0 = sb_now_s();
    assert_int_equal(sb_barrier_wait_until(&b, t0 + 0.2, 1), SB_ERR_COMM);
    double waited = sb_now_s() - t0;
    assert_true(waited >= 0.2 && waited < 2.0);
    sb_barrier_destroy(&b);
}

struct member_arg {
    struct sb_local_group *g;
    int rank;
    sb_status st;
    char message[512];
};

static void *member(void *p)
{
    struct member_arg *a = p;
    struct sb_comm *c = NULL;
    a->st = sb_comm_local_create(a->g, a->rank, &c);
    float buf[4] = {1, 2, 3, 4};
    if (!a->st) a->st = sb_comm_allreduce(c, buf, 4);
    snprintf(a->message, sizeof a->message, "%s", sb_error_message());
    sb_comm_destroy(c);
    return NULL;
}

/* Replicas 0 and 1 of three enter an all-reduce; replica 2 never does: both
 * give up after --timeout and name replica thread 2. */
static void test_local_allreduce_names_the_missing_replica(void **state)
{
    (void)state;
    sb_watchdog_set_timeout(0.3);
    struct sb_local_group *g = NULL;
    assert_int_equal(sb_local_group_create(3, &g), SB_OK);
    struct member_arg a[2] = {{g, 0, SB_OK, ""}, {g, 1, SB_OK, ""}};
    pthread_t th[2];
    double t0 = sb_now_s();
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, member, &a[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_true(sb_now_s() - t0 < 5.0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a[i].st, SB_ERR_COMM);
        assert_non_null(strstr(a[i].message, "all-reduce"));
        assert_non_null(strstr(a[i].message, "replica thread 2 did not arrive"));
    }
    sb_local_group_destroy(g);
    sb_watchdog_set_timeout(60.0);
}

/* With the watchdog off the deadline is never. */
static void test_timeout_zero_is_off(void **state)
{
    (void)state;
    sb_watchdog_set_timeout(0.0);
    assert_true(isinf(sb_watchdog_deadline(sb_now_s())));
    sb_watchdog_set_timeout(5.0);
    assert_true(fabs(sb_watchdog_deadline(10.0) - 15.0) < 1e-12);
    sb_watchdog_set_timeout(60.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_keeps_the_last_64),
        cmocka_unit_test(test_current_call_and_description),
        cmocka_unit_test(test_barrier_gives_up_at_the_deadline),
        cmocka_unit_test(test_local_allreduce_names_the_missing_replica),
        cmocka_unit_test(test_timeout_zero_is_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
