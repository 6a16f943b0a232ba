/* The cpu backend's thread pool (src/backend/cpu_pool.h) and its GEMM
 * split (src/backend/cpu.c): parallel_for runs every item exactly once on
 * 1, 2 and 5 threads, on more than one thread when it can, and serially
 * inside an item; the split GEMM equals one single-threaded cblas_sgemm
 * bit for bit for every transpose pair, at shapes that split by rows and by
 * columns, with ragged edges, beta 0 and 1, K short and long (a long K is
 * summed in OpenBLAS's K blocks: the split must keep them), on 2, 3 and 5
 * threads. Exits 0 when every test passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backend/backend.h"
#include "backend/cpu_pool.h"

#define ITEMS 1000
#define MAX_THREADS 8

static atomic_int runs[ITEMS];
static pthread_t seen_threads[MAX_THREADS];
static atomic_int n_seen;
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;

static void note_thread(void)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&seen_mu);
    int known = 0, n = atomic_load(&n_seen);
    for (int i = 0; i < n; i++) known |= pthread_equal(seen_threads[i], self);
    if (!known && n < MAX_THREADS) seen_threads[n] = self, atomic_store(&n_seen, n + 1);
    pthread_mutex_unlock(&seen_mu);
}

/* With more than one thread (*ctx), item 0 waits until another thread has
 * run an item (10 s at most): whichever thread took it, the other must take
 * the next one, so that "more than one thread ran items" does not depend
 * on how soon a worker wakes. */
static void count_item(void *ctx, int i)
{
    atomic_fetch_add(&runs[i], 1);
    note_thread();
    if (i == 0 && *(int *)ctx > 1) {
        time_t end = time(NULL) + 10;
        while (atomic_load(&n_seen) < 2 && time(NULL) < end) sched_yield();
    }
}

static void every_item_once(int threads)
{
    sb_cpu_pool_set_threads(threads);
    memset(runs, 0, sizeof runs);
    atomic_store(&n_seen, 0);
    sb_cpu_parallel_for(ITEMS, count_item, &threads);
    for (int i = 0; i < ITEMS; i++) assert_int_equal(atomic_load(&runs[i]), 1);
    if (threads == 1) assert_int_equal(atomic_load(&n_seen), 1);
    else assert_true(atomic_load(&n_seen) >= 2);
}

static void test_every_item_runs_once(void **state)
{
    (void)state;
    int counts[] = {1, 2, 5, 2, 1};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) every_item_once(counts[i]);
}

/* An item that starts a parallel_for: it runs serially, on the item's thread. */
static atomic_int inner_runs;
static void inner_item(void *ctx, int i)
{
    (void)i;
    assert_true(pthread_equal(*(pthread_t *)ctx, pthread_self()));
    atomic_fetch_add(&inner_runs, 1);
}

static void outer_item(void *ctx, int i)
{
    (void)ctx, (void)i;
    pthread_t self = pthread_self();
    assert_int_equal(sb_cpu_pool_threads(), 1);
    sb_cpu_parallel_for(7, inner_item, &self);
}

static void test_nested_runs_serially(void **state)
{
    (void)state;
    sb_cpu_pool_set_threads(2);
    atomic_store(&inner_runs, 0);
    sb_cpu_parallel_for(50, outer_item, NULL);
    assert_int_equal(atomic_load(&inner_runs), 50 * 7);
    assert_int_equal(sb_cpu_pool_threads(), 2);
}

static float *random_floats(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof *p);
    srand(seed);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

/* The backend's sgemm against one single-threaded cblas_sgemm. */
static void gemm_matches(int ta, int tb, int m, int n, int k, float beta)
{
    int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
    float *a = random_floats((size_t)m * k, 1), *b = random_floats((size_t)k * n, 2);
    float *c0 = random_floats((size_t)m * n, 3), *c1 = malloc((size_t)m * n * sizeof *c1);
    memcpy(c1, c0, (size_t)m * n * sizeof *c1);
    sb_backend_cpu.sgemm(ta, tb, m, n, k, 0.75f, a, lda, b, ldb, beta, c1, ldc);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, 0.75f, a, lda, b, ldb, beta, c0, ldc);
    if (memcmp(c0, c1, (size_t)m * n * sizeof *c1) != 0)
        fail_msg("ta %d tb %d m %d n %d k %d beta %g: the split GEMM differs", ta, tb, m, n, k,
                 beta);
    free(a), free(b), free(c0), free(c1);
}

static void test_split_gemm_is_one_gemm(void **state)
{
    (void)state;
    /* m n k: split by rows (m >= n), by columns, ragged edges; K within one
     * of OpenBLAS's K blocks and across several (3200: the vit's dW) */
    static const int shapes[][3] = {{3200, 64, 64}, {3200, 192, 64}, {350, 192, 64},
                                    {1283, 77, 129}, {64, 1024, 784}, {64, 10, 3200},
                                    {128, 64, 3200}, {192, 64, 3200}, {37, 1000, 300}};
    int counts[] = {2, 3, 5};
    for (size_t t = 0; t < sizeof counts / sizeof *counts; t++) {
        sb_backend_cpu.set_threads(counts[t]);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (int beta = 0; beta < 2; beta++)
                        gemm_matches(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2],
                                     (float)beta);
    }
    sb_backend_cpu.set_threads(1);
}

/* The thread count the backend reports is the pool's (the report's
 * config.blas_threads). */
static void test_threads_reported(void **state)
{
    (void)state;
    sb_backend_cpu.set_threads(3);
    assert_int_equal(sb_backend_cpu_threads(), 3);
    sb_backend_cpu.set_threads(1);
    assert_int_equal(sb_backend_cpu_threads(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_runs_once),
        cmocka_unit_test(test_nested_runs_serially),
        cmocka_unit_test(test_split_gemm_is_one_gemm),
        cmocka_unit_test(test_threads_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
