/* The statistics half of `stratbench sweep` (src/cli/sweep.c runs the
 * children): the values read from each run report, the per-point medians
 * with bootstrap intervals, speedup and efficiency against `single`, and the
 * JSON file helpers that read run reports and write scaling.json
 * (reports/scaling.schema.json). Internal to src/cli. */
#ifndef SB_SWEEP_STATS_H
#define SB_SWEEP_STATS_H

#include <cjson/cJSON.h>

#include "core/status.h"

/* Upper bound of --repeats (parse_opts checks it): the size of the
 * per-point scratch arrays. */
#define SB_SWEEP_MAX_REPEATS 1000

/* Phases averaged into a point's "phases_ms", in report order (h2d, zero
 * on the CPU, left out). */
#define SB_SWEEP_N_PHASES 7
extern const char *const sb_sweep_phases[SB_SWEEP_N_PHASES];

/* "strong" (index 0) and "weak" (1), as scaling.json names them. */
extern const char *const sb_sweep_scaling_name[2];

/* Measurements of one successful run (one repeat), from its report. */
struct sb_sweep_values {
    double step_ms;       /* step_ms.median */
    double step_p95_ms;   /* step_ms.p95 */
    double samples_per_s; /* samples trained / train_s (wall time, evaluation excluded) */
    double epoch_s;       /* train_s / epochs run */
    double wall_step_ms;  /* 1000 * train_s / steps_total: wall time per step */
    double tta_s;         /* time_to_accuracy_s; NaN if not reached */
    double accuracy;      /* final_test_accuracy */
    double phase_ms[SB_SWEEP_N_PHASES]; /* phases_ms.<phase>.mean */
    double memory_per_rank_bytes; /* the largest memory.by_rank[].total_bytes; NaN: none */
};

/* One point of the matrix and its successful repeats' values. */
struct sb_sweep_point {
    const char *strategy;
    int replicas, scaling, batch; /* scaling: 0 strong, 1 weak; batch per replica */
    int method;                   /* sweep.c's index of its gradient method; -1 plain */
    int implicit;                 /* the baseline the sweep adds (single n=1 not in the
                                   * matrix): run without the other strategies' flags */
    int layout;                   /* sweep.c's index of its layout (--layouts); -1 none */
    int precision;                /* its index in --precisions (0: fp32 without the flag) */
    struct sb_sweep_values *ok;   /* successful repeats (room for every repeat) */
    int n_ok;
    double *t;   /* per-repeat T for speedup: epoch_s (strong), wall_step_ms (weak) */
    cJSON *json; /* the point's object in scaling.json */
};

/* Fills *rv from the run report `rep`; a missing field reads as NaN.
 * samples_per_s is the report's (schema 1.5); for older reports it is
 * derived the same way, steps_total * global_batch / train_s. */
void sb_sweep_values_from(const cJSON *rep, struct sb_sweep_values *rv);

/* Builds pt->json from the point's successful repeats (pt->ok, pt->n_ok):
 * its configuration (workload, device, hidden copied from `first_report`,
 * the first successful run's report, or nulls when NULL), `runs` (the
 * per-repeat array, owned by pt->json afterwards, or freed here when it
 * cannot be attached), medians with 95% bootstrap intervals of
 * samples_per_s, step_ms and epoch_s, the median time to accuracy (null
 * unless every repeat reached it), final accuracy and phase means. Speedup
 * is added later (sb_sweep_add_speedup). The caller frees pt->json, also
 * on error. Errors: SB_ERR_NOMEM. */
sb_status sb_sweep_point_summarize(struct sb_sweep_point *pt, cJSON *runs,
                                   const cJSON *first_report);

/* Speedup and efficiency of N replicas from r = T1/TN (T: a time, so r > 1
 * is faster). strong (scaling 0, T = epoch time at a fixed global batch):
 * speedup = r, efficiency = r/N; weak (1, T = wall time per step at a
 * fixed per-replica batch, each step doing N times the work): speedup =
 * N·r, efficiency = r. Either way speedup is the wall-time throughput ratio
 * X_N/X_1 and efficiency = speedup/N. */
void sb_scaling_from_ratio(double r, int n, int scaling, double *speedup, double *efficiency);

/* Adds "speedup" and "efficiency" {value, ci95_low, ci95_high} of `pt`
 * against the baseline `base` (single, n=1, same scaling; NULL: nulls).
 * strong: r = T1/T_N with T = epoch time, speedup = r, efficiency = r/N;
 * weak: r = T1/T_N with T = wall time per step, efficiency = r, speedup = N·r
 * (sb_scaling_from_ratio).
 * The interval is a bootstrap of the ratio of medians over the repeats.
 * Errors: SB_ERR_NOMEM (then pt->json may lack some of these fields). */
sb_status sb_sweep_add_speedup(struct sb_sweep_point *pt, const struct sb_sweep_point *base);

#endif
