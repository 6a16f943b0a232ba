/* The CPU backend's fork-join pool (cpu_pool.h). A worker that has run out
 * of items polls for the next call for POOL_SPIN_S and then sleeps on a
 * condition variable: back-to-back calls (a GEMM split after a GEMM split)
 * find it awake, and between steps, or while the caller runs a long serial
 * pass, it gives its core back (OpenBLAS's workers poll for ~2^28 cycles). */
#include "backend/cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/clock.h"

#define POOL_MAX_THREADS 64
/* How long a worker (and the caller, for the last item) polls before it
 * sleeps, s: longer than a wake-up (~10-30 us) and than the gap between
 * the split GEMMs of a pass, short against a step. */
#define POOL_SPIN_S 50e-6

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    atomic_int threads; /* the set_threads count: the caller and threads - 1 workers */
    atomic_int workers; /* workers started (they stay; fewer may be used) */
    int sleeping; /* workers waiting on `work` (under mu) */
    int caller_sleeping; /* the caller waiting on `done` (under mu) */
    atomic_ulong generation; /* one per parallel_for: a worker's signal to start */
    atomic_int busy;  /* workers still running this generation's items */
    int active;       /* workers taking items this generation (ids below it) */
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n;
    atomic_int next; /* the next item to take */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .work = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER,
          .threads = 1};

static int load(atomic_int *v) { return atomic_load_explicit(v, memory_order_relaxed); }

/* Held by the one caller a parallel_for runs for; a second caller (a
 * mirrored replica's thread, were the pool set up there) runs serially. */
static pthread_mutex_t caller = PTHREAD_MUTEX_INITIALIZER;

/* The generation when worker i was started: it waits for the next one (a
 * worker that started at 0 would take a finished call for a new one and
 * count itself done twice). Written before pthread_create, under `caller`. */
static unsigned long start_generation[POOL_MAX_THREADS];

/* 1 on a thread while it runs an item (a parallel_for inside runs serially) */
static _Thread_local int in_item;

static void run_items(void)
{
    in_item = 1;
    for (;;) {
        int i = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
        if (i >= pool.n) break;
        pool.fn(pool.ctx, i);
    }
    in_item = 0;
}

/* Polls until done() is true or POOL_SPIN_S has passed; returns done(). */
static int spin_until(int (*done)(unsigned long), unsigned long arg)
{
    double t0 = sb_now_s();
    for (int i = 0;; i++) {
        if (done(arg)) return 1;
        if ((i & 63) == 63 && sb_now_s() - t0 > POOL_SPIN_S) return done(arg);
    }
}

static int new_generation(unsigned long seen)
{
    return atomic_load_explicit(&pool.generation, memory_order_acquire) != seen;
}

static int all_done(unsigned long unused)
{
    (void)unused;
    return atomic_load_explicit(&pool.busy, memory_order_acquire) == 0;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long seen = start_generation[id];
    for (;;) {
        if (!spin_until(new_generation, seen)) {
            pthread_mutex_lock(&pool.mu);
            pool.sleeping++;
            while (!new_generation(seen)) pthread_cond_wait(&pool.work, &pool.mu);
            pool.sleeping--;
            pthread_mutex_unlock(&pool.mu);
        }
        seen = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (id < pool.active) run_items();
        if (atomic_fetch_sub_explicit(&pool.busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.mu);
            if (pool.caller_sleeping) pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

void sb_cpu_pool_set_threads(int n)
{
    n = n < 1 ? 1 : n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
    pthread_mutex_lock(&caller); /* no parallel_for under way */
    while (load(&pool.workers) < n - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int id = load(&pool.workers);
        start_generation[id] = atomic_load_explicit(&pool.generation, memory_order_relaxed);
        int rc = pthread_create(&t, &attr, worker, (void *)(intptr_t)id);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* fewer workers: the items still all run */
        atomic_fetch_add_explicit(&pool.workers, 1, memory_order_relaxed);
    }
    atomic_store_explicit(&pool.threads, n, memory_order_relaxed);
    pthread_mutex_unlock(&caller);
}

int sb_cpu_pool_threads(void)
{
    if (in_item) return 1;
    int helpers = load(&pool.threads) - 1, workers = load(&pool.workers);
    return (helpers < workers ? helpers : workers) + 1;
}

int sb_cpu_parallel_try(int n, void (*fn)(void *ctx, int i), void *ctx)
{
    int helpers = sb_cpu_pool_threads() - 1;
    if (helpers > n - 1) helpers = n - 1;
    if (helpers <= 0 || pthread_mutex_trylock(&caller) != 0) return 0;
    pool.fn = fn, pool.ctx = ctx, pool.n = n, pool.active = helpers;
    atomic_store_explicit(&pool.next, 0, memory_order_relaxed);
    /* every worker wakes and reports done; those from `helpers` on take nothing */
    atomic_store_explicit(&pool.busy, load(&pool.workers), memory_order_relaxed);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    pthread_mutex_lock(&pool.mu);
    if (pool.sleeping) pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    run_items();
    if (!spin_until(all_done, 0)) {
        pthread_mutex_lock(&pool.mu);
        pool.caller_sleeping = 1;
        while (!all_done(0)) pthread_cond_wait(&pool.done, &pool.mu);
        pool.caller_sleeping = 0;
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&caller);
    return 1;
}

void sb_cpu_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx)
{
    if (!sb_cpu_parallel_try(n, fn, ctx))
        for (int i = 0; i < n; i++) fn(ctx, i);
}
