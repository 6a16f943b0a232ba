/* mpirun as a watched child; see launch_watch.h. */
#include "harness/launch_watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/interrupt.h"

/* Seconds after forwarding SIGTERM before mpirun and its ranks get SIGKILL. */
#define KILL_AFTER_S 3.0
/* Seconds mpirun gets to end the job after a rank's error line. */
#define ABORT_WAIT_S 1.5

/* Open MPI frames its messages with a line of 74 dashes. */
static int is_frame(const char *line)
{
    size_t n = strspn(line, "-");
    return n >= 40 && (line[n] == '\0' || line[n] == '\n');
}

struct watch {
    /* A killed rank, from mpirun's "noticed that process rank" line. */
    int dead_rank, dead_signal;
    char dead_host[128];
    /* The ranks' stratbench lines, kept to print at the end in order. */
    char *lines;
    size_t len, cap;
    char flight[512];  /* "flight recorder: PATH" seen in a rank's line */
    double fatal_at;   /* when a rank printed that it ends the job (0: not yet) */
    /* The banner being read (between frames), and whether in one. */
    char *block;
    size_t block_len, block_cap;
    int in_block;
};

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
static void end_block(struct watch *w)
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
    int replaced = p || strstr(b, "MPI_ABORT was invoked") ||
                   strstr(b, "Primary job  terminated normally") ||
                   strstr(b, "Primary job terminated normally") ||
                   strstr(b, "detected that one or more processes exited with non-zero") ||
                   strstr(b, "has exited due to process rank");
    if (!replaced && w->block_len) fputs(b, stderr);
    w->block_len = 0;
    if (w->block) w->block[0] = '\0';
}

static void take_line(struct watch *w, const char *line)
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

/* Sends sig to every descendant of `root` on this machine (mpirun's ranks,
 * which Open MPI puts in process groups of their own, and the daemons and
 * ranks its launch agent started), deepest first is not needed: SIGKILL. */
static void signal_descendants(pid_t root, int sig)
{
    enum { MAX = 4096 };
    static int pid_of[MAX], ppid_of[MAX];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX) {
        char *end = NULL;
        long pid = strtol(e->d_name, &end, 10);
        if (!end || *end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        const char *rp = strrchr(buf, ')'); /* comm may hold spaces */
        int ppid = 0;
        char state;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2) {
            pid_of[n] = (int)pid;
            ppid_of[n] = ppid;
            n++;
        }
    }
    closedir(d);
    /* Breadth-first from root over the parent links. */
    static int queue[MAX];
    int head = 0, tail = 0;
    queue[tail++] = root;
    while (head < tail) {
        int p = queue[head++];
        for (int i = 0; i < n && tail < MAX; i++)
            if (ppid_of[i] == p) {
                queue[tail++] = pid_of[i];
                kill((pid_t)pid_of[i], sig);
            }
    }
}

sb_status sb_launch_watch(char **args, int *exit_code)
{
    *exit_code = 1;
    int err_pipe[2], exec_pipe[2];
    if (pipe(err_pipe) != 0 || pipe2(exec_pipe, O_CLOEXEC) != 0)
        return sb_error(SB_ERR_INTERNAL, "launch: pipe: %s", strerror(errno));
    sb_interrupt_install();
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child < 0) return sb_error(SB_ERR_INTERNAL, "launch: fork: %s", strerror(errno));
    if (child == 0) {
        /* Its own process group: a terminal's Ctrl-C reaches stratbench,
         * which forwards it once; stdin from /dev/null, so that a background
         * group never stops on reading the terminal. */
        setpgid(0, 0);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, STDIN_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        close(err_pipe[0]);
        close(err_pipe[1]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(args[0], args);
        int e = errno;
        if (write(exec_pipe[1], &e, sizeof e) < 0) _exit(127);
        _exit(127);
    }
    close(err_pipe[1]);
    close(exec_pipe[1]);
    int exec_errno = 0;
    ssize_t got = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
    close(exec_pipe[0]);
    if (got == (ssize_t)sizeof exec_errno) {
        waitpid(child, NULL, 0);
        close(err_pipe[0]);
        return sb_error(SB_ERR_USAGE, "%s: cannot start the MPI launcher: %s (hint: apt-get "
                        "install openmpi-bin, or set STRATBENCH_MPIRUN)",
                        args[0], strerror(exec_errno));
    }

    struct watch w = {.dead_rank = -1};
    FILE *in = fdopen(err_pipe[0], "r");
    char line[4096];
    size_t fill = 0;
    int forwarded = 0, killed = 0, status = 0, reaped = 0;
    double forwarded_at = 0.0;
    int fd = err_pipe[0];
    (void)in;
    for (;;) {
        int sig = sb_interrupted();
        if (sig && !forwarded) {
            kill(child, SIGTERM);
            forwarded = 1;
            forwarded_at = sb_now_s();
        }
        /* A rank said it ends the job (MPI_Abort): if mpirun has not ended
         * it soon after (a host cut off from the network keeps mpirun
         * waiting for its daemon), end it from here. */
        if (w.fatal_at && !forwarded && sb_now_s() - w.fatal_at > ABORT_WAIT_S) {
            kill(child, SIGTERM);
            forwarded = 1;
            forwarded_at = sb_now_s();
        }
        if (forwarded && !killed && sb_now_s() - forwarded_at > KILL_AFTER_S) {
            signal_descendants(child, SIGKILL);
            kill(child, SIGKILL);
            killed = 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 100);
        if (r < 0 && errno != EINTR) break;
        if (r > 0) {
            ssize_t n = read(fd, line + fill, sizeof line - 1 - fill);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break; /* EOF: mpirun and every rank closed stderr */
            fill += (size_t)n;
            line[fill] = '\0';
            char *start = line, *nl;
            while ((nl = strchr(start, '\n'))) {
                char c = nl[1];
                nl[1] = '\0';
                take_line(&w, start);
                nl[1] = c;
                start = nl + 1;
            }
            fill = strlen(start);
            memmove(line, start, fill + 1);
            if (fill == sizeof line - 1) { /* a line longer than the buffer */
                take_line(&w, line);
                fill = 0;
            }
        }
        if (!reaped && waitpid(child, &status, WNOHANG) == child) reaped = 1;
        if (reaped && r == 0) {
            /* mpirun is gone; a rank it left (killed mpirun) may hold the pipe. */
            if (killed || forwarded) break;
        }
    }
    if (fill) take_line(&w, line);
    if (w.in_block) end_block(&w);
    close(fd);
    if (!reaped) waitpid(child, &status, 0);

    int sig = sb_interrupted();
    if (sig) {
        fprintf(stderr, "stratbench: interrupted (%s)%s%s\n", sb_signal_name(sig),
                w.flight[0] ? "; " : "", w.flight);
        *exit_code = 130;
    } else if (w.dead_rank >= 0) {
        /* The ranks' own lines (mpirun ended them) would only say that. */
        fprintf(stderr, "stratbench: rank %d (host %s) was killed by signal %d (%s); the job "
                "was ended\n", w.dead_rank, w.dead_host, w.dead_signal,
                sb_signal_name(w.dead_signal));
        *exit_code = 1;
    } else {
        if (w.len) fputs(w.lines, stderr);
        if (WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
        else *exit_code = 1;
    }
    free(w.lines);
    free(w.block);
    return SB_OK;
}
