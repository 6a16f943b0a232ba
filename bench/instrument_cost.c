/* The cost of stratbench's own instrumentation, per call: the host clock
 * (sb_now_s, CLOCK_MONOTONIC), an NVTX range push/pop pair (sb_nvtx_push /
 * sb_nvtx_pop: NVTX3 with no tool attached, as users run it) and the same
 * pair while --trace records (sb_trace_start). Prints one JSON object of
 * nanoseconds per call, the minimum over 7 rounds (the least disturbed by
 * other processes). Not part of the ninja build: bench/harness_overhead.py
 * compiles it against build/libstratbench.a. */
#include <stdio.h>

#include "core/clock.h"
#include "core/nvtx.h"
#include "trace/trace.h"

#define CALLS 200000
#define ROUNDS 7

static volatile double sink;

static double clock_ns(void)
{
    double t0 = sb_now_s(), s = 0;
    for (int i = 0; i < CALLS; i++) s += sb_now_s();
    sink = s;
    return 1e9 * (sb_now_s() - t0) / CALLS;
}

static double range_ns(void)
{
    double t0 = sb_now_s();
    for (int i = 0; i < CALLS; i++) {
        sb_nvtx_push("bench", SB_NVTX_STEP, (uint64_t)i);
        sb_nvtx_pop();
    }
    return 1e9 * (sb_now_s() - t0) / CALLS;
}

static double min_of(double (*f)(void))
{
    double best = f();
    for (int r = 1; r < ROUNDS; r++) {
        double v = f();
        if (v < best) best = v;
    }
    return best;
}

int main(void)
{
    double clock = min_of(clock_ns), range = min_of(range_ns);
    /* --trace: spans kept in memory; room for every call of every round. */
    if (sb_trace_start(NULL, 0, 1, (long)CALLS * ROUNDS)) {
        fprintf(stderr, "instrument_cost: cannot start the trace\n");
        return 1;
    }
    double traced = min_of(range_ns);
    sb_trace_stop();
    printf("{\"clock_ns\": %.1f, \"nvtx_range_ns\": %.1f, \"traced_range_ns\": %.1f}\n", clock,
           range, traced);
    return 0;
}
