/* Ending every process of a self-launched job; see launch_reap.h. */
#include "job/launch_reap.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"

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

void sb_launch_end_job(pid_t child)
{
    signal_descendants(child, SIGKILL);
    kill(child, SIGKILL);
}

/* Kills afresh every 10 rounds (20 ms): a process killed a moment ago may
 * leave orphans of its own, reparented here. */
void sb_launch_end_leftovers(double wait_s)
{
    double until = sb_now_s() + wait_s;
    for (int round = 0;; round++) {
        if (round % 10 == 0) signal_descendants(getpid(), SIGKILL); /* new orphans too */
        pid_t p = waitpid(-1, NULL, WNOHANG);
        if (p > 0) continue;
        if (p < 0 && errno != EINTR) return; /* ECHILD: none left */
        if (sb_now_s() > until) return;
        usleep(2000);
    }
}

