/* MPI job lifetime and self-launch; see job.h. */
#include "job/job.h"
#include "job/job_mpi.h"
#include "job/control.h"
#include "job/launch_watch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "job/launcher.h"

static MPI_Comm world_comm = MPI_COMM_NULL; /* what sb_job_world points to */

MPI_Comm sb_job_comm(const struct sb_job *job)
{
    return job && job->mpi ? MPI_COMM_WORLD : MPI_COMM_NULL;
}

const void *sb_job_world(const struct sb_job *job)
{
    return job && job->mpi ? &world_comm : NULL;
}

int sb_job_under_launcher(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE") ||
           getenv("PMI_RANK");
}

static sb_status single_host(struct sb_job *job)
{
    char name[256] = "unknown";
    gethostname(name, sizeof name - 1);
    job->hosts = malloc(sizeof *job->hosts);
    if (!job->hosts || !(job->hosts[0] = strdup(name)))
        return sb_error(SB_ERR_NOMEM, "job: out of memory");
    job->n_hosts = 1;
    return SB_OK;
}

/* Gathers MPI_Get_processor_name from every rank and keeps distinct ones. */
static sb_status gather_hosts(struct sb_job *job)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *all = calloc((size_t)job->size, MPI_MAX_PROCESSOR_NAME);
    job->hosts = calloc((size_t)job->size, sizeof *job->hosts);
    if (!all || !job->hosts) {
        free(all);
        return sb_error(SB_ERR_NOMEM, "job: out of memory");
    }
    sb_status st = SB_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all,
                                              MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    if (st) {
        free(all);
        return st;
    }
    for (int r = 0; r < job->size; r++) {
        const char *h = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
        int seen = 0;
        for (int i = 0; i < job->n_hosts && !seen; i++) seen = strcmp(job->hosts[i], h) == 0;
        if (!seen && !(job->hosts[job->n_hosts++] = strdup(h))) {
            free(all);
            return sb_error(SB_ERR_NOMEM, "job: out of memory");
        }
    }
    free(all);
    return SB_OK;
}

/* Counts the job's processes that run on this machine's kernel: the ranks
 * whose /proc/sys/kernel/random/boot_id (a UUID the kernel draws at boot,
 * proc(5)) equals this one's. Hosts that are namespaces or containers of
 * one machine (the cluster fixture, tests/cluster) share its kernel and
 * its cores, though MPI takes each for a node of its own. Unreadable:
 * local_size. Collective. */
static sb_status gather_machine(struct sb_job *job)
{
    enum { ID = 40 };
    char mine[ID] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(mine, ID, f)) mine[0] = '\0';
        fclose(f); /* read-only */
    }
    char *all = calloc((size_t)job->size, ID);
    if (!all) return sb_error(SB_ERR_NOMEM, "job: out of memory");
    sb_status st = SB_MPI_CHECK(MPI_Allgather(mine, ID, MPI_CHAR, all, ID, MPI_CHAR,
                                              MPI_COMM_WORLD));
    int same = 0;
    for (int r = 0; !st && mine[0] && r < job->size; r++)
        same += memcmp(all + (size_t)r * ID, mine, ID) == 0;
    free(all);
    job->machine_size = same > job->local_size ? same : job->local_size;
    return st;
}

sb_status sb_job_init(struct sb_job *job, int *argc, char ***argv, int use_mpi)
{
    memset(job, 0, sizeof *job);
    job->size = job->local_size = job->machine_size = 1;
    if (!use_mpi) return single_host(job);

    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return sb_error(SB_ERR_COMM, "MPI_Init_thread failed");
    job->mpi = 1;
    world_comm = MPI_COMM_WORLD;
    /* Errors come back as codes, so they can be reported and the job ended
     * by main rather than by MPI's default handler. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &job->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job->size);
    MPI_Comm node;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, job->rank,
                                            MPI_INFO_NULL, &node)));
    MPI_Comm_rank(node, &job->local_rank);
    MPI_Comm_size(node, &job->local_size);
    MPI_Comm_free(&node);
    SB_TRY(gather_machine(job));
    return gather_hosts(job);
}

/* The status every rank returns for an agreed exit code it did not fail
 * with itself. */
static sb_status status_of_code(int code)
{
    return code == 2 ? SB_ERR_USAGE : code == 130 ? SB_ERR_INTERRUPTED : SB_ERR_COMM;
}

sb_status sb_job_agree_on(MPI_Comm comm, sb_status local, const char *what, int *first_failed)
{
    int rank = 0;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
    int code = sb_status_exit_code(local), failed = local ? rank : -1;
    if (first_failed) *first_failed = failed;
    char message[512];
    snprintf(message, sizeof message, "%s", local ? sb_error_message() : "");
    int in[2] = {code, local ? -rank : INT_MIN}, out[2];
    /* MAX of the code and of -rank (so the lowest failed rank wins). */
    SB_TRY(SB_MPI_CHECK(MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, comm)));
    code = out[0];
    failed = code ? -out[1] : -1;
    if (local) sb_error_set_message(message);
    if (first_failed) *first_failed = failed;
    if (!code) return SB_OK;
    if (local && sb_status_exit_code(local) == code) return local;
    if (local) return status_of_code(code); /* this rank's message kept */
    return sb_error(status_of_code(code), "rank %d failed %s (see its message)", failed, what);
}

