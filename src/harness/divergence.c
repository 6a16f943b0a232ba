/* Diverged or not-learning runs; see divergence.h for the rules. */
#include "harness/divergence.h"

#include <math.h>
#include <stdio.h>

int sb_divergence_check(struct sb_run_record *rec, int classes, long steps_per_epoch)
{
    if (!rec->epochs || rec->n_epochs < 1 || classes < 2) return 0;
    double loss = rec->epochs[rec->n_epochs - 1].train_loss;
    double untrained = log((double)classes), limit = SB_DIVERGED_LOSS_FACTOR * untrained;
    double chance = SB_CHANCE_FACTOR / classes, accuracy = rec->final_test_accuracy;
    int full_epoch = steps_per_epoch > 0 && rec->steps_total >= steps_per_epoch &&
                     rec->steps_total >= SB_NOT_LEARNING_MIN_STEPS;
    if (loss > limit)
        snprintf(rec->diverged, sizeof rec->diverged,
                 "diverged: train loss %.3g > %g x ln(%d) = %.1f (an untrained model's loss "
                 "ln(%d) %g times over), test accuracy %.1f%%; its speed is no result (lower "
                 "--lr)", loss, SB_DIVERGED_LOSS_FACTOR, classes, limit, classes,
                 SB_DIVERGED_LOSS_FACTOR, 100 * accuracy);
    else if (full_epoch && accuracy <= chance)
        snprintf(rec->diverged, sizeof rec->diverged,
                 "not learning: test accuracy %.1f%% after %ld steps (an epoch or more) <= %g x "
                 "chance (%.0f%%), train loss %.3g; its speed is no result (check --lr)",
                 100 * accuracy, rec->steps_total, SB_CHANCE_FACTOR, 100 * chance, loss);
    else
        return 0;
    rec->time_to_accuracy_s = -1.0;
    if (rec->n_warnings < SB_REPORT_MAX_WARNINGS)
        snprintf(rec->warnings[rec->n_warnings++], sizeof rec->warnings[0], "%s", rec->diverged);
    return 1;
}
