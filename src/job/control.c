/* Control lines to the watching parent, the launcher tie; see control.h. */
#include "job/control.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int sb_control_on(void)
{
    const char *v = getenv(SB_CONTROL_ENV);
    return v && strcmp(v, "1") == 0;
}

void sb_control_started(int rank)
{
    if (!sb_control_on()) return;
    /* The parent dying must end this process: mpirun does not end its
     * ranks when it is killed itself (SIGKILL, the OOM killer). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(1); /* it died before the line above */
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    fflush(stderr);
    fprintf(stderr, SB_CONTROL_PREFIX "started %d %s %ld\n", rank, host, (long)getpid());
    fflush(stderr);
}

static void line(const char *what, int rank)
{
    if (!sb_control_on()) return;
    fflush(stderr);
    fprintf(stderr, SB_CONTROL_PREFIX "%s %d\n", what, rank);
    fflush(stderr);
}

void sb_control_joined(int rank) { line("joined", rank); }

void sb_control_done(int rank) { line("done", rank); }

void sb_control_finished(int rank) { line("finished", rank); }
