/* The link a prediction runs on, calibrated from two measured ddp runs
 * (`stratbench predict REPORT --calibrate LAYERS`, docs/cost-model.md,
 * "α under load, from the messages"): the run itself and the same run with
 * a bucket per layer. Each run's communication per step is what its step
 * leaves beyond its compute; ddp's own cost model (the --allreduce auto
 * variant on the run's buckets) says how many messages (α terms) and bytes
 * (1/B terms) that communication holds, so two runs give two equations in
 * α and 1/B. α is then the per-message cost under load (the probe measures
 * an idle link), B the rate the run's all-reduce really got. */
#ifndef SB_PREDICT_LINK_H
#define SB_PREDICT_LINK_H

#include "comm/cost_model.h"
#include "core/status.h"

/* One measured ddp run as the calibration reads it. */
struct sb_link_run {
    const char *path;       /* the report, for error lines */
    int replicas;           /* n >= 2 */
    const double *buckets;  /* (n_buckets) its gradient buckets' bytes, launch order */
    int n_buckets;
    double comm_ms;         /* step - compute, ms per step (median step, medians of phases) */
};

/* Solves for the link that makes ddp's model reproduce both runs' comm_ms:
 *   comm = a alpha + b / B + c,
 * a (messages on the critical path), b (bytes) and c (what depends on
 * neither; 0 for ddp's all-reduces with the reduction's gamma left at 0) read
 * off the model itself (ddp's comm_model, its first variant: --allreduce
 * auto per bucket; no overlap), evaluated per run at (alpha, B) = (0, inf),
 * (1 s, inf) and (0, 1 B/s). alpha below alpha_floor_s (the probe's, or 0)
 * is raised to it and B solved from `one` alone. *out gets alpha and B
 * (gamma 0: the reduction's time stays inside the calibrated link).
 * Errors: SB_ERR_INPUT naming the reports when their models do not differ
 * in messages (the same buckets), or when `one`'s step leaves no time for
 * its bytes at the solved alpha (no one link fits both runs: on a model of
 * under a megabyte a link's burst and a message's wake-up weigh as much as
 * its bytes). */
sb_status sb_predict_calibrate_link(const struct sb_link_run *one,
                                    const struct sb_link_run *layers, double alpha_floor_s,
                                    struct sb_link *out);

#endif
