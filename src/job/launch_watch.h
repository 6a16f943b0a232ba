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
 * - mpirun itself killed (SIGKILL, the OOM killer) or ending with a status
 *   of its own (Open MPI's 134 or 205 after an internal error): "stratbench:
 *   the MPI launcher mpirun (pid P) was killed by signal S (NAME)" or
 *   "... exited with status N", naming the ranks that had not finished,
 *   exit 1; its ranks die with it (control.h: PR_SET_PDEATHSIG);
 * - start-up: until every rank has joined (job/control.h's lines), the
 *   job gets 2 x --timeout + 10 s; finalize: from the first rank that is
 *   done until mpirun has ended, --timeout + 5 s. Past either deadline
 *   every process of the job gets SIGKILL and the line names what did not
 *   arrive (the launcher or a rank stopped, ranks that never started or
 *   did not finish), exit 1. --timeout 0 turns both off;
 * - a launcher that ends with status 0 without every rank having finished
 *   (STRATBENCH_MPIRUN=true) or without the report: exit 1, naming them;
 * - otherwise mpirun's exit status, with the ranks' stratbench lines.
 *
 * Whenever the status is not 0, the outputs that this run wrote (files
 * replaced since the launch) are removed, so a failed run never leaves a
 * complete report. The parent itself: SIGHUP is handled like SIGTERM, and
 * mpirun gets PR_SET_PDEATHSIG (SIGKILL) so that a SIGKILLed stratbench
 * takes its job with it.
 *
 * mpirun's stderr passes through a pipe: the watcher keeps every line but
 * Open MPI's framed banners that it has turned into its own line (MPI_ABORT,
 * "Primary job terminated normally ...", "mpirun noticed that process ...",
 * "mpirun detected that one or more processes exited with non-zero status"),
 * the control lines, and Open MPI's internal messages of the form
 * "[host:pid] ..." (ORTE_ERROR_LOG, PMIx errors, backtraces of its own
 * processes), which stratbench's one line replaces (job/launch_stderr.h).
 * stdout is not touched (epoch lines arrive as the ranks write them). */
#ifndef SB_LAUNCH_WATCH_H
#define SB_LAUNCH_WATCH_H

#include "core/status.h"

/* What the watcher expects of the job. */
struct sb_watch_plan {
    int np;                     /* ranks the launcher should start */
    double timeout_s;           /* --timeout, seconds; 0: no start-up/finalize deadline */
    const char *report;         /* --report path that must exist after success, or "" */
    const char *const *outputs; /* every output path of the run ("" entries skipped) */
    int n_outputs;
};

/* Runs args (NULL-terminated; args[0] is looked up in PATH) with stdin from
 * /dev/null, watches it as above, and sets *exit_code to the status this
 * process should exit with. Errors: SB_ERR_USAGE when args[0] cannot be
 * started (ENOENT...), naming it; SB_ERR_INTERNAL if fork or pipe fail. */
sb_status sb_launch_watch(char **args, const struct sb_watch_plan *plan, int *exit_code);

#endif
