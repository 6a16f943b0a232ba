/* Ending every process of a self-launched job (launch_watch.h): mpirun and
 * what it started on this machine, its ranks and, through its launch agent,
 * the daemons and ranks of other hosts that run here (the one-machine
 * cluster of tests/cluster) or their ssh clients. */
#ifndef SB_LAUNCH_REAP_H
#define SB_LAUNCH_REAP_H

#include <sys/types.h>

/* SIGKILL to every descendant of `child` (mpirun) on this machine, found by
 * the parent links of /proc/PID/stat, then to `child`: a stopped process
 * dies too, which SIGTERM would not reach. */
void sb_launch_end_job(pid_t child);

/* After mpirun has been reaped: SIGKILL to what it left (reparented to this
 * process, which start-up made a child subreaper, prctl(2)
 * PR_SET_CHILD_SUBREAPER) and reaps it, waiting at most `wait_s` seconds
 * for a process that does not die at once (uninterruptible sleep); so
 * nothing of the job outlives stratbench (issue 39, item 5: a remote host's
 * agent shell and orted lived 1.2-2.2 s longer). Returns when this process
 * has no child left, or after wait_s. */
void sb_launch_end_leftovers(double wait_s);

#endif
