/* Phase names; see phase.h. */
#include "core/phase.h"

const char *sb_phase_name(enum sb_phase phase)
{
    static const char *const names[SB_PHASE_COUNT] = {
        "data", "h2d", "forward", "backward",
        "comm", "comm_exposed", "optimizer", "wait", "compress", "bubble",
    };
    return (unsigned)phase < SB_PHASE_COUNT ? names[phase] : "unknown";
}

double sb_phase_compute_ms(const double phase_ms[SB_PHASE_COUNT])
{
    return phase_ms[SB_PHASE_DATA] + phase_ms[SB_PHASE_H2D] + phase_ms[SB_PHASE_FORWARD] +
           phase_ms[SB_PHASE_BACKWARD];
}

double sb_phase_wait_ms(const double *compute_ms, int n, int r)
{
    double slowest = compute_ms[0];
    for (int q = 1; q < n; q++)
        if (compute_ms[q] > slowest) slowest = compute_ms[q];
    return slowest - compute_ms[r];
}
