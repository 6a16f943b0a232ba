/* For the self-launch watcher (launch_watch.h): how far each rank of the job
 * got, from its control lines (job/control.h), and what to name when a
 * deadline passes; and the outputs a failed run must not leave behind. */
#ifndef SB_LAUNCH_PROGRESS_H
#define SB_LAUNCH_PROGRESS_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "core/status.h"

struct sb_rank_progress {
    int np;                     /* ranks expected */
    char (*host)[64];           /* per rank, from its "started" line */
    long *pid;
    unsigned char *started, *joined, *finished;
    int n_started, n_joined, n_finished;
    double done_at;             /* sb_now_s of the first "done" or "finished"; 0: none */
};

/* Allocates the per-rank arrays for np ranks. SB_ERR_NOMEM. */
sb_status sb_rank_progress_init(struct sb_rank_progress *p, int np);
/* Frees what sb_rank_progress_init allocated; safe after a failed init. */
void sb_rank_progress_free(struct sb_rank_progress *p);

/* Takes one control line's text (after the prefix): "started R HOST PID",
 * "joined R", "done R", "finished R". Unknown or out-of-range: ignored. */
void sb_rank_progress_line(struct sb_rank_progress *p, const char *text);

/* The state letter of local process `pid` from /proc/PID/stat's third
 * field (proc(5)): 'T' stopped by a signal, 'Z' a zombie, 'R', 'S', ...;
 * 0 when it is gone or unreadable. */
char sb_process_state(long pid);

/* Writes to out what did not arrive, as a clause of stratbench's line: the
 * launcher (pid `launcher`, 0: do not look) stopped, local ranks stopped
 * (state T in /proc), and else, at finalize, the ranks that did not finish,
 * or the ranks that never started, did not join, or were still running. */
void sb_rank_progress_describe(const struct sb_rank_progress *p, pid_t launcher, int finalize,
                               char *out, size_t cap);

/* Writes "rank R, rank S ended with it" for the ranks whose "started"
 * line named `host` (nothing when none did). */
void sb_rank_progress_on_host(const struct sb_rank_progress *p, const char *host, char *out,
                              size_t cap);

/* An output as it was before the launch: a file replaced since then
 * (another device, inode or modification time) was written by the run. */
struct sb_output_snapshot {
    int existed;
    dev_t dev;
    ino_t ino;
    struct timespec mtime;
};

/* Notes paths[0..n) ("" entries skipped) into snap[0..n). */
void sb_output_snapshot(const char *const *paths, int n, struct sb_output_snapshot *snap);

/* Removes each of paths[0..n) that was written since the snapshot. */
void sb_output_remove_written(const char *const *paths, int n,
                              const struct sb_output_snapshot *snap);

/* Whether `report` (one of paths; "" = none expected: 1) is a regular file
 * written since the snapshot. */
int sb_output_written(const char *const *paths, int n, const struct sb_output_snapshot *snap,
                      const char *report);

#endif
