/* Phase names; see phase.h. */
#include "core/phase.h"

const char *sb_phase_name(enum sb_phase phase)
{
    static const char *const names[SB_PHASE_COUNT] = {
        "data", "h2d", "forward", "backward",
        "comm", "comm_exposed", "optimizer", "wait",
    };
    return (unsigned)phase < SB_PHASE_COUNT ? names[phase] : "unknown";
}
