/* `stratbench sweep`: runs a matrix of strategies x replica counts x
 * strong/weak scaling x repeats, each run a child `stratbench train`, and
 * writes DIR/scaling.json (reports/scaling.schema.json): per point the
 * medians over repeats with bootstrap confidence intervals, speedup and
 * efficiency against `single`, time to accuracy and the phase breakdown. */
#ifndef SB_SWEEP_H
#define SB_SWEEP_H

#include <cjson/cJSON.h>

#include "core/status.h"

#define SB_SCALING_SCHEMA_VERSION "1.5"

/* Runs `stratbench sweep` with argv[0] = "sweep" and returns the process exit
 * status: 0 every run succeeded, 1 some run failed (scaling.json is still
 * written), 2 bad flags (one line on stderr naming the flag). */
int sb_sweep_main(int argc, char **argv);

/* Largest JSON file read: a run report or scaling.json is kilobytes; a
 * bounded read keeps `compare /dev/zero` or a runaway file from eating
 * memory. */
#define SB_JSON_MAX_BYTES (64 << 20)

/* The JSON file helpers below live in src/cli/sweep_stats.c.
 *
 * Reads and parses the JSON file `path` into *out (free with cJSON_Delete).
 * Only a regular file (or a link to one) is read, at most SB_JSON_MAX_BYTES;
 * a FIFO, device or directory is refused before any read. Errors:
 * SB_ERR_INPUT naming the path (missing, not a regular file, too large,
 * unreadable, not one JSON value with only white space after it, a NUL
 * byte), SB_ERR_NOMEM. */
sb_status sb_json_read_file(const char *path, cJSON **out);

/* Writes `doc` to `path` atomically: a temporary file beside it, fsync,
 * rename (sb_write_text_atomic). Errors: SB_ERR_IO naming the path;
 * SB_ERR_NOMEM. */
sb_status sb_json_write_file_atomic(const char *path, const cJSON *doc);

#endif
