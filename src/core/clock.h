/* Host wall clock for phase timing. */
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

#endif
