/* Flags of `stratbench train`: defaults, parsing (getopt_long), validation
 * and the usage text, which shows every default. */
#ifndef SB_TRAIN_OPTS_H
#define SB_TRAIN_OPTS_H

#include <stdio.h>

#include "core/config.h"
#include "core/status.h"
#include "data/mnist.h"

struct sb_train_opts {
    struct sb_config cfg;
    int replicas_given; /* --replicas was on the command line */
    int lr_given;       /* --lr was (else the optimizer's default) */
    int help;           /* --help was asked for: print usage, exit 0 */
};

/* Fills the defaults (the values the usage text shows). */
void sb_train_opts_defaults(struct sb_train_opts *opts);

/* Parses argv (argv[0] = "train") into opts and validates every value and
 * their combination (e.g. --servers only with central). Errors:
 * SB_ERR_USAGE with one line naming the flag, the value and what is
 * expected. Resolves the data directory (--data, $STRATBENCH_DATA,
 * ./data/mnist). */
sb_status sb_train_opts_parse(struct sb_train_opts *opts, int argc, char **argv);

/* Checks the flags against the loaded data, before any training: the images
 * are the 28x28 the workloads take, the global batch fits the training set
 * (at least one step per epoch), and, when a report is asked for (the step
 * statistics are its content), --warmup-steps leaves at least one step to
 * measure (total = min(--max-steps, epochs x steps per epoch)); a run
 * without --report (e.g. --max-steps 1 --save-params for the initial
 * parameters) may be all warm-up. Errors:
 * --eval-samples is at most the test images. Errors:
 * SB_ERR_INPUT naming the image file, SB_ERR_USAGE naming the flag. */
sb_status sb_train_check_data(const struct sb_config *cfg, const struct sb_mnist *data);

/* The run's optimizer steps: min(--max-steps, epochs x steps per epoch of
 * the global batch over data's training images) (what cfg->run_steps
 * holds once resolved). Also refused by sb_train_check_data: a cosine
 * --lr-schedule whose --lr-warmup-steps leave no step to decay. */
long sb_train_run_steps(const struct sb_config *cfg, const struct sb_mnist *data);

/* Applies --eval-samples to checked data: every evaluation scores the first
 * cfg->eval_samples test images (data->test.n is cut to it; the pixels stay
 * allocated and are freed as before), and cfg->eval_samples becomes the count
 * scored (the whole test set when 0), which the report's config carries. */
void sb_train_limit_eval(struct sb_config *cfg, struct sb_mnist *data);

/* Checks every output the run will write (--report, --trace, --save-params,
 * --mllog)
 * before any work: see sb_outputs_check (src/cli/outputs.h). Called where
 * the outputs are written (rank 0, or before launching mpirun). Errors:
 * SB_ERR_USAGE naming the flag. */
sb_status sb_train_check_outputs(const struct sb_config *cfg);

/* Writes the usage text of `stratbench train` with every default. */
void sb_train_opts_usage(FILE *out);

#endif
