/* "Did you mean --report?": the answer to a misspelt flag.
 *
 * Every command parses its flags with getopt_long; when getopt_long does
 * not know a flag, the command returns sb_cli_bad_flag(), one usage line
 * that names the flag and, when one is close, the flag that was meant. */
#ifndef SB_CLI_SUGGEST_H
#define SB_CLI_SUGGEST_H

#include <getopt.h>
#include <stddef.h>

#include "core/status.h"

/* The name (without "--") of the long option in `opts` (getopt_long's
 * table, ended by a zeroed entry) closest to `arg` ("--repot", "--repot=x",
 * "-repot"), or NULL when none is close: the restricted Damerau-Levenshtein
 * distance (insertions, deletions, substitutions, swaps of neighbours) is
 * at most 1 for names up to 4 letters, 2 up to 8 and 3 beyond; or `arg` is
 * a prefix of exactly one name. Ties go to the first in `opts`. */
const char *sb_cli_suggest(const struct option *opts, const char *arg);

/* Edit distance of a[0..na) and b[0..nb) as above (each at most 63 bytes
 * are compared; longer strings count as far apart). */
int sb_cli_edit_distance(const char *a, size_t na, const char *b, size_t nb);

/* The error of a flag that getopt_long refused in command `cmd` ("train",
 * "sweep", ...): "CMD: --flag: missing value" when `arg` names an option of
 * `opts` that takes a value, else "CMD: unknown flag 'ARG' (did you mean
 * --NAME? see stratbench CMD --help)" (the "did you mean" only when
 * sb_cli_suggest finds one). Returns SB_ERR_USAGE (exit status 2). */
sb_status sb_cli_bad_flag(const char *cmd, const char *arg, const struct option *opts);

#endif
