/* Flags of `stratbench train`: defaults, parsing (getopt_long), validation
 * and the usage text, which shows every default. */
#ifndef SB_TRAIN_OPTS_H
#define SB_TRAIN_OPTS_H

#include <stdio.h>

#include "core/config.h"
#include "core/status.h"

struct sb_train_opts {
    struct sb_config cfg;
    int replicas_given; /* --replicas was on the command line */
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

/* Writes the usage text of `stratbench train` with every default. */
void sb_train_opts_usage(FILE *out);

#endif
