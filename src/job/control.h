/* The self-launch control lines: how the ranks of a job that stratbench
 * launched itself tell the watching parent (job/launch_watch.h) how far
 * they got, so that the parent can bound start-up and finalize with
 * deadlines and name what did not arrive (docs/faults.md).
 *
 * The parent sets STRATBENCH_CONTROL=1 and passes it to the ranks (mpirun
 * -x). A rank then writes, on stderr (which mpirun forwards to the parent
 * from every host), lines the parent swallows:
 *
 *   stratbench-control: started RANK HOST PID   before MPI_Init
 *   stratbench-control: joined RANK             every rank agreed to train
 *   stratbench-control: done RANK               trained, outputs written
 *   stratbench-control: finished RANK           after MPI_Finalize, exit 0
 *
 * Without STRATBENCH_CONTROL (the user's own mpirun or srun) nothing is
 * written. Also here: the tie between a rank and its launcher (a rank
 * dies with the process that started it). */
#ifndef SB_CONTROL_H
#define SB_CONTROL_H

/* The environment variable that turns the control lines on. */
#define SB_CONTROL_ENV "STRATBENCH_CONTROL"
/* The prefix of every control line. */
#define SB_CONTROL_PREFIX "stratbench-control: "

/* Non-zero when this process is a rank of a job stratbench launched and
 * watches (STRATBENCH_CONTROL=1). */
int sb_control_on(void);

/* For a watched rank: asks the kernel to SIGKILL this process when its
 * parent (mpirun, or Open MPI's orted on another host) dies
 * (prctl PR_SET_PDEATHSIG), so that nothing outlives the launcher; ends the
 * process at once (exit 1) if the parent is already gone. Then writes the
 * "started" line for `rank`. A no-op without STRATBENCH_CONTROL. */
void sb_control_started(int rank);

/* Writes the "joined" (every rank is in the job and agreed to train),
 * "done" (trained and wrote its outputs; MPI_Finalize next) or "finished"
 * (MPI finalised, the run succeeded) line for `rank`. */
void sb_control_joined(int rank);
void sb_control_done(int rank);
void sb_control_finished(int rank);

#endif
