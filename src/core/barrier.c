/* Spin-then-sleep barrier; see barrier.h. */
#include "core/barrier.h"

#include <unistd.h>

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
    b->n = n;
    b->spin = (cores > 0 && n <= cores) ? SPIN_POLLS : 0;
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0u);
    if (pthread_mutex_init(&b->mutex, NULL) != 0)
        return sb_error(SB_ERR_INTERNAL, "barrier: pthread_mutex_init failed");
    if (pthread_cond_init(&b->wake, NULL) != 0) {
        pthread_mutex_destroy(&b->mutex);
        return sb_error(SB_ERR_INTERNAL, "barrier: pthread_cond_init failed");
    }
    return SB_OK;
}

void sb_barrier_wait(struct sb_barrier *b)
{
    unsigned gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n - 1) {
        /* Last to arrive: reset for the next generation, then release the
         * others. Nobody can arrive for the next generation before the bump. */
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        pthread_mutex_lock(&b->mutex);
        atomic_fetch_add_explicit(&b->generation, 1u, memory_order_release);
        pthread_cond_broadcast(&b->wake);
        pthread_mutex_unlock(&b->mutex);
        return;
    }
    for (int i = 0; i < b->spin; i++) {
        if (atomic_load_explicit(&b->generation, memory_order_acquire) != gen) return;
        cpu_relax();
    }
    pthread_mutex_lock(&b->mutex);
    while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen)
        pthread_cond_wait(&b->wake, &b->mutex);
    pthread_mutex_unlock(&b->mutex);
}

void sb_barrier_destroy(struct sb_barrier *b)
{
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->mutex);
}
