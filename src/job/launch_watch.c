/* mpirun as a watched child; see launch_watch.h. This file: starting
 * mpirun, the watch loop (signals, deadlines, stdout) and the verdict;
 * launch_stderr.c reads mpirun's stderr. */
#include "job/launch_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/interrupt.h"
#include "core/test_fault.h"
#include "job/control.h"
#include "job/launch_progress.h"
#include "job/launch_reap.h"
#include "job/launch_stderr.h"

/* Seconds after forwarding SIGTERM before mpirun and its ranks get SIGKILL. */
#define KILL_AFTER_S 3.0
/* Seconds mpirun gets to end the job after a rank's error line. */
#define ABORT_WAIT_S 1.5
/* Seconds to wait for what mpirun left to die after SIGKILL (sb_launch_end_leftovers). */
#define LEFTOVER_WAIT_S 2.0

struct watch {
    struct sb_launch_stderr err; /* what mpirun's stderr said (launch_stderr.h) */
    /* mpirun as sb_launch_watch runs it (watch_job's state). */
    pid_t child;
    int np;
    int err_fd, out_fd;  /* mpirun's stderr (read line by line) and stdout (passed on) */
    int out_errno;       /* the first error writing our stdout (pass_stdout) */
    double launched_at, startup_s, finalize_s, forwarded_at;
    int forwarded, killed, reaped, status;
    double launcher_stopped_at; /* when mpirun was first seen stopped (0: running) */
    char missed[1536];   /* set when a start-up or finalize deadline passed */
};

/* Seconds start-up (launch to every rank joined) and finalize (first rank
 * done to mpirun ended) may take, from --timeout; 0: no deadline. */
static double startup_deadline_s(double timeout_s) { return timeout_s > 0 ? 2 * timeout_s + 10 : 0; }
static double finalize_deadline_s(double timeout_s) { return timeout_s > 0 ? timeout_s + 5 : 0; }

/* Copies what mpirun wrote on stdout to this process's stdout; after a
 * write error (EPIPE: the reader is gone; ENOSPC: /dev/full) keeps reading
 * and drops it, recording the first error in *err. Returns 0 at EOF. */
static int pass_stdout(int fd, int *err)
{
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return 0;
    for (ssize_t done = 0; done < n && !*err;) {
        ssize_t m = write(STDOUT_FILENO, buf + done, (size_t)(n - done));
        if (m < 0 && errno == EINTR) continue;
        if (m < 0) *err = errno;
        else done += m;
    }
    return 1;
}

/* The exec's outcome from the close-on-exec pipe fd: 1 with *exec_errno
 * when the child wrote exec's errno, 0 at EOF (the launcher runs, or the
 * child died before exec: the watch reaps and names it). A child stopped
 * between fork and exec (SIGSTOP to the new process) would leave a plain
 * read waiting forever with no deadline kept: seen stopped, this returns 0
 * and the watch's start-up deadline names the stopped launcher. */
static int exec_outcome(int fd, pid_t child, int *exec_errno)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 100);
        if (r < 0 && errno != EINTR) return 0;
        if (r > 0) {
            ssize_t got = read(fd, exec_errno, sizeof *exec_errno);
            if (got < 0 && errno == EINTR) continue;
            return got == (ssize_t)sizeof *exec_errno;
        }
        if (r == 0 && sb_process_state(child) == 'T') return 0;
    }
}

/* Forks and execs mpirun (args) with its stderr and stdout on the given
 * pipes; sets w->child. SB_ERR_USAGE naming the launcher when it cannot be
 * started (exec's errno comes back over a close-on-exec pipe). */
