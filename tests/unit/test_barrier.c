/* Unit tests of the spin-then-sleep barrier (src/core/barrier.c): no thread
 * passes a generation before all arrive, and every write made before the
 * barrier is seen after it, with spinning and without (more threads than
 * cores). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/barrier.h"

enum { MAX_THREADS = 16, ROUNDS = 2000 };

struct shared {
    struct sb_barrier barrier;
    int n;
    int slot[MAX_THREADS]; /* slot[t] = the round thread t last finished */
    int errors[MAX_THREADS];
};

struct arg {
    struct shared *sh;
    int t;
};

/* Each round: write my slot, meet, check every slot holds this round, meet
 * again (so nobody overwrites a slot another thread is still checking). */
static void *worker(void *p)
{
    struct arg *a = p;
    struct shared *sh = a->sh;
    for (int round = 1; round <= ROUNDS; round++) {
        sh->slot[a->t] = round;
        sb_barrier_wait(&sh->barrier);
        for (int q = 0; q < sh->n; q++) sh->errors[a->t] += sh->slot[q] != round;
        sb_barrier_wait(&sh->barrier);
    }
    return NULL;
}

static void run_threads(int n)
{
    static struct shared sh;
    struct arg args[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    sh = (struct shared){.n = n};
    assert_int_equal(sb_barrier_init(&sh.barrier, n), SB_OK);
    for (int t = 0; t < n; t++) {
        args[t] = (struct arg){&sh, t};
        assert_int_equal(pthread_create(&th[t], NULL, worker, &args[t]), 0);
    }
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < n; t++) assert_int_equal(sh.errors[t], 0);
    sb_barrier_destroy(&sh.barrier);
}

static void test_two_threads_spin(void **state)
{
    (void)state;
    run_threads(2);
}

static void test_more_threads_than_cores_sleep(void **state)
{
    (void)state;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cores + 2 < MAX_THREADS ? (int)cores + 2 : MAX_THREADS;
    struct sb_barrier b;
    assert_int_equal(sb_barrier_init(&b, n), SB_OK);
    assert_int_equal(b.spin, 0); /* oversubscribed: never spins */
    sb_barrier_destroy(&b);
    run_threads(n);
}

static void test_one_thread_never_waits(void **state)
{
    (void)state;
    struct sb_barrier b;
    assert_int_equal(sb_barrier_init(&b, 1), SB_OK);
    for (int i = 0; i < 10; i++) sb_barrier_wait(&b);
    assert_int_equal((int)atomic_load(&b.generation), 10);
    sb_barrier_destroy(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_threads_spin),
        cmocka_unit_test(test_more_threads_than_cores_sleep),
        cmocka_unit_test(test_one_thread_never_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
