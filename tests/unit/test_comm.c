/* Unit tests for the counted wrappers of src/comm/comm.c (over a fake
 * communicator whose calls take a known minimum time) and for the "local"
 * communicator of src/comm/local.c (threads of one process): sums, broadcast
 * and the chunk split across 3 threads, where chunks are uneven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/clock.h"

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


#define CALL_S 0.002 /* every fake blocking call takes at least this long */

static void spin(double seconds)
{
    double t0 = sb_now_s();
    while (sb_now_s() - t0 < seconds) {
    }
}

struct fake {
    int allreduces, tests_until_done, polls;
};

static sb_status fake_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    struct fake *f = c->impl;
    f->allreduces++;
    for (size_t i = 0; i < n; i++) buf[i] *= 2; /* "two ranks with equal buffers" */
    spin(CALL_S);
    return SB_OK;
}

static sb_status fake_f64(struct sb_comm *c, double *buf, size_t n)
{
    (void)c;
    for (size_t i = 0; i < n; i++) buf[i] *= 2;
    return SB_OK;
}

static sb_status fake_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    (void)c, (void)buf, (void)n, (void)root;
    spin(CALL_S);
    return SB_OK;
}

static sb_status fake_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                          enum sb_comm_kind kind)
{
    (void)c, (void)buf, (void)n, (void)peer, (void)kind;
    spin(CALL_S);
    return SB_OK;
}

static sb_status fake_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                          enum sb_comm_kind kind)
{
    (void)c, (void)buf, (void)n, (void)kind;
    return peer == 99 ? sb_error(SB_ERR_COMM, "fake: no peer 99") : SB_OK;
}

static sb_status fake_iallreduce(struct sb_comm *c, float *buf, size_t n,
                                 struct sb_comm_request *req)
{
    (void)c, (void)buf, (void)n;
    static int handle;
    req->impl = &handle;
    return SB_OK;
}

static sb_status fake_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    struct fake *f = c->impl;
    f->polls++;
    *done = f->polls >= f->tests_until_done;
    if (*done) req->impl = NULL;
    return SB_OK;
}

static sb_status fake_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    (void)c;
    spin(CALL_S);
    req->impl = NULL;
    return SB_OK;
}

static void fake_destroy(struct sb_comm *c) { (void)c; }

static struct sb_comm_ops fake_ops = {
    .name = "fake",
    .allreduce = fake_allreduce,
    .allreduce_f64 = fake_f64,
    .broadcast = fake_broadcast,
    .send = fake_send,
    .recv = fake_recv,
    .destroy = fake_destroy,
    .iallreduce = fake_iallreduce,
    .test = fake_test,
    .wait = fake_wait,
};

