/* For the self-launch watcher (launch_watch.h): what mpirun's stderr says,
 * taken line by line. Open MPI's framed banners are read whole; the ones
 * whose news stratbench's own line gives (a rank killed by a signal, a
 * lost daemon, MPI_ABORT, "Primary job terminated normally", ...) are
 * kept as facts and dropped, any other one printed as Open MPI wrote it;
 * the ranks' control lines (job/control.h) advance their progress; Open
 * MPI's internal "[host:pid] ..." lines are counted and dropped, the first
 * ORTE_ERROR_LOG kept; the ranks' "stratbench:" lines are kept to print at
 * the end in order (warnings at once); every other line passes through to
 * this process's stderr. */
#ifndef SB_LAUNCH_STDERR_H
#define SB_LAUNCH_STDERR_H

#include <stddef.h>

#include "core/status.h"
#include "job/launch_progress.h"

struct sb_launch_stderr {
    /* A killed rank, from mpirun's "noticed that process rank" banner
     * (dead_rank -1: none). */
    int dead_rank, dead_signal;
    char dead_host[128];
    /* The ranks' stratbench lines, kept to print at the end in order. */
    char *lines;
    size_t len, cap;
    char flight[512];  /* "flight recorder: PATH" seen in a rank's line */
    double fatal_at;   /* when a rank printed that it ends the job, or Open MPI
                        * logged an internal error (sb_now_s; 0: not yet) */
    /* The banner being read (between frames), and whether in one. */
    char *block;
    size_t block_len, block_cap;
    int in_block;
    struct sb_rank_progress rp; /* from the ranks' control lines */
    int noise;           /* Open MPI internal lines dropped */
    char mpi_error[256]; /* the first ORTE_ERROR_LOG's text: mpirun is failing */
    char lost_host[128]; /* the host whose daemon mpirun lost */
    char line[4096];     /* the unfinished line read last */
    size_t fill;
};

/* Empties *s for a job of np ranks (dead_rank -1). Errors: SB_ERR_NOMEM
 * (sb_rank_progress_init); sb_launch_stderr_free is safe after it. */
sb_status sb_launch_stderr_init(struct sb_launch_stderr *s, int np);

/* Frees what *s holds (not s). */
void sb_launch_stderr_free(struct sb_launch_stderr *s);

/* Takes one line (with its '\n', if it had one) as described above. */
void sb_launch_stderr_take(struct sb_launch_stderr *s, const char *line);

/* Reads what file descriptor fd (mpirun's stderr) holds and takes each
 * complete line; a line longer than the buffer is taken in pieces.
 * Returns 0 at EOF or on a read error other than EINTR, else 1. */
int sb_launch_stderr_read(struct sb_launch_stderr *s, int fd);

/* At the end of stderr: takes the unfinished last line and ends an
 * unfinished banner. */
void sb_launch_stderr_end(struct sb_launch_stderr *s);

#endif
