/* Diverged training (issue 39, item 2; docs/faults.md, "Diverged training"):
 * a run whose loss blew up, or that stopped learning, completes, but its
 * speed is not a result. After training, rank 0 checks the record against
 * two rules derived from the softmax cross-entropy of a C-class classifier
 * (C = 10 for MNIST):
 *
 *   1. diverged: the last epoch's mean train loss is above
 *      SB_DIVERGED_LOSS_FACTOR x ln(C). An untrained model predicts about
 *      1/C for every class, a loss of ln(C) (2.303 for C = 10); training
 *      lowers it. Ten times that (23.0) means the right class gets
 *      probability e^-23 ~ 1e-10 on average: the weights blew up.
 *   2. not learning: after at least one full epoch and at least
 *      SB_NOT_LEARNING_MIN_STEPS steps, the final test accuracy is at most
 *      SB_CHANCE_FACTOR / C (twice chance, 20 % for C = 10). SGD learns
 *      per step: the default run reaches 85 % in 20 steps, so 50 leave a
 *      margin; an epoch of one step (a batch of 40000) is too short to say.
 *
 * NaN or infinite losses end the run earlier (SB_ERR_DIVERGED). */
#ifndef SB_DIVERGENCE_H
#define SB_DIVERGENCE_H

#include "report/report.h" /* struct sb_run_record */

#define SB_DIVERGED_LOSS_FACTOR 10.0
#define SB_CHANCE_FACTOR 2.0
#define SB_NOT_LEARNING_MIN_STEPS 50

/* Checks the finished record `rec` of a `classes`-class task whose epoch
 * is `steps_per_epoch` steps. When a rule holds: writes the reason to
 * rec->diverged, sets rec->time_to_accuracy_s to -1 (null: a time to
 * accuracy of a run that did not learn is no result) and adds the reason
 * as a warning (rec->warnings, printed with the run's other warnings).
 * Returns 1 when it did, else 0 (rec untouched). Never fails. */
int sb_divergence_check(struct sb_run_record *rec, int classes, long steps_per_epoch);

#endif
