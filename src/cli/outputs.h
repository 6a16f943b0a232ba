/* Output paths checked before any work starts.
 *
 * A run that would fail to write its report after ten epochs of training
 * should fail before the first step instead: every output a command will
 * write (train's --report, --trace, --save-params; sweep's --out and its
 * scaling.json) is checked up front, and a bad one is a usage error (exit 2)
 * naming the flag. The writers themselves stay atomic (temporary file beside
 * the target, then rename: src/report/report.h), so these checks are about
 * failing early, not about safety. */
#ifndef SB_OUTPUTS_H
#define SB_OUTPUTS_H

#include "core/status.h"

/* Bytes that must be free on an output's file system (a full disk is found
 * before training, not after it). */
#define SB_OUTPUT_MIN_FREE_BYTES (1L << 20)

/* The longest suffix stratbench adds to an output's name: the flight
 * recorder's file (report/flight_report.h) written through a temporary
 * (core/atomic_file.h). */
#define SB_OUTPUT_LONGEST_SUFFIX ".flight.json.tmp.XXXXXX"

/* One output file: the flag that names it (e.g. "--report") and its path
 * ("" = not asked for: skipped). */
struct sb_output {
    const char *flag;
    const char *path;
};

/* Checks each of the `n` outputs: the path does not end in '/', is not a
 * directory, a device, a FIFO, a socket or a symbolic link (an existing
 * regular file is fine: it is replaced atomically); its directory exists,
 * is a directory, is writable (a file can be created there: read-only file
 * systems included) and has SB_OUTPUT_MIN_FREE_BYTES free, or does not
 * exist and its nearest existing ancestor is a writable directory (the
 * writer creates the missing folders, as sweep --out does); the name with
 * SB_OUTPUT_LONGEST_SUFFIX fits NAME_MAX (pathconf of its directory) and
 * the path PATH_MAX; and no two outputs name the same file (same directory,
 * by device and inode, and the same name, or existing files with the same
 * device and inode: hard links). Errors: SB_ERR_USAGE, one line naming the flag, the path and
 * what is wrong. */
sb_status sb_outputs_check(const struct sb_output *outs, int n);

/* Refuses an output that exists and is one of the `n_inputs` input files
 * (same device and inode: the same path by any name, or a hard link).
 * Errors: SB_ERR_USAGE naming the flag, the output and the input. */
sb_status sb_outputs_check_inputs(const struct sb_output *outs, int n,
                                  const char *const *inputs, int n_inputs);

/* Checks an output directory (sweep's --out): if it exists it is a
 * directory (a symbolic link to one is fine) that is writable; if not, its
 * nearest existing ancestor is a writable directory (so mkdir -p will
 * succeed). Errors: SB_ERR_USAGE naming `flag` and the path. */
sb_status sb_output_dir_check(const char *flag, const char *dir);

#endif
