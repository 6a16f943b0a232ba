/* The training loop shared by every strategy: epochs of seeded global
 * batches, per-step phase timing, evaluation after each epoch, time to
 * accuracy, and the outputs (report, saved parameters) written by rank 0. */
#ifndef SB_HARNESS_H
#define SB_HARNESS_H

#include "core/config.h"
#include "core/status.h"
#include "data/mnist.h"
#include "job/job.h"

/* Trains cfg->workload under cfg->strategy on `data` within `job`, prints
 * one line per epoch on rank 0 and writes the report and parameters that
 * cfg asks for. argc/argv go into the report. Errors: any layer's status;
 * a failure on one rank must end the whole job (the caller's duty). */
sb_status sb_harness_train(const struct sb_config *cfg, const struct sb_mnist *data,
                           struct sb_job *job, int argc, char **argv);

#endif