static void test_blocking_calls_are_counted(void **state)
{
    (void)state;
    struct fake f = {0};
    struct sb_comm c = {.ops = &fake_ops, .rank = 0, .size = 2, .impl = &f};
    float buf[10];
    for (int i = 0; i < 10; i++) buf[i] = (float)i;
    assert_int_equal(sb_comm_allreduce(&c, buf, 10), SB_OK);
    assert_int_equal(sb_comm_allreduce(&c, buf, 6), SB_OK);
    assert_near(buf[3], 12.0f, 0); /* 3 x 2 x 2: the op ran on the caller's buffer */
    const struct sb_comm_counter *ar = &c.counters[SB_COMM_ALLREDUCE];
    assert_int_equal(ar->calls, 2);
    assert_near(ar->bytes, 4.0 * 16, 0); /* 4 bytes per float, nccl-tests' size */
    assert_true(ar->seconds >= 2 * CALL_S && ar->seconds < 2.0);
    assert_int_equal(sb_comm_broadcast(&c, buf, 3, 0), SB_OK);
    assert_int_equal(sb_comm_send(&c, buf, 5, 1, SB_COMM_PUSH), SB_OK);
    assert_int_equal(sb_comm_recv(&c, buf, 7, 1, SB_COMM_PULL), SB_OK);
    assert_int_equal(c.counters[SB_COMM_BROADCAST].calls, 1);
    assert_near(c.counters[SB_COMM_BROADCAST].bytes, 12, 0);
    assert_true(c.counters[SB_COMM_BROADCAST].seconds >= CALL_S);
    assert_int_equal(c.counters[SB_COMM_PUSH].calls, 1);
    assert_near(c.counters[SB_COMM_PUSH].bytes, 20, 0);
    assert_true(c.counters[SB_COMM_PUSH].seconds >= CALL_S);
    assert_near(c.counters[SB_COMM_PULL].bytes, 28, 0);
    /* A failed call is still counted (it was attempted) and its status returned. */
    assert_int_equal(sb_comm_recv(&c, buf, 1, 99, SB_COMM_PULL), SB_ERR_COMM);
    assert_int_equal(c.counters[SB_COMM_PULL].calls, 2);
    /* No receive-from-any in this communicator: an internal error, nothing counted. */
    int peer = -1;
    assert_int_equal(sb_comm_recv_any(&c, buf, 1, &peer, SB_COMM_PUSH), SB_ERR_INTERNAL);
    assert_int_equal(c.counters[SB_COMM_PUSH].calls, 1);
    /* Metrics reductions are not training traffic. */
    double d[2] = {1, 2};
    assert_int_equal(sb_comm_allreduce_f64(&c, d, 2), SB_OK);
    assert_near(d[1], 4, 0);
    assert_int_equal(c.counters[SB_COMM_ALLREDUCE].calls, 2);
    sb_comm_reset_counters(&c);
    for (int k = 0; k < SB_COMM_NKINDS; k++) {
        assert_int_equal(c.counters[k].calls, 0);
        assert_near(c.counters[k].bytes + c.counters[k].seconds, 0, 0);
    }
    assert_string_equal(sb_comm_kind_name(SB_COMM_ALLREDUCE), "allreduce");
    assert_string_equal(sb_comm_kind_name(SB_COMM_PULL), "pull");
    assert_string_equal(sb_comm_kind_name(SB_COMM_NKINDS), "unknown");
}

/* A non-blocking all-reduce counts its call and bytes at issue and its
 * seconds (done_s - start_s) once completion is observed, by test or wait. */
static void test_nonblocking_all_reduce(void **state)
{
    (void)state;
    struct fake f = {.tests_until_done = 3};
    struct sb_comm c = {.ops = &fake_ops, .rank = 0, .size = 2, .impl = &f};
    float buf[8] = {0};
    struct sb_comm_request r;
    assert_int_equal(sb_comm_iallreduce(&c, buf, 8, &r), SB_OK);
    assert_int_equal(c.counters[SB_COMM_ALLREDUCE].calls, 1);
    assert_near(c.counters[SB_COMM_ALLREDUCE].bytes, 32, 0);
    assert_near(c.counters[SB_COMM_ALLREDUCE].seconds, 0, 0);
    assert_int_equal(r.done, 0);
    int done = -1;
    spin(CALL_S);
    assert_int_equal(sb_comm_test(&c, &r, &done), SB_OK);
    assert_int_equal(done, 0);
    assert_int_equal(sb_comm_test(&c, &r, &done), SB_OK);
    assert_int_equal(sb_comm_test(&c, &r, &done), SB_OK); /* the third poll completes it */
    assert_int_equal(done, 1);
    assert_int_equal(r.done, 1);
    assert_true(r.done_s - r.start_s >= CALL_S);
    assert_near(c.counters[SB_COMM_ALLREDUCE].seconds, r.done_s - r.start_s, 1e-15);
    /* Further tests and waits on a completed request change nothing. */
    int polls = f.polls;
    assert_int_equal(sb_comm_test(&c, &r, &done), SB_OK);
    assert_int_equal(sb_comm_wait(&c, &r), SB_OK);
    assert_int_equal(f.polls, polls);
    assert_near(c.counters[SB_COMM_ALLREDUCE].seconds, r.done_s - r.start_s, 1e-15);

    /* Completed by wait: seconds added once more, the second request's. */
    struct sb_comm_request r2;
    double before = c.counters[SB_COMM_ALLREDUCE].seconds;
    assert_int_equal(sb_comm_iallreduce(&c, buf, 8, &r2), SB_OK);
    assert_int_equal(sb_comm_wait(&c, &r2), SB_OK);
    assert_int_equal(r2.done, 1);
    assert_true(r2.done_s - r2.start_s >= CALL_S);
    assert_near(c.counters[SB_COMM_ALLREDUCE].seconds - before, r2.done_s - r2.start_s,
                       1e-12);
    assert_int_equal(c.counters[SB_COMM_ALLREDUCE].calls, 2);

    /* Without an iallreduce op: the blocking call, complete at issue. */
    struct sb_comm_ops blocking = fake_ops;
    blocking.iallreduce = NULL;
    struct sb_comm b = {.ops = &blocking, .rank = 0, .size = 2, .impl = &f};
    float x[2] = {1, 2};
    struct sb_comm_request r3;
    int allreduces = f.allreduces;
    assert_int_equal(sb_comm_iallreduce(&b, x, 2, &r3), SB_OK);
    assert_int_equal(r3.done, 1);
    assert_int_equal(f.allreduces, allreduces + 1);
    assert_near(x[1], 4, 0);
    assert_true(b.counters[SB_COMM_ALLREDUCE].seconds >= CALL_S);
}

