/* Spin-then-sleep barrier; see barrier.h. */
#include "core/barrier.h"

#include <errno.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/interrupt.h"

/* About 20-50 us of polling on current x86 cores before sleeping. */
enum { SPIN_POLLS = 20000 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

sb_status sb_barrier_init(struct sb_barrier *b, int n)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    atomic_init(&b->n, n);
    b->spin = (cores > 0 && n <= cores) ? SPIN_POLLS : 0;
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0u);
    if (pthread_mutex_init(&b->mutex, NULL) != 0)
        return sb_error(SB_ERR_INTERNAL, "barrier: pthread_mutex_init failed");
    /* Timed waits on the same clock as sb_now_s (deadlines). */
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(&b->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&b->mutex);
        return sb_error(SB_ERR_INTERNAL, "barrier: pthread_cond_init failed");
    }
    return SB_OK;
}

/* Counts this thread in (*gen = the generation it waits in). The last to
 * arrive resets the count for the next generation, then releases the others
 * (nobody can arrive for the next generation before the bump) and returns 1;
 * the others spin a while for the release and return 1 if it came, else 0
 * (they must then sleep until the generation changes). */
static int arrive_or_spin(struct sb_barrier *b, unsigned *gen)
{
    *gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) ==
        atomic_load_explicit(&b->n, memory_order_acquire) - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        pthread_mutex_lock(&b->mutex);
        atomic_fetch_add_explicit(&b->generation, 1u, memory_order_release);
        pthread_cond_broadcast(&b->wake);
        pthread_mutex_unlock(&b->mutex);
        return 1;
    }
    for (int i = 0; i < b->spin; i++) {
        if (atomic_load_explicit(&b->generation, memory_order_acquire) != *gen) return 1;
        cpu_relax();
    }
    return 0;
}

void sb_barrier_wait(struct sb_barrier *b)
{
    unsigned gen;
    if (arrive_or_spin(b, &gen)) return;
    pthread_mutex_lock(&b->mutex);
    while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen)
        pthread_cond_wait(&b->wake, &b->mutex);
    pthread_mutex_unlock(&b->mutex);
}

sb_status sb_barrier_wait_until(struct sb_barrier *b, double deadline_s, int check_signals)
{
    if (deadline_s == HUGE_VAL && !check_signals) {
        sb_barrier_wait(b);
        return SB_OK;
    }
    unsigned gen;
    if (arrive_or_spin(b, &gen)) return SB_OK;
    sb_status st = SB_OK;
    pthread_mutex_lock(&b->mutex);
    while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen) {
        double now = sb_now_s();
        if (now >= deadline_s) {
            st = SB_ERR_COMM;
            break;
        }
        if (check_signals && sb_interrupted()) {
            st = SB_ERR_INTERRUPTED;
            break;
        }
        double until = deadline_s;
        if (check_signals && until > now + 0.05) until = now + 0.05;
        if (until > now + 3600.0) until = now + 3600.0;
        struct timespec ts;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
        int rc = pthread_cond_timedwait(&b->wake, &b->mutex, &ts);
        if (rc != 0 && rc != ETIMEDOUT && rc != EINTR) break;
    }
    pthread_mutex_unlock(&b->mutex);
    return st;
}

void sb_barrier_resize(struct sb_barrier *b, int n)
{
    atomic_store_explicit(&b->n, n, memory_order_release);
}

void sb_barrier_destroy(struct sb_barrier *b)
{
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->mutex);
}
