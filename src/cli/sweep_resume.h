/* What `stratbench sweep` trusts on disk (issue 39, item 3; docs/faults.md):
 * one sweep at a time per --out (an flock(2) on the folder), and on
 * --resume, a run kept only when its report is there and belongs to it. */
#ifndef SB_SWEEP_RESUME_H
#define SB_SWEEP_RESUME_H

#include <stddef.h>

#include "cJSON.h"
#include "core/status.h"

/* Takes an exclusive, non-blocking flock(2) on the folder `out` (which
 * exists) for the life of this process: the kernel drops it when the
 * process ends, however it ends. The descriptor is close-on-exec, so the
 * child runs do not hold it. Errors: SB_ERR_USAGE naming --out when another
 * process (a second sweep) holds it; SB_ERR_IO naming the folder when it
 * cannot be opened or locked (flock's errno). */
sb_status sb_sweep_lock_out(const char *out);

/* Whether the resumed sweep keeps the run whose report is `path` instead
 * of running `argv` (its command line, NULL-terminated: self, "train",
 * flags, including "--report" `path`). It keeps it only when every check
 * passes: the interrupted sweep's scaling.json (`resume_doc`) lists the
 * report as "ok"; the file is there and parses; its environment.argv is
 * argv after the program (the --report value compared by file name, so
 * that --out may be spelled differently); its environment.git_commit,
 * git_dirty and stratbench_version are this build's; it measured a step.
 * Returns 1 to keep it; 0 to run it, with `why` (size `len`) saying what
 * failed when the scaling.json had listed it as ok ("" otherwise). */
int sb_sweep_resume_keep(const cJSON *resume_doc, const char *path, char *const *argv,
                         char *why, size_t len);

#endif
