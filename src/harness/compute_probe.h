/* The compute probe: the whole model's forward and backward timed at two
 * batch sizes at start-up, so that the layout model (predict --layouts)
 * can tell the part of a pass that does not grow with the batch from the
 * part that does.
 *
 * Why: a pass of the wide mlp at a few samples is bound by reading its
 * weights (7.4 MB, out of the caches), not by its flops: t(b) is about
 * t0 + b t1, with t0 the weights' traffic (measured 2026-11-28, single, 1
 * thread: 1.9 / 2.5 / 5.1 / 16.9 ms at b = 4 / 16 / 64 / 256). A layout
 * that gives each rank a quarter of the weights (tp 4) or a micro-batch of
 * a few samples (a pipeline) then takes other times than the measured
 * per-sample figure scaled by samples says (docs/layouts.md, "A pass's
 * fixed part").
 *
 * How: a model of the run's workload and configuration of its own (the
 * run's seed: the training's model is not touched, nor any random
 * stream), batches of b2 = the run's per-replica batch and b1 =
 * max(1, b2 / 4) training samples, one warming pass at b2 then 2 timed
 * passes at each size; the best wall time and the best CPU time of the
 * calling thread (CLOCK_THREAD_CPUTIME_ID: what the pass takes on a core
 * of its own, whatever shares the cores). Every rank runs it at once
 * (after the link probe), as the training's ranks compute at once. Cost:
 * 5 forward and backward passes, 3 of them at the run's batch (the wide
 * mlp at 64 samples: ~30 ms; the default vit: ~0.3 s). */
#ifndef SB_COMPUTE_PROBE_H
#define SB_COMPUTE_PROBE_H

#include "backend/backend.h"
#include "core/config.h"
#include "core/status.h"
#include "data/mnist.h"
#include "report/report.h" /* struct sb_compute_probe */
#include "workloads/workload.h"

#define SB_COMPUTE_PROBE_REPS 2

/* Runs the probe for cfg's workload on backend be (host memory only: a
 * device's passes are asynchronous and would need its events) with
 * samples of data's training split into *out. Errors: those of creating
 * the model and of its passes; SB_ERR_NOMEM. On error *out is not done. */
sb_status sb_compute_probe_run(const struct sb_config *cfg, const struct sb_backend_ops *be,
                               const struct sb_workload_ops *wl, const struct sb_mnist *data,
                               struct sb_compute_probe *out);

#endif
