/* The ranks' progress and the run's outputs, for the watcher; see
 * launch_progress.h. */
#include "job/launch_progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"

sb_status sb_rank_progress_init(struct sb_rank_progress *p, int np)
{
    memset(p, 0, sizeof *p);
    p->np = np;
    p->host = calloc((size_t)np, sizeof *p->host);
    p->pid = calloc((size_t)np, sizeof *p->pid);
    p->started = calloc((size_t)np, 1);
    p->joined = calloc((size_t)np, 1);
    p->finished = calloc((size_t)np, 1);
    if (!p->host || !p->pid || !p->started || !p->joined || !p->finished) {
        sb_rank_progress_free(p);
        return sb_error(SB_ERR_NOMEM, "launch: out of memory");
    }
    return SB_OK;
}

void sb_rank_progress_free(struct sb_rank_progress *p)
{
    free(p->host);
    free(p->pid);
    free(p->started);
    free(p->joined);
    free(p->finished);
    memset(p, 0, sizeof *p);
}

void sb_rank_progress_line(struct sb_rank_progress *p, const char *text)
{
    int rank = -1;
    long pid = 0;
    char host[64] = "";
    if (sscanf(text, "started %d %63s %ld", &rank, host, &pid) == 3 && rank >= 0 &&
        rank < p->np) {
        if (!p->started[rank]) p->n_started++;
        p->started[rank] = 1;
        snprintf(p->host[rank], sizeof p->host[rank], "%s", host);
        p->pid[rank] = pid;
    } else if (sscanf(text, "joined %d", &rank) == 1 && rank >= 0 && rank < p->np) {
        if (!p->joined[rank]) p->n_joined++;
        p->joined[rank] = 1;
    } else if (sscanf(text, "done %d", &rank) == 1 && rank >= 0 && rank < p->np) {
        if (!p->done_at) p->done_at = sb_now_s();
    } else if (sscanf(text, "finished %d", &rank) == 1 && rank >= 0 && rank < p->np) {
        if (!p->finished[rank]) p->n_finished++;
        p->finished[rank] = 1;
        if (!p->done_at) p->done_at = sb_now_s();
    }
}

char sb_process_state(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* Appends ", " and "rank R (host H)" for each rank with flag[r] == want
 * (or every rank when flag is NULL) to out; returns how many. With
 * `stopped`, only local ranks stopped by a signal. */
static int list_ranks(const struct sb_rank_progress *w, const unsigned char *flag, int want, int stopped,
                      char *out, size_t cap)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int n = 0;
    for (int r = 0; r < w->np; r++) {
        if (flag && flag[r] != want) continue;
        if (stopped && !(w->pid[r] && strcmp(w->host[r], host) == 0 &&
                         sb_process_state(w->pid[r]) == 'T'))
            continue;
        size_t len = strlen(out);
        if (n == 8) {
            snprintf(out + len, cap - len, ", ...");
            return n + 1;
        }
        if (w->host[r][0])
            snprintf(out + len, cap - len, "%srank %d (host %s)", n ? ", " : "", r,
                     w->host[r]);
        else
            snprintf(out + len, cap - len, "%srank %d", n ? ", " : "", r);
        n++;
    }
    return n;
}

void sb_rank_progress_describe(const struct sb_rank_progress *w, pid_t launcher, int finalize,
                               char *out, size_t cap)
{
    out[0] = '\0';
    char ranks[1024] = "";
    if (launcher > 0 && sb_process_state(launcher) == 'T') {
        snprintf(out, cap, "the MPI launcher (pid %ld) is stopped", (long)launcher);
        return;
    }
    int n = list_ranks(w, w->started, 1, 1, ranks, sizeof ranks);
    if (n) {
        snprintf(out, cap, "%s %s stopped", ranks, n == 1 ? "is" : "are");
        return;
    }
    if (w->n_finished == w->np) {
        snprintf(out, cap, "every rank finished, then one exited with a non-zero status (a "
                 "sanitizer's report or an exit handler: see above)");
        return;
    }
    if (finalize) {
        n = list_ranks(w, w->finished, 0, 0, ranks, sizeof ranks);
        snprintf(out, cap, "%s did not finish (MPI_Finalize)", ranks);
        return;
    }
    if (w->n_started < w->np) {
        n = list_ranks(w, w->started, 0, 0, ranks, sizeof ranks);
        snprintf(out, cap, "%s never started (%d of %d did)", ranks, w->n_started, w->np);
        return;
    }
    if (w->n_joined < w->np) {
        n = list_ranks(w, w->joined, 0, 0, ranks, sizeof ranks);
        snprintf(out, cap, "%s did not join the job (MPI_Init, loading the data)", ranks);
        return;
    }
    n = list_ranks(w, w->finished, 0, 0, ranks, sizeof ranks);
    snprintf(out, cap, "%s %s still running", ranks, n == 1 ? "was" : "were");
}

void sb_rank_progress_on_host(const struct sb_rank_progress *p, const char *host, char *out,
                              size_t cap)
{
    out[0] = '\0';
    int n = 0;
    for (int r = 0; r < p->np; r++) {
        if (!p->started[r] || strcmp(p->host[r], host) != 0) continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%srank %d", n++ ? ", " : "", r);
    }
    if (n) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, " ended with it");
    }
}

void sb_output_snapshot(const char *const *paths, int n, struct sb_output_snapshot *snap)
{
    for (int i = 0; i < n; i++) {
        struct stat st;
        snap[i] = (struct sb_output_snapshot){0};
        if (paths[i][0] && lstat(paths[i], &st) == 0)
            snap[i] = (struct sb_output_snapshot){1, st.st_dev, st.st_ino, st.st_mtim};
    }
}

/* Whether the file `st` (paths[i]) is not the one of the snapshot. */
static int replaced(const struct sb_output_snapshot *b, const struct stat *st)
{
    return !b->existed || st->st_ino != b->ino || st->st_dev != b->dev ||
           st->st_mtim.tv_sec != b->mtime.tv_sec || st->st_mtim.tv_nsec != b->mtime.tv_nsec;
}

void sb_output_remove_written(const char *const *paths, int n,
                              const struct sb_output_snapshot *snap)
{
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (paths[i][0] && lstat(paths[i], &st) == 0 && replaced(&snap[i], &st))
            unlink(paths[i]);
    }
}

int sb_output_written(const char *const *paths, int n, const struct sb_output_snapshot *snap,
                      const char *report)
{
    if (!report[0]) return 1;
    for (int i = 0; i < n; i++) {
        if (strcmp(paths[i], report) != 0) continue;
        struct stat st;
        return lstat(report, &st) == 0 && S_ISREG(st.st_mode) && replaced(&snap[i], &st);
    }
    return 1;
}
