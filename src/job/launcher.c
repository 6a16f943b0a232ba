/* Launcher detection from the environment; see launcher.h. */
#include "job/launcher.h"
#include "job/eager_limit.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The integer value of variable `name`, or `fallback` when unset or not a
 * whole number in 0..INT_MAX. */
static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return *end != '\0' || v < 0 || v > INT_MAX ? fallback : (int)v;
}

/* Tasks on node `node` from Slurm's compressed list, e.g. "2(x3),1": nodes
 * 0-2 run 2 tasks each, node 3 runs 1. 0 when the list does not say. */
static int tasks_on_node(const char *list, int node)
{
    if (!list) return 0;
    const char *p = list;
    while (*p) {
        char *end = NULL;
        long count = strtol(p, &end, 10);
        if (end == p || count < 0) return 0;
        long repeat = 1;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            repeat = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || repeat < 1) return 0;
            p = end + 1;
        }
        if (node < repeat) return (int)count;
        node -= (int)repeat;
        if (*p == ',') p++;
        else if (*p) return 0;
    }
    return 0;
}

void sb_launcher_detect(struct sb_launcher *out)
{
    memset(out, 0, sizeof *out);
    out->kind = SB_LAUNCHER_NONE;
    out->tasks = out->local_tasks = 1;
    out->pmix = getenv("PMIX_RANK") != NULL;
    out->pmi_other = !out->pmix && (getenv("PMI_RANK") || getenv("PMI_SIZE"));
    const char *job = getenv("SLURM_JOB_ID");
    if (job) snprintf(out->slurm_job_id, sizeof out->slurm_job_id, "%s", job);
    out->slurm_tasks = env_int("SLURM_NTASKS", 0);
    const char *launched = getenv(SB_LAUNCHED_ENV);

    int ompi_size = env_int("OMPI_COMM_WORLD_SIZE", 0);
    /* A job step has SLURM_STEP_ID; a batch script (the batch step) has
     * SLURM_NTASKS of the allocation but no step variables. */
    int step_tasks = getenv("SLURM_STEP_ID") || getenv("SLURM_STEPID")
                         ? env_int("SLURM_STEP_NUM_TASKS", 0) : 0;
    if (ompi_size > 0) { /* mpirun's ranks (also when its daemons came from srun) */
        out->kind = SB_LAUNCHER_MPIRUN;
        out->tasks = ompi_size;
        out->task_rank = env_int("OMPI_COMM_WORLD_RANK", 0);
        out->local_tasks = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
        out->by_stratbench = launched && strcmp(launched, "mpirun") == 0;
    } else if (step_tasks > 0) {
        out->kind = SB_LAUNCHER_SRUN;
        out->tasks = step_tasks;
        out->task_rank = env_int("SLURM_PROCID", 0);
        int local = tasks_on_node(getenv("SLURM_STEP_TASKS_PER_NODE"), env_int("SLURM_NODEID", 0));
        out->local_tasks = local > 0 ? local : 1;
        out->by_stratbench = launched && strcmp(launched, "srun") == 0;
    }
}

const char *sb_launcher_name(enum sb_launcher_kind kind)
{
    switch (kind) {
    case SB_LAUNCHER_MPIRUN: return "mpirun";
    case SB_LAUNCHER_SRUN: return "srun";
    default: return "none";
    }
}

sb_status sb_launcher_check(const struct sb_launcher *l, int uses_mpi, const char *strategy)
{
    if (l->tasks <= 1) return SB_OK;
    if (!uses_mpi)
        return sb_error(SB_ERR_USAGE,
                        "--strategy %s runs in one process, but %s started %d; run it %s",
                        strategy, sb_launcher_name(l->kind), l->tasks,
                        l->kind == SB_LAUNCHER_SRUN ? "with srun -n 1" : "without mpirun");
    if (l->kind == SB_LAUNCHER_SRUN && !l->pmix)
        return sb_error(SB_ERR_USAGE,
                        "srun started %d tasks without PMIx (%s), so they cannot form one MPI "
                        "job and each would train alone; use srun --mpi=pmix (Open MPI here "
                        "supports PMIx only)",
                        l->tasks, l->pmi_other ? "a PMI-1/PMI-2 that Open MPI here lacks" : "--mpi=none");
    return SB_OK;
}

int sb_launcher_usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < INT_MAX ? (int)n : 1;
}

int sb_launcher_yield_if_oversubscribed(const struct sb_launcher *l)
{
    if (l->kind == SB_LAUNCHER_NONE || getenv("OMPI_MCA_mpi_yield_when_idle")) return 0;
    /* mpirun binds each rank to one core, so its mask says nothing about the
     * node: count the node's online CPUs (mpirun itself turns yielding on
     * when it knows it oversubscribes). srun: the CPUs Slurm gave the job. */
    int cpus = l->kind == SB_LAUNCHER_SRUN ? env_int("SLURM_CPUS_ON_NODE", 0)
                                           : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus <= 0) cpus = sb_launcher_usable_cpus();
    if (l->local_tasks <= cpus) return 0;
    return setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0) == 0;
}

static struct sb_mca_choice choices[SB_MCA_CHOICES] = {{.name = "btl_tcp_links"},
                                                       {.name = "mpi_yield_when_idle"},
                                                       {.name = "btl_tcp_eager_limit"}};
static size_t p2p_max = 0; /* sb_launcher_tune_transport's p2p_max_bytes */

/* Reads every choice's value from the environment (by_stratbench kept). */
static void read_choices(void)
{
    for (int i = 0; i < SB_MCA_CHOICES; i++) {
        char var[64];
        snprintf(var, sizeof var, "OMPI_MCA_%s", choices[i].name);
        const char *v = getenv(var);
        snprintf(choices[i].value, sizeof choices[i].value, "%s", v ? v : "");
    }
}

void sb_launcher_tune_transport(const struct sb_launcher *l, size_t p2p_max_bytes)
{
    int several = l->kind != SB_LAUNCHER_NONE && l->tasks > 1;
    p2p_max = p2p_max_bytes;
    choices[0].by_stratbench = several && !getenv("OMPI_MCA_btl_tcp_links") &&
                               setenv("OMPI_MCA_btl_tcp_links", SB_TCP_LINKS, 0) == 0;
    choices[1].by_stratbench = sb_launcher_yield_if_oversubscribed(l);
    /* The collectives' pieces go eagerly too (job/eager_limit.h). */
    size_t largest = p2p_max_bytes > SB_COLLECTIVE_PIECE_BYTES ? p2p_max_bytes
                                                                : SB_COLLECTIVE_PIECE_BYTES;
    size_t eager = sb_eager_limit_for(largest);
    char text[32];
    snprintf(text, sizeof text, "%zu", eager);
    choices[2].by_stratbench = several && eager > 0 && !getenv("OMPI_MCA_btl_tcp_eager_limit") &&
                               setenv("OMPI_MCA_btl_tcp_eager_limit", text, 0) == 0;
    read_choices();
}

size_t sb_launcher_p2p_max_bytes(void)
{
    return p2p_max;
}

const struct sb_mca_choice *sb_launcher_transport(void)
{
    read_choices();
    return choices;
}
