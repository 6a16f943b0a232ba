/* What mpirun's stderr says, line by line; see launch_stderr.h. */
#include "job/launch_stderr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "job/control.h"

/* Open MPI frames its messages with a line of 74 dashes. */
static int is_frame(const char *line)
{
    size_t n = strspn(line, "-");
    return n >= 40 && (line[n] == '\0' || line[n] == '\n');
}

/* Open MPI's own messages: "[host:pid] ..." (ORTE_ERROR_LOG, PMIx errors,
 * its signal handler's backtrace) and PMIx's "PMIX ERROR" lines. */
static int is_mpi_noise(const char *line)
{
    if (strstr(line, "ORTE_ERROR_LOG") || strstr(line, "PMIX ERROR") ||
        strstr(line, "PMIx_Finalize") || strstr(line, "*** Process received signal") ||
        strstr(line, "*** End of error message"))
        return 1;
    if (line[0] != '[') return 0;
    const char *close = strchr(line, ']');
    const char *colon = strchr(line, ':');
    if (!close || !colon || colon > close) return 0;
    for (const char *c = colon + 1; c < close; c++)
        if (*c < '0' || *c > '9') return 0;
    return close > colon + 1;
}

/* Appends s to the growing string *buf (*len chars, *cap bytes). */
static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        size_t c = (*cap ? 2 * *cap : 4096);
        while (c < *len + n + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return; /* out of memory: the line is lost, not the run */
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* A banner ended: keep what it says, print it unless it is one we replace. */
static void end_block(struct sb_launch_stderr *w)
{
    const char *b = w->block ? w->block : "";
    const char *p = strstr(b, "noticed that process rank");
    if (p) {
        int rank = -1, sig = 0;
        char host[128] = "";
        const char *node = strstr(p, " on node ");
        const char *on_signal = strstr(p, "exited on signal ");
        if (sscanf(p, "noticed that process rank %d", &rank) == 1 && node && on_signal &&
            sscanf(node, " on node %127s", host) == 1 &&
            sscanf(on_signal, "exited on signal %d", &sig) == 1) {
            w->dead_rank = rank;
            w->dead_signal = sig;
            snprintf(w->dead_host, sizeof w->dead_host, "%s", host);
        }
    }
    /* The banners whose news stratbench's own line gives; any other one
     * (a warning, a launch failure) is printed as Open MPI wrote it. */
    /* A remote daemon (orted) killed or cut off: its ranks die with it
     * (PR_SET_PDEATHSIG), and mpirun ends the job with status 205. */
    const char *lost = strstr(b, "lost communication with a remote daemon");
    const char *remote = lost ? strstr(lost, "Remote daemon:") : NULL;
    const char *node = remote ? strstr(remote, " on node ") : NULL;
    if (node && !w->lost_host[0]) sscanf(node, " on node %127s", w->lost_host);
    int replaced = p || lost || strstr(b, "MPI communication peer process has unexpectedly") ||
                   strstr(b, "MPI_ABORT was invoked") ||
                   strstr(b, "Primary job  terminated normally") ||
                   strstr(b, "Primary job terminated normally") ||
                   strstr(b, "detected that one or more processes exited with non-zero") ||
                   strstr(b, "has exited due to process rank");
    if (!replaced && w->block_len) fputs(b, stderr);
    w->block_len = 0;
    if (w->block) w->block[0] = '\0';
}

void sb_launch_stderr_take(struct sb_launch_stderr *w, const char *line)
{
    if (is_frame(line)) {
        if (w->in_block) {
            append(&w->block, &w->block_len, &w->block_cap, line);
            end_block(w);
            w->in_block = 0;
        } else {
            w->in_block = 1;
            w->block_len = 0;
            append(&w->block, &w->block_len, &w->block_cap, line);
        }
        return;
    }
    if (w->in_block) {
        append(&w->block, &w->block_len, &w->block_cap, line);
        return;
    }
    if (strncmp(line, SB_CONTROL_PREFIX, strlen(SB_CONTROL_PREFIX)) == 0) {
        sb_rank_progress_line(&w->rp, line + strlen(SB_CONTROL_PREFIX));
        return;
    }
    if (strcmp(line, "Killed\n") == 0) { /* the rsh agent's shell on a killed orted */
        w->noise++;
        return;
    }
    if (is_mpi_noise(line)) {
        /* "[host:pid] [[job,0],0] ORTE_ERROR_LOG: WHAT in file F at line L":
         * mpirun is failing, and may hang in its own abort (ulimit -n 32):
         * give it the time a rank's abort gets, then end it. */
        const char *e = strstr(line, "ORTE_ERROR_LOG: ");
        if (e && !w->mpi_error[0]) {
            e += strlen("ORTE_ERROR_LOG: ");
            const char *in = strstr(e, " in file ");
            int len = in ? (int)(in - e) : (int)strcspn(e, "\n");
            snprintf(w->mpi_error, sizeof w->mpi_error, "%.*s", len, e);
            if (!w->fatal_at) w->fatal_at = sb_now_s();
        }
        w->noise++;
        return;
    }
    if (strncmp(line, "stratbench: warning:", 20) == 0) {
        fputs(line, stderr);
        return;
    }
    if (strncmp(line, "stratbench:", 11) == 0) {
        if (!w->fatal_at) w->fatal_at = sb_now_s();
        const char *f = strstr(line, "flight recorder: ");
        if (f) {
            snprintf(w->flight, sizeof w->flight, "%s", f);
            size_t n = strlen(w->flight);
            if (n && w->flight[n - 1] == '\n') w->flight[n - 1] = '\0';
        }
        append(&w->lines, &w->len, &w->cap, line);
        return;
    }
    fputs(line, stderr);
}

int sb_launch_stderr_read(struct sb_launch_stderr *w, int fd)
{
    ssize_t n = read(fd, w->line + w->fill, sizeof w->line - 1 - w->fill);
    if (n < 0 && errno == EINTR) return 1;
    if (n <= 0) return 0;
    w->fill += (size_t)n;
    w->line[w->fill] = '\0';
    char *start = w->line, *nl;
    while ((nl = strchr(start, '\n'))) {
        char c = nl[1];
        nl[1] = '\0';
        sb_launch_stderr_take(w, start);
        nl[1] = c;
        start = nl + 1;
    }
    w->fill = strlen(start);
    memmove(w->line, start, w->fill + 1);
    if (w->fill == sizeof w->line - 1) { /* a line longer than the buffer */
        sb_launch_stderr_take(w, w->line);
        w->fill = 0;
    }
    return 1;
}

void sb_launch_stderr_end(struct sb_launch_stderr *w)
{
    if (w->fill) sb_launch_stderr_take(w, w->line);
    if (w->in_block) end_block(w);
}

sb_status sb_launch_stderr_init(struct sb_launch_stderr *w, int np)
{
    memset(w, 0, sizeof *w);
    w->dead_rank = -1;
    return sb_rank_progress_init(&w->rp, np);
}

void sb_launch_stderr_free(struct sb_launch_stderr *w)
{
    free(w->lines);
    free(w->block);
    sb_rank_progress_free(&w->rp);
}