/* ---- the local communicator ---- */

#define THREADS 3
#define N 10 /* chunks of 3, 3 and 4 floats: uneven */

struct member {
    struct sb_local_group *g;
    int rank;
    float buf[N], bcast[N];
    double d[3];
    sb_status st;
};

static void *member_main(void *arg)
{
    struct member *m = arg;
    struct sb_comm *c = NULL;
    sb_status st = sb_comm_local_create(m->g, m->rank, &c);
    for (int i = 0; i < N; i++) {
        m->buf[i] = (float)((m->rank + 1) * (i + 1)); /* sum over ranks: 6 (i + 1) */
        m->bcast[i] = (float)(100 * m->rank + i);
    }
    for (int i = 0; i < 3; i++) m->d[i] = 0.5 * m->rank + i;
    if (!st) st = sb_comm_allreduce(c, m->buf, N);
    if (!st) st = sb_comm_broadcast(c, m->bcast, N, 2);
    if (!st) st = sb_comm_allreduce_f64(c, m->d, 3);
    struct sb_comm_request r;
    if (!st) st = sb_comm_iallreduce(c, m->buf, N, &r); /* complete at issue */
    if (!st && !r.done) st = SB_ERR_INTERNAL;
    /* Point-to-point around the ring of threads (a send never waits). */
    float sent = (float)(10 * m->rank), got = -1.0f;
    if (!st) st = sb_comm_send(c, &sent, 1, (m->rank + 1) % THREADS, SB_COMM_PUSH);
    if (!st) st = sb_comm_recv(c, &got, 1, (m->rank + THREADS - 1) % THREADS, SB_COMM_PUSH);
    if (!st && got != (float)(10 * ((m->rank + THREADS - 1) % THREADS))) st = SB_ERR_INTERNAL;
    if (!st && (c->counters[SB_COMM_ALLREDUCE].calls != 2 || c->size != THREADS ||
                c->rank != m->rank))
        st = SB_ERR_INTERNAL;
    sb_comm_destroy(c);
    m->st = st;
    return NULL;
}

