/* `stratbench train`: one run under one strategy, from the parsed flags to
 * the end of the job. */
#ifndef SB_TRAIN_H
#define SB_TRAIN_H

#include "job/job.h"

/* How `train` asks main to end: the exit status, and whether the whole MPI
 * job must be ended with it (MPI_Abort: a failure or fault on a rank) or
 * MPI finalised normally. src/main.c does the ending (end_train), so that
 * only main ends the job. */
struct sb_train_outcome {
    int code;            /* the process's exit status */
    int abort;           /* 1: end every rank of the job (sb_job_abort) */
    int stop_watchdog;   /* 1: stop the watchdog after that (it is still running) */
    int finish;          /* 1: a job was started: finalise MPI, free its hosts */
    int control_rank;    /* >= 0: this rank tells the watcher "finished" after MPI_Finalize */
    struct sb_job job;   /* the job to end (zero before sb_job_init) */
};

/* Runs `stratbench train` (argv[0] = "train"; full_argv: the whole command
 * line, for a self-launch and the report): parses and checks the flags, the
 * data and the outputs, launches mpirun itself when the strategy needs ranks
 * and no launcher started this process (then waits for it), else starts the
 * job, agrees on the start-up checks over it and trains (harness.h). Prints
 * the one error line of a failure (docs/faults.md). Fills *out; never ends
 * the process or the job itself. */
void sb_train_main(int argc, char **argv, int full_argc, char **full_argv,
                   struct sb_train_outcome *out);

#endif
