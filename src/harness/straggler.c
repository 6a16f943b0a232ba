/* Stragglers named and the slow-rank test hook; see straggler.h. */
#include "harness/straggler.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/stats.h"

int sb_straggler_line_due(const struct sb_straggler *g, double step_median_ms)
{
    return g->ranks > 0 && step_median_ms > 0 && g->cost_ms > SB_STRAGGLER_LINE * step_median_ms &&
           g->slowest_fraction >= SB_STRAGGLER_STEADY;
}

sb_status sb_stragglers(const struct sb_rank_timings *all, const double *step_ms, size_t n,
                        int oversubscribed, struct sb_straggler *out)
{
    SB_TRY(sb_rank_timings_straggler(all, out));
    if (out->ranks == 0) return SB_OK;
    if (!(out->hosts = calloc((size_t)out->ranks, sizeof *out->hosts)))
        return sb_error(SB_ERR_NOMEM, "stragglers: out of memory");
    for (int r = 0; r < out->ranks; r++) out->hosts[r] = sb_watchdog_host(r);
    struct sb_summary step;
    if (n == 0 || sb_summarize(step_ms, n, &step) != SB_OK || step.median <= 0) return SB_OK;
    if (sb_straggler_line_due(out, step.median)) {
        printf("straggler: rank %d (host %s) costs the other ranks %.1f ms per step (%.0f%% of "
               "the %.1f ms step): compute %.1f ms against %.1f ms for the slowest of the rest%s\n",
               out->rank, out->hosts[out->rank], out->cost_ms, 100.0 * out->cost_ms / step.median,
               step.median, out->compute_ms, out->others_compute_ms,
               oversubscribed ? "; this host runs more compute threads than cores (see the "
                                "warning), so the rank may be slow from sharing a core, not "
                                "from its own work"
                              : "");
        fflush(stdout);
    }
    return SB_OK;
}

sb_status sb_slow_rank_hook(int rank, int size, double *slow_ms)
{
    *slow_ms = 0.0;
    const char *v = getenv("STRATBENCH_TEST_SLOW_RANK");
    if (!v || !*v) return SB_OK;
    char *end = NULL;
    long r = strtol(v, &end, 10);
    double ms = -1.0;
    if (end != v && *end == ':') {
        const char *m = end + 1;
        ms = strtod(m, &end);
        if (end == m || *end) ms = -1.0;
    }
    if (!(ms >= 0.0 && ms <= 60000.0) || r < 0 || r >= size)
        return sb_error(SB_ERR_USAGE, "STRATBENCH_TEST_SLOW_RANK: expected RANK:MS with RANK in "
                        "0..%d and MS in 0..60000, got '%s'", size - 1, v);
    if (r == rank) *slow_ms = ms;
    return SB_OK;
}

void sb_slow_rank_delay(double t0_s, double ms)
{
    double deadline = t0_s + 1e-3 * ms, ahead = 1e-3 * ms - 2e-3;
    if (ahead > 0) {
        struct timespec d = {(time_t)ahead, (long)(fmod(ahead, 1.0) * 1e9)};
        while (nanosleep(&d, &d) != 0) {}
    }
    while (sb_now_s() < deadline) sched_yield();
}
