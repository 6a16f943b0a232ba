/* The job: which processes run, and how they start, agree and end.
 *
 * Wraps MPI's lifetime for the strategies that use it: initialisation,
 * world and node-local ranks, host names, agreement on a status after a
 * stage every rank runs, and ending the whole job on a failure (never one
 * rank alone, which would leave the others waiting).
 *
 * A struct sb_job is the typed handle of the job for every layer above:
 * the gathers to rank 0 (job/gather.h), the link probe (job/probe.h), the
 * trace, the statistics across ranks and the watchdog take it instead of an
 * MPI communicator, and only the files that call MPI themselves reach the
 * world communicator (job/job_mpi.h: sb_job_comm, SB_MPI_CHECK). */
#ifndef SB_JOB_H
#define SB_JOB_H

#include "core/status.h"
#include "job/launch_watch.h"

struct sb_job {
    int mpi;          /* MPI initialised by us */
    int rank;         /* world rank (0 without MPI) */
    int size;         /* world size (1 without MPI) */
    int local_rank;   /* rank among the processes of this node */
    int local_size;   /* processes of the job on this node */
    int machine_size; /* processes of the job on this machine's kernel (same boot_id),
                       * >= local_size: the fixture's hosts share one machine */
    char **hosts;     /* distinct host names, rank order of first sight */
    int n_hosts;
};

/* Non-zero when this process was started by mpirun/mpiexec or another PMI
 * launcher (Open MPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, PMI_SIZE). */
int sb_job_under_launcher(void);

/* The launcher's world size and this process's rank in it, for Slurm as
 * well as mpirun: job/launcher.h (sb_launcher_detect). */

/* Starts the job: with use_mpi, MPI_Init_thread (FUNNELED: only the main
 * thread calls MPI), ranks, node-local ranks from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), the processes on this
 * machine's kernel (machine_size, by boot_id), and the host names gathered
 * from every rank. Without, a job of one process on this host.
 * SB_ERR_COMM if MPI fails to start. */
sb_status sb_job_init(struct sb_job *job, int *argc, char ***argv, int use_mpi);

/* Agrees on a stage that every rank ran on its own (start-up checks, a
 * communicator's set-up), so that all ranks take the same branch and none
 * is left waiting in a later collective. Each rank passes its `local`
 * status; collective over the job (without MPI: local itself). Returns
 * SB_OK when no rank failed; else a status whose exit code
 * (sb_status_exit_code) is the largest of every failed rank's: local
 * itself where that is this rank's own (its message kept), otherwise
 * SB_ERR_USAGE (2), SB_ERR_INTERRUPTED (130) or SB_ERR_COMM (1) with the
 * line "rank R failed <what> (see its message)". *first_failed (may be
 * NULL) is set to the lowest rank whose status failed, the one that
 * prints its error, or -1. A failed reduction: SB_ERR_COMM naming
 * file:line. */
sb_status sb_job_agree(const struct sb_job *job, sb_status local, const char *what,
                       int *first_failed);

/* The world as the communicators' constructors take it
 * (sb_comm_mpi_create: an MPI_Comm *, so that their headers need no
 * mpi.h), NULL for a job without MPI. Only src/comm's constructors use it;
 * every other layer passes the job itself. */
const void *sb_job_world(const struct sb_job *job);

/* Ends every process of the job with `code` (MPI_Abort when more than one
 * process runs); returns only without MPI. */
void sb_job_abort(struct sb_job *job, int code);

/* Finalises MPI (if started) and frees the host list. */
void sb_job_finish(struct sb_job *job);

/* Runs `mpirun -np <np> <this program> <argv[1..]>` as a watched child
 * (job/launch_watch.h), so a user's `stratbench train --strategy ddp
 * --replicas 4` runs as the MPI job it needs, as torchrun or horovodrun
 * would, and sets *exit_code to the status to exit with once it ends.
 * Sets what Open MPI needs on a workstation or container unless the user
 * set it already:
 * running as root (OMPI_ALLOW_RUN_AS_ROOT*), more ranks than cores
 * (--oversubscribe), no CMA single-copy, and a lone rank not bound to one
 * core (--bind-to none). $STRATBENCH_MPIRUN overrides the
 * launcher command (e.g. "mpirun --hostfile hosts"). The watcher drops
 * the Open MPI banners it turns into its own line (not mpirun -q, which
 * would hide the banner naming a killed rank); the ranks get
 * STRATBENCH_LAUNCHED=mpirun (-x) so their report names the launcher, and
 * STRATBENCH_CONTROL=1 so they tell the watcher how far they got; `plan`
 * (np is set from `np`) gives the deadlines and the outputs to check. $STRATBENCH_LAUNCHER=srun hands over
 * to sb_job_relaunch_under_srun (which replaces this process). Returns
 * SB_OK once mpirun has ended (*exit_code set); SB_ERR_USAGE naming the
 * launcher when it cannot be started. */
sb_status sb_job_relaunch_under_mpirun(int np, int argc, char **argv,
                                       const struct sb_watch_plan *plan, int *exit_code);

/* Replaces this process by `srun -n <np> --mpi=pmix --kill-on-bad-exit=1
 * [--overcommit] <self> <argv[1..]>` (STRATBENCH_LAUNCHER=srun): a job step
 * in the current allocation, or a new one outside. --overcommit when np
 * exceeds the allocation's tasks (or, outside one, this node's CPUs).
 * Sets STRATBENCH_LAUNCHED=srun for the report. Returns only on failure:
 * SB_ERR_USAGE when srun cannot be started. */
sb_status sb_job_relaunch_under_srun(int np, int argc, char **argv, const char *self);

#endif
