/* What the parsing of `stratbench train`'s flags (src/cli/train_opts.c)
 * shares with their validation (src/cli/train_check.c): the check of the
 * flags' combination once every flag is parsed. Internal to the command
 * line. */
#ifndef SB_TRAIN_CHECK_H
#define SB_TRAIN_CHECK_H

#include "cli/train_opts.h"
#include "core/status.h"

/* Checks that need several flags together (the strategy, workload, device
 * and communicator names resolved once into cfg's entries; --allreduce,
 * --precision, --grad-compression, --local-sgd, --cuda-graph, the vit's
 * shape, --clear-cache, the strategy's own check) and sets the defaults
 * that depend on them (Adam's --lr, --comm, --allreduce). Errors:
 * SB_ERR_USAGE with one line naming the flag. */
sb_status sb_train_opts_validate(struct sb_train_opts *o);

#endif
