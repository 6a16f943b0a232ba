/* The self-launch watcher: stratbench runs `mpirun` as a child, stays its
 * parent, and turns what happens to the job into one stratbench line and
 * an exit status (docs/faults.md):
 *
 * - a rank killed by a signal: Open MPI's mpirun reports "mpirun noticed
 *   that process rank N ... on node H exited on signal S"; the watcher prints
 *   "stratbench: rank N (host H) was killed by signal S (NAME)", exit 1;
 * - SIGINT or SIGTERM to stratbench: forwarded to mpirun as SIGTERM (Open
 *   MPI then ends every rank: SIGCONT, SIGTERM, SIGKILL after 1 s); if mpirun
 *   has not ended 3 s later, mpirun and its ranks get SIGKILL; then
 *   "stratbench: interrupted (SIGINT)", exit 130;
 * - a rank printed its error line (it calls MPI_Abort) but mpirun has not
 *   ended 1.5 s later (a host cut off from the network keeps mpirun waiting
 *   for its daemon): mpirun gets SIGTERM, then every descendant SIGKILL;
 * - otherwise mpirun's exit status, with the ranks' stratbench lines.
 *
 * mpirun's stderr passes through a pipe: the watcher keeps every line but
 * Open MPI's framed banners that it has turned into its own line (MPI_ABORT,
 * "Primary job terminated normally ...", "mpirun noticed that process ...",
 * "mpirun detected that one or more processes exited with non-zero status").
 * stdout is not touched (epoch lines arrive as the ranks write them). */
#ifndef SB_LAUNCH_WATCH_H
#define SB_LAUNCH_WATCH_H

#include "core/status.h"

/* Runs args (NULL-terminated; args[0] is looked up in PATH) with stdin from
 * /dev/null, watches it as above, and sets *exit_code to the status this
 * process should exit with. Errors: SB_ERR_USAGE when args[0] cannot be
 * started (ENOENT...), naming it; SB_ERR_INTERNAL if fork or pipe fail. */
sb_status sb_launch_watch(char **args, int *exit_code);

#endif
