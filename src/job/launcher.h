/* Who started this process: nobody (a plain command), mpirun, or Slurm's
 * srun; and whether stratbench itself launched it (self-launch) or the user.
 *
 * Read from the environment only, before MPI_Init, so that a start MPI cannot
 * turn into one job (srun --mpi=none, or a PMI flavour Open MPI lacks) is
 * refused with one clear line instead of N independent one-rank runs or an
 * error inside MPI_Init. Variables read: OMPI_COMM_WORLD_SIZE,
 * OMPI_COMM_WORLD_LOCAL_SIZE (mpirun), SLURM_STEP_ID, SLURM_STEP_NUM_TASKS,
 * SLURM_PROCID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE, SLURM_CPUS_ON_NODE,
 * SLURM_JOB_ID (Slurm), PMIX_RANK (PMIx), PMI_RANK/PMI_SIZE (PMI-1/2), and
 * STRATBENCH_LAUNCHED, which a self-launch sets for its ranks. */
#ifndef SB_LAUNCHER_H
#define SB_LAUNCHER_H

#include <stddef.h>

#include "core/status.h"

/* Set by a self-launch ("mpirun" or "srun") in the ranks' environment. */
#define SB_LAUNCHED_ENV "STRATBENCH_LAUNCHED"

enum sb_launcher_kind {
    SB_LAUNCHER_NONE,   /* a plain process */
    SB_LAUNCHER_MPIRUN, /* mpirun / mpiexec (Open MPI's OMPI_COMM_WORLD_SIZE) */
    SB_LAUNCHER_SRUN    /* a Slurm job step (srun) */
};

struct sb_launcher {
    enum sb_launcher_kind kind;
    int by_stratbench;       /* 1: stratbench's self-launch started the job */
    int tasks;               /* processes the launcher started (1 for none) */
    int task_rank;           /* this process's rank among them (0 for none) */
    int local_tasks;         /* of them, on this node */
    int pmix;                /* a PMIx server is reachable (PMIX_RANK set) */
    int pmi_other;           /* only PMI-1/PMI-2 variables (srun --mpi=pmi2) */
    char slurm_job_id[32];   /* SLURM_JOB_ID, "" outside a Slurm allocation */
    int slurm_tasks;         /* SLURM_NTASKS of the allocation (0 outside one) */
};

/* Fills *out from the environment; never fails (absent or malformed
 * variables read as "not set"). */
void sb_launcher_detect(struct sb_launcher *out);

/* "none", "mpirun" or "srun". */
const char *sb_launcher_name(enum sb_launcher_kind kind);

/* Checks, before MPI_Init, that the processes the launcher started can run
 * `strategy` as one job: an srun step of more than one task must reach MPI
 * through PMIx (srun --mpi=pmix; otherwise every task would train alone and
 * write the same report), and a one-process strategy (`uses_mpi` 0) must not
 * be started as several tasks by srun or mpirun. SB_ERR_USAGE with one line
 * and a hint otherwise. */
sb_status sb_launcher_check(const struct sb_launcher *l, int uses_mpi, const char *strategy);

/* Sets OMPI_MCA_mpi_yield_when_idle=1 (unless the user set it) when this
 * node runs more of the job's processes than CPUs it may use (Open MPI's
 * own blocking calls then yield; stratbench's exchanges wait in
 * sb_mpi_wait, which sleeps between polls on such a machine: --wait,
 * comm/wait_policy.h, chosen after MPI_Init by the harness and reported
 * beside these choices as environment.wait_policy)
 * (SLURM_CPUS_ON_NODE, else the CPU affinity mask): busy-polling ranks would
 * otherwise take the CPU from the rank they wait for (an srun -O epoch took
 * 10-13 s instead of ~1 s). Call before MPI_Init. Returns 1 when it set it. */
int sb_launcher_yield_if_oversubscribed(const struct sb_launcher *l);

/* The Open MPI settings (MCA variables) that the job's transport runs with
 * and who chose them: `value` is the variable's text in this process's
 * environment ("" when unset); `by_stratbench` is 1 when
 * sb_launcher_tune_transport set it, 0 when it was the user's (or unset). */
struct sb_mca_choice {
    const char *name;   /* MCA name without the OMPI_MCA_ prefix, e.g. "btl_tcp_links" */
    char value[32];
    int by_stratbench;
};

/* What stratbench chooses, in this order: btl_tcp_links, mpi_yield_when_idle,
 * btl_tcp_eager_limit. */
#define SB_MCA_CHOICES 3

/* Sets, before MPI_Init and only where the user has not, the Open MPI
 * variables that a run needs to use its links fully, and records them for
 * sb_launcher_transport:
 *  - OMPI_MCA_btl_tcp_links=SB_TCP_LINKS (when the launcher started more than
 *    one task): two TCP connections per pair of ranks on different hosts.
 *    With Open MPI 4.1's one connection, two ranks sending to each other at
 *    once (every step of a ring or recursive doubling) got about half the
 *    link each way (docs/multinode.md: ring busbw 0.50x the link at 1 Gbit/s);
 *    with two, 0.9-1.0x. Open MPI reads MCA variables from the environment
 *    in MPI_Init, so this works under mpirun, srun and self-launch alike
 *    (the ranks of a self-launch run this too).
 *  - OMPI_MCA_mpi_yield_when_idle=1 when this node is oversubscribed
 *    (sb_launcher_yield_if_oversubscribed).
 *  - OMPI_MCA_btl_tcp_eager_limit=sb_eager_limit_for(the larger of
 *    p2p_max_bytes and SB_COLLECTIVE_PIECE_BYTES) (when the launcher started
 *    more than one task): the run's largest point-to-point message (a
 *    pipeline's boundary activation or gradient of one micro-batch,
 *    sb_strategy_p2p_max_bytes, computed from the configuration) and every
 *    message of stratbench's collectives go eagerly instead of by
 *    rendezvous, whose handshake waits for the computing receiver's and
 *    sender's next MPI calls and makes the two directions of a pair's
 *    exchange take turns (job/eager_limit.h). Only Open MPI's TCP transport
 *    (between hosts); within a host (vader) nothing changes.
 * A plain process (no launcher) gets none. p2p_max_bytes is kept for
 * sb_launcher_p2p_max_bytes. Never fails. */
void sb_launcher_tune_transport(const struct sb_launcher *l, size_t p2p_max_bytes);

/* The p2p_max_bytes the last sb_launcher_tune_transport was given (0: none,
 * or not called): the report's environment.p2p_max_message_bytes. */
size_t sb_launcher_p2p_max_bytes(void);

/* TCP connections per pair of ranks that sb_launcher_tune_transport asks for. */
#define SB_TCP_LINKS "2"

/* The SB_MCA_CHOICES settings as this process runs with them (after
 * sb_launcher_tune_transport; before it, each reads as the user's). */
const struct sb_mca_choice *sb_launcher_transport(void);

/* CPUs this process may run on (its affinity mask; online CPUs if unknown). */
int sb_launcher_usable_cpus(void);

#endif
