/* How noisy a measured run was, read back from its run report: the share
 * of its step time in stalled steps, the involuntary context switches per
 * second of its busiest rank, the host's CPU steal, and whether the run
 * called itself noisy (reports/README.md: `warnings`, `noise_by_rank`,
 * `step_ms.stall_fraction`). compare labels its verdicts with it; sweep
 * --rerun-noisy reruns the repeats it finds noisy. */
#ifndef SB_COMPARE_NOISE_H
#define SB_COMPARE_NOISE_H

#include <cjson/cJSON.h>

struct sb_report_noise {
    int noisy;             /* 1: a "noisy run" warning, or a threshold below crossed */
    double stall_fraction; /* step_ms.stall_fraction, 0..1 (0 when absent) */
    double nivcsw_per_s;   /* the largest involuntary_context_switches / train_s of any rank */
    double steal_fraction; /* the largest cpu_steal_fraction of any rank (0 when unknown) */
    double runqueue_fraction; /* the largest runqueue_wait_s / train_s of any rank (0 when
                               * unknown) */
};

/* Reads rep's noise into *out. A report is noisy when it says so (a
 * warning starting "noisy run", schema 1.8 on) or, for older reports, when
 * its fields cross the thresholds that make the run say so
 * (harness/run_warnings.h: stall fraction above SB_WARN_STALL_FRACTION, or
 * more than SB_WARN_NIVCSW_PER_S involuntary context switches per second).
 * Never fails: missing fields count as quiet. */
void sb_report_noise_read(const cJSON *rep, struct sb_report_noise *out);

/* 1 when the run report at `path` is noisy (sb_report_noise_read), 0 when
 * it is quiet or cannot be read (a run without a report is not rerun for
 * noise). */
int sb_report_file_noisy(const char *path);

#endif
