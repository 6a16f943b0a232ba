/* Host clocks for phase timing: wall (monotonic) and a thread's CPU time. */
#ifndef SB_CLOCK_H
#define SB_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary fixed point, from CLOCK_MONOTONIC (unaffected
 * by wall-clock adjustments); resolution about a nanosecond. */
static inline double sb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time the calling thread has used so far, s, from
 * CLOCK_THREAD_CPUTIME_ID: what the thread's work would take on a core of
 * its own, whatever else shared the core (a wall span over it gives the
 * thread's share of a core). 0 where the clock cannot be read. */
static inline double sb_thread_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