static sb_status start_child(char **args, int err_pipe[2], int out_pipe[2], struct watch *w)
{
    int exec_pipe[2];
    if (pipe2(exec_pipe, O_CLOEXEC) != 0)
        return sb_error(SB_ERR_INTERNAL, "launch: pipe: %s", strerror(errno));
    setenv(SB_CONTROL_ENV, "1", 1);
    /* Orphans of the job become this process's children (sb_launch_end_leftovers). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) return sb_error(SB_ERR_INTERNAL, "launch: fork: %s", strerror(errno));
    if (child == 0) {
        /* Its own process group: a terminal's Ctrl-C reaches stratbench,
         * which forwards it once; stdin from /dev/null, so that a background
         * group never stops on reading the terminal. mpirun dies with
         * stratbench (SIGKILL, the OOM killer), and its ranks with it. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, STDIN_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        dup2(out_pipe[1], STDOUT_FILENO);
        close(err_pipe[0]);
        close(err_pipe[1]);
        close(out_pipe[0]);
        close(out_pipe[1]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sb_test_fault_stop("stop-launcher-exec", 0);
        execvp(args[0], args);
        int e = errno;
        if (write(exec_pipe[1], &e, sizeof e) < 0) _exit(127);
        _exit(127);
    }
    unsetenv(SB_CONTROL_ENV);
    close(err_pipe[1]);
    close(out_pipe[1]);
    close(exec_pipe[1]);
    int exec_errno = 0;
    int failed = exec_outcome(exec_pipe[0], child, &exec_errno);
    close(exec_pipe[0]);
    if (failed) {
        waitpid(child, NULL, 0);
        close(err_pipe[0]);
        close(out_pipe[0]);
        return sb_error(SB_ERR_USAGE, "%s: cannot start the MPI launcher: %s (hint: apt-get "
                        "install openmpi-bin, or set STRATBENCH_MPIRUN)",
                        args[0], strerror(exec_errno));
    }
    w->child = child;
    w->err_fd = err_pipe[0];
    w->out_fd = out_pipe[0];
    return SB_OK;
}

/* A signal to forward once (SIGTERM), a rank's abort that mpirun does not
 * carry out, and SIGKILL for everything KILL_AFTER_S after forwarding. */
static void forward_or_kill(struct watch *w)
{
    int sig = sb_interrupted();
    /* A rank said it ends the job (MPI_Abort): if mpirun has not ended it
     * soon after (a host cut off from the network keeps mpirun waiting for
     * its daemon), end it from here. */
    int abort_stuck = w->err.fatal_at && sb_now_s() - w->err.fatal_at > ABORT_WAIT_S;
    /* ... unless a rank said it finalizes (an agreed refusal): mpirun ends
     * that job, bounded by the finalize deadline (check_deadlines). */
    if (w->err.rp.done_at) abort_stuck = 0;
    if ((sig || abort_stuck) && !w->forwarded) {
        kill(w->child, SIGTERM);
        w->forwarded = 1;
        w->forwarded_at = sb_now_s();
    }
    if (w->forwarded && !w->killed && sb_now_s() - w->forwarded_at > KILL_AFTER_S) {
        sb_launch_end_job(w->child);
        w->killed = 1;
    }
}

/* After start-up (every rank joined), mpirun stopped for longer than
 * --timeout: it no longer passes the ranks' lines on nor finalizes them,
 * and its ranks may spin in MPI_Finalize forever (issue 39, item 1). Sets
 * w->missed; 1 when the job is to be ended. At start-up the start-up
 * deadline names the stopped launcher (sb_rank_progress_describe). */
static int launcher_stopped(struct watch *w, double now, double timeout_s)
{
    if (timeout_s <= 0 || w->reaped || w->err.rp.n_joined < w->np) return 0;
    if (sb_process_state(w->child) != 'T') {
        w->launcher_stopped_at = 0;
        return 0;
    }
    if (!w->launcher_stopped_at) w->launcher_stopped_at = now;
    if (now - w->launcher_stopped_at <= timeout_s) return 0;
    snprintf(w->missed, sizeof w->missed, "the MPI launcher (pid %ld) was stopped for over "
             "%g s (--timeout) after start-up: it no longer carries the ranks' lines nor ends "
             "them; the job was ended", (long)w->child, timeout_s);
    return 1;
}

/* Start-up and finalize deadlines: name what did not arrive (w->missed),
 * end every process of the job at once (a stopped one cannot answer a
 * SIGTERM). */
static void check_deadlines(struct watch *w, double timeout_s)
{
    if (w->killed || w->forwarded || (w->err.fatal_at && !w->err.rp.done_at) || w->missed[0])
        return;
    double now = sb_now_s();
    char what[1024];
    pid_t alive = w->reaped ? 0 : w->child;
    if (w->startup_s > 0 && w->err.rp.n_joined < w->np && now - w->launched_at > w->startup_s) {
        sb_rank_progress_describe(&w->err.rp, alive, 0, what, sizeof what);
        snprintf(w->missed, sizeof w->missed, "start-up did not complete within %.0f s "
                 "(2 x --timeout + 10): %s; the job was ended", w->startup_s, what);
    } else if (w->finalize_s > 0 && w->err.rp.done_at && now - w->err.rp.done_at > w->finalize_s) {
        sb_rank_progress_describe(&w->err.rp, alive, 1, what, sizeof what);
        snprintf(w->missed, sizeof w->missed, "finalize did not complete within %.0f s "
                 "(--timeout + 5) after the first rank was done: %s; the job was "
                 "ended", w->finalize_s, what);
    } else {
        launcher_stopped(w, now, timeout_s);
    }
    if (w->missed[0]) {
        sb_launch_end_job(w->child);
        w->killed = 1;
    }
}

/* Watches mpirun until its stderr ends: forwards signals, keeps the
 * deadlines, passes stdout on and takes stderr's lines; then drains
 * stdout and reaps mpirun (w->status). */
static void watch_job(struct watch *w, double timeout_s)
{
    for (;;) {
        forward_or_kill(w);
        check_deadlines(w, timeout_s);
        struct pollfd p[2] = {{.fd = w->err_fd, .events = POLLIN},
                              {.fd = w->out_fd, .events = POLLIN}};
        int r = poll(p, 2, 100);
        if (r < 0 && errno != EINTR) break;
        if (r > 0 && p[1].revents && !pass_stdout(w->out_fd, &w->out_errno)) {
            close(w->out_fd);
            w->out_fd = -1;
        }
        if (r > 0 && p[0].revents && !sb_launch_stderr_read(&w->err, w->err_fd))
            break;
        if (!w->reaped && waitpid(w->child, &w->status, WNOHANG) == w->child) w->reaped = 1;
        if (w->reaped && r == 0) {
            /* mpirun is gone; a rank it left (killed mpirun) may hold the pipe. */
            if (w->killed || w->forwarded) break;
            if (!WIFEXITED(w->status) || WEXITSTATUS(w->status) != 0) {
                sb_launch_end_job(w->child); /* nothing of the job may stay */
                w->killed = 1;
            }
        }
    }
    sb_launch_stderr_end(&w->err);
    close(w->err_fd);
    /* What is left of stdout (EOF once every holder has ended). */
    if (w->out_fd >= 0) {
        struct pollfd q = {.fd = w->out_fd, .events = POLLIN};
        while (poll(&q, 1, 200) > 0 && pass_stdout(w->out_fd, &w->out_errno)) {}
        close(w->out_fd);
    }
    if (!w->reaped) waitpid(w->child, &w->status, 0);
}

/* verdict's second half: how mpirun itself ended, and the outputs. */
static int verdict_of_exit(struct watch *w, const char *launcher,
                           const struct sb_watch_plan *plan,
                           const struct sb_output_snapshot *before)
{
    int status = w->status, done = w->err.rp.done_at > 0;
    char what[1024];
    if (WIFSIGNALED(status)) {
        sb_rank_progress_describe(&w->err.rp, 0, done, what, sizeof what);
        fprintf(stderr, "stratbench: the MPI launcher %s (pid %ld) was killed by signal %d "
                "(%s); %s; the job was ended\n", launcher, (long)w->child, WTERMSIG(status),
                sb_signal_name(WTERMSIG(status)), what);
        return 1;
    }
    if (WEXITSTATUS(status) != 0) {
        sb_rank_progress_describe(&w->err.rp, 0, done, what, sizeof what);
        fprintf(stderr, "stratbench: the MPI launcher %s exited with status %d before the job "
                "ended: %s%s\n", launcher, WEXITSTATUS(status), what,
                w->err.noise ? " (Open MPI's own messages dropped)" : "");
        return 1;
    }
    if (w->err.rp.n_finished < w->np) {
        sb_rank_progress_describe(&w->err.rp, 0, done, what, sizeof what);
        fprintf(stderr, "stratbench: the MPI launcher %s exited with status 0 but %s\n",
                launcher, what);
        return 1;
    }
    if (!sb_output_written(plan->outputs, plan->n_outputs, before, plan->report)) {
        fprintf(stderr, "stratbench: every rank finished but the report %s was not written\n",
                plan->report);
        return 1;
    }
    if (w->err.len) fputs(w->err.lines, stderr);
    return 0;
}

/* Prints the one line that says how a job that did not end cleanly ended
 * (none for a clean end) and returns the exit status: 130 interrupted, 1 a
 * failure, mpirun's own status after a rank's error line, 0 when every rank
 * finished and the report was written. */
static int verdict(struct watch *w, const char *launcher, const struct sb_watch_plan *plan,
                   const struct sb_output_snapshot *before)
{
    int sig = sb_interrupted(), status = w->status, done = w->err.rp.done_at > 0;
    char what[1024];
    if (sig) {
        fprintf(stderr, "stratbench: interrupted (%s)%s%s\n", sb_signal_name(sig),
                w->err.flight[0] ? "; " : "", w->err.flight);
        return 130;
    }
    if (w->err.dead_rank >= 0) {
        /* The ranks' own lines (mpirun ended them) would only say that. */
        fprintf(stderr, "stratbench: rank %d (host %s) was killed by signal %d (%s); the job "
                "was ended\n", w->err.dead_rank, w->err.dead_host, w->err.dead_signal,
                sb_signal_name(w->err.dead_signal));
        return 1;
    }
    if (w->missed[0]) {
        fprintf(stderr, "stratbench: %s\n", w->missed);
        return 1;
    }
    if (w->err.lost_host[0]) {
        char ranks[512] = "";
        sb_rank_progress_on_host(&w->err.rp, w->err.lost_host, ranks, sizeof ranks);
        fprintf(stderr, "stratbench: the MPI launcher %s lost its daemon on host %s (orted "
                "killed, or the network to it failed)%s%s; the job was ended\n", launcher,
                w->err.lost_host, ranks[0] ? ": " : "", ranks);
        return 1;
    }
    if (w->err.mpi_error[0] && !w->err.len) {
        sb_rank_progress_describe(&w->err.rp, 0, done, what, sizeof what);
        fprintf(stderr, "stratbench: the MPI launcher %s failed (Open MPI: %s); %s; the job was "
                "ended\n", launcher, w->err.mpi_error, what);
        return 1;
    }
    if (w->err.len && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        /* A rank said what failed: its line is the one to read. */
        fputs(w->err.lines, stderr);
        return WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1;
    }
    return verdict_of_exit(w, launcher, plan, before);
}

sb_status sb_launch_watch(char **args, const struct sb_watch_plan *plan, int *exit_code)
{
    *exit_code = 1;
    int err_pipe[2], out_pipe[2];
    if (pipe(err_pipe) != 0 || pipe(out_pipe) != 0)
        return sb_error(SB_ERR_INTERNAL, "launch: pipe: %s", strerror(errno));
    struct sb_output_snapshot before[16];
    if (plan->n_outputs > 16) return sb_error(SB_ERR_INTERNAL, "launch: too many outputs");
    sb_output_snapshot(plan->outputs, plan->n_outputs, before);
    sb_interrupt_install();
    struct watch *w = calloc(1, sizeof *w);
    if (!w) return sb_error(SB_ERR_NOMEM, "launch: out of memory");
    sb_status st = start_child(args, err_pipe, out_pipe, w);
    if (st) {
        free(w);
        return st;
    }
    w->np = plan->np > 0 ? plan->np : 1;
    if (sb_launch_stderr_init(&w->err, w->np) != SB_OK) {
        sb_launch_end_job(w->child);
        waitpid(w->child, NULL, 0);
        sb_launch_stderr_free(&w->err);
        free(w);
        return sb_error(SB_ERR_NOMEM, "launch: out of memory");
    }
    w->startup_s = startup_deadline_s(plan->timeout_s);
    w->finalize_s = finalize_deadline_s(plan->timeout_s);
    w->launched_at = sb_now_s();
    watch_job(w, plan->timeout_s);
    *exit_code = verdict(w, args[0], plan, before); /* may read the ranks' states */
    sb_launch_end_leftovers(LEFTOVER_WAIT_S); /* before outputs are removed: none written later */
    if (*exit_code != 0) sb_output_remove_written(plan->outputs, plan->n_outputs, before);
    if (*exit_code == 0 && w->out_errno) {
        /* The run is complete, its report kept; the lines on stdout were
         * lost (docs/faults.md: exit 1 for a failed stdout). */
        fprintf(stderr, "stratbench: standard output: %s (its lines were lost; the run "
                "completed%s%s)\n", strerror(w->out_errno), plan->report[0] ? " and wrote " : "",
                plan->report);
        *exit_code = 1;
    }
    sb_launch_stderr_free(&w->err);
    free(w);
    return SB_OK;
}