sb_status sb_job_agree(const struct sb_job *job, sb_status local, const char *what,
                       int *first_failed)
{
    if (job->mpi) return sb_job_agree_on(MPI_COMM_WORLD, local, what, first_failed);
    if (first_failed) *first_failed = local ? 0 : -1;
    return local;
}

void sb_job_abort(struct sb_job *job, int code)
{
    if (job->mpi && job->size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
}

void sb_job_finish(struct sb_job *job)
{
    if (job->mpi) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
    }
    for (int i = 0; i < job->n_hosts; i++) free(job->hosts[i]);
    free(job->hosts);
    job->hosts = NULL;
    job->n_hosts = 0;
}

sb_status sb_job_relaunch_under_mpirun(int np, int argc, char **argv,
                                       const struct sb_watch_plan *plan, int *exit_code)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return sb_error(SB_ERR_INTERNAL, "/proc/self/exe: %s", strerror(errno));
    self[n] = '\0';

    if (geteuid() == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    /* Containers often forbid the ptrace-based CMA single copy. */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);

    /* Open MPI hangs in its own abort when it runs out of descriptors
     * (ulimit -n 32: about 30 + 4 per rank for mpirun, measured with
     * Open MPI 4.1): refuse such a limit before starting it. */
    struct rlimit fds;
    rlim_t need = 64 + 8 * (rlim_t)np;
    if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY &&
        fds.rlim_cur < need)
        return sb_error(SB_ERR_USAGE, "the open-file limit (ulimit -n) is %llu; a job of %d "
                        "ranks needs at least %llu for mpirun and its ranks (raise it: ulimit -n "
                        "1024)", (unsigned long long)fds.rlim_cur, np, (unsigned long long)need);

    /* $STRATBENCH_LAUNCHER=srun starts a Slurm job step instead (launch.c). */
    const char *which = getenv("STRATBENCH_LAUNCHER");
    if (which && strcmp(which, "srun") == 0) return sb_job_relaunch_under_srun(np, argc, argv, self);
    if (which && *which && strcmp(which, "mpirun") != 0)
        return sb_error(SB_ERR_USAGE, "STRATBENCH_LAUNCHER: expected mpirun or srun, got '%s'",
                        which);
    setenv(SB_LAUNCHED_ENV, "mpirun", 1);

    /* Launcher words: $STRATBENCH_MPIRUN split on spaces, else mpirun (also
     * when it holds only spaces, as when it is empty). */
    const char *launcher = getenv("STRATBENCH_MPIRUN");
    if (launcher) launcher += strspn(launcher, " ");
    char *words = strdup(launcher && *launcher ? launcher : "mpirun");
    char **args = calloc((size_t)argc + 64, sizeof *args);
    if (!words || !args) {
        free(words);
        free(args);
        return sb_error(SB_ERR_NOMEM, "launch: out of memory");
    }
    int k = 0;
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w && k < 48;
         w = strtok_r(NULL, " ", &save))
        args[k++] = w;
    char np_text[16];
    snprintf(np_text, sizeof np_text, "%d", np);
    args[k++] = "-np";
    args[k++] = np_text;
    args[k++] = "--oversubscribe";
    args[k++] = "-x";
    args[k++] = SB_LAUNCHED_ENV;
    args[k++] = "-x"; /* the ranks' control lines to the watcher (job/control.h) */
    args[k++] = SB_CONTROL_ENV;
    if (np == 1) {
        /* Open MPI binds a lone rank to one core, leaving the others idle
         * (single and mirrored, which mpirun does not start, use them all).
         * Several ranks keep its default, one core each, which is faster. */
        args[k++] = "--bind-to";
        args[k++] = "none";
    }
    args[k++] = self;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;

    struct sb_watch_plan p = *plan;
    p.np = np;
    sb_status st = sb_launch_watch(args, &p, exit_code);
    free(words);
    free(args);
    return st;
}
