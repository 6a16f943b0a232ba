/* A barrier for the replica threads of one process that spins briefly
 * before it sleeps.
 *
 * pthread_barrier_wait always goes through the kernel (a futex) when a thread
 * arrives before the others, which costs tens of microseconds per crossing;
 * a mirrored step crosses four barriers. Replicas usually arrive within a
 * few microseconds of each other, so spinning first avoids the kernel; when
 * there are more threads than cores, spinning would steal the core a late
 * thread needs, so such a barrier never spins. */
#ifndef SB_BARRIER_H
#define SB_BARRIER_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/status.h"

struct sb_barrier {
    atomic_int n;              /* threads that meet at the barrier */
    int spin;                  /* polls of the generation before sleeping */
    atomic_int arrived;        /* threads arrived in this generation */
    atomic_uint generation;    /* bumped by the last thread to arrive */
    pthread_mutex_t mutex;     /* guards sleeping on `wake` */
    pthread_cond_t wake;
};

/* Prepares a barrier for n >= 1 threads; spins only when n <= online cores.
 * SB_ERR_INTERNAL if the mutex or condition variable cannot be created. */
sb_status sb_barrier_init(struct sb_barrier *b, int n);

/* Blocks until all n threads have called it for this generation; then all
 * return, and the barrier is ready for the next generation. Memory written
 * by any thread before its call is visible to every thread after it. */
void sb_barrier_wait(struct sb_barrier *b);

/* Like sb_barrier_wait, but gives up at deadline_s (the sb_now_s clock;
 * HUGE_VAL = never) and, if check_signals, when SIGINT or SIGTERM has
 * arrived (core/interrupt.h; checked every 50 ms while sleeping). Returns
 * SB_OK when all n arrived, SB_ERR_COMM at the deadline, SB_ERR_INTERRUPTED
 * on a signal; no message is recorded (the caller names what it waited
 * for). A thread that gave up still counts as arrived in this generation,
 * so the barrier should not be used again except by threads that will all
 * arrive: the job is ending. */
sb_status sb_barrier_wait_until(struct sb_barrier *b, double deadline_s, int check_signals);

/* Changes the number of threads that meet at the barrier to n, for a
 * barrier some of whose threads could not be started (mirrored_init when
 * pthread_create fails): the threads already waiting are then released by
 * the n-th arrival. Call it before the caller's own arrival in the same
 * generation; the threads that will never come must not arrive. */
void sb_barrier_resize(struct sb_barrier *b, int n);

/* Frees the mutex and condition variable of a barrier that sb_barrier_init
 * made; no thread may be waiting at it. */
void sb_barrier_destroy(struct sb_barrier *b);

#endif