static void test_local_three_threads(void **state)
{
    (void)state;
    struct sb_local_group *g;
    assert_int_equal(sb_local_group_create(THREADS, &g), SB_OK);
    struct member m[THREADS];
    pthread_t t[THREADS];
    for (int r = 0; r < THREADS; r++) {
        m[r] = (struct member){.g = g, .rank = r};
        assert_int_equal(pthread_create(&t[r], NULL, member_main, &m[r]), 0);
    }
    for (int r = 0; r < THREADS; r++) pthread_join(t[r], NULL);
    sb_local_group_destroy(g);
    for (int r = 0; r < THREADS; r++) {
        assert_int_equal(m[r].st, SB_OK);
        for (int i = 0; i < N; i++) {
            /* Two all-reduces: 6 (i + 1), then 3 x that. */
            assert_near(m[r].buf[i], 18.0f * (float)(i + 1), 0);
            assert_near(m[r].bcast[i], (float)(200 + i), 0); /* root 2's */
        }
        for (int i = 0; i < 3; i++) assert_near(m[r].d[i], 1.5 + 3 * i, 1e-15);
    }
}

/* The 16-bit all-reduce of the local communicator (mirrored under
 * --precision): the fp32 sum in rank order, rounded once to bf16, the same
 * in every thread, counted at 2 bytes a value. */
struct member16 {
    struct sb_local_group *g;
    int rank;
    float buf[N];
    double bytes;
    sb_status st;
};

static void *member16_main(void *arg)
{
    struct member16 *m = arg;
    struct sb_comm *c = NULL;
    sb_status st = sb_comm_local_create(m->g, m->rank, &c);
    for (int i = 0; i < N; i++) m->buf[i] = 1.0f + (float)(m->rank + i) / 256.0f; /* bf16 values */
    if (!st) st = sb_comm_allreduce16(c, SB_HALF_BF16, m->buf, N, NULL);
    if (c) m->bytes = c->counters[SB_COMM_ALLREDUCE].bytes;
    sb_comm_destroy(c);
    m->st = st;
    return NULL;
}

static void test_local_allreduce16(void **state)
{
    (void)state;
    struct sb_local_group *g;
    assert_int_equal(sb_local_group_create(THREADS, &g), SB_OK);
    struct member16 m[THREADS];
    pthread_t t[THREADS];
    for (int r = 0; r < THREADS; r++) {
        m[r] = (struct member16){.g = g, .rank = r};
        assert_int_equal(pthread_create(&t[r], NULL, member16_main, &m[r]), 0);
    }
    for (int r = 0; r < THREADS; r++) pthread_join(t[r], NULL);
    sb_local_group_destroy(g);
    for (int i = 0; i < N; i++) {
        float want = 0.0f;
        for (int q = 0; q < THREADS; q++) want += 1.0f + (float)(q + i) / 256.0f;
        want = sb_bf16_to_f32(sb_f32_to_bf16(want)); /* one rounding of the fp32 sum */
        for (int r = 0; r < THREADS; r++) {
            assert_int_equal(m[r].st, SB_OK);
            assert_true(m[r].buf[i] == want);
        }
    }
    for (int r = 0; r < THREADS; r++) assert_true(m[r].bytes == 2.0 * N);
}

static void test_local_one_thread(void **state)
{
    (void)state;
    struct sb_local_group *g;
    struct sb_comm *c;
    assert_int_equal(sb_local_group_create(1, &g), SB_OK);
    assert_int_equal(sb_comm_local_create(g, 0, &c), SB_OK);
    float x[3] = {1, 2, 3};
    assert_int_equal(sb_comm_allreduce(c, x, 3), SB_OK);
    assert_near(x[2], 3, 0); /* the sum over one replica is itself */
    assert_int_equal(c->counters[SB_COMM_ALLREDUCE].calls, 1);
    sb_comm_destroy(c);
    sb_local_group_destroy(g);
    sb_local_group_destroy(NULL);
    sb_comm_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocking_calls_are_counted),
        cmocka_unit_test(test_nonblocking_all_reduce),
        cmocka_unit_test(test_local_three_threads),
        cmocka_unit_test(test_local_one_thread),
        cmocka_unit_test(test_local_allreduce16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
