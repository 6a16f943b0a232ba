/* Self-launch as a Slurm job step: `srun -n N --mpi=pmix ...`; see job.h. */
#include "job/job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/launcher.h"

sb_status sb_job_relaunch_under_srun(int np, int argc, char **argv, const char *self)
{
    struct sb_launcher l;
    sb_launcher_detect(&l);
    char **args = calloc((size_t)argc + 16, sizeof *args);
    if (!args) return sb_error(SB_ERR_NOMEM, "launch: out of memory");
    char np_text[16];
    snprintf(np_text, sizeof np_text, "%d", np);
    int k = 0;
    args[k++] = "srun";
    args[k++] = "-n";
    args[k++] = np_text;
    args[k++] = "--mpi=pmix";      /* the only PMI Debian's Open MPI speaks */
    args[k++] = "--kill-on-bad-exit=1"; /* one failed rank ends the step */
    /* More ranks than the allocation's tasks, or than this node's CPUs
     * outside an allocation: let Slurm overcommit (the ranks then yield,
     * see sb_launcher_yield_if_oversubscribed). */
    if ((l.slurm_tasks > 0 && np > l.slurm_tasks) ||
        (l.slurm_tasks == 0 && np > sb_launcher_usable_cpus()))
        args[k++] = "--overcommit";
    args[k++] = (char *)self;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;

    setenv(SB_LAUNCHED_ENV, "srun", 1);
    fflush(stdout);
    fflush(stderr);
    execvp(args[0], args);
    sb_status st = sb_error(SB_ERR_USAGE,
                            "srun: cannot start it: %s (STRATBENCH_LAUNCHER=srun needs Slurm's "
                            "client: apt-get install slurm-client, or unset it for mpirun)",
                            strerror(errno));
    free(args);
    return st;
}
