/* The run report: one JSON document per training run, written by rank 0.
 *
 * The harness fills a struct sb_run_record while it trains; sb_report_write
 * turns it into JSON with cJSON (schema: reports/README.md, version
 * SB_REPORT_SCHEMA_VERSION) and writes it atomically: a temporary file in
 * the same directory, fsync, then rename, so a reader never sees half a
 * report and a failed run leaves none. */
#ifndef SB_REPORT_H
#define SB_REPORT_H

#include <stddef.h>

#include "comm/comm.h"
#include "comm/cost_model.h"
#include "core/config.h"
#include "core/details.h"
#include "core/memory.h"
#include "core/phase.h"
#include "core/status.h"
#include "job/launcher.h" /* SB_MCA_CHOICES */
#include "job/mpi_info.h" /* SB_MPI_CVAR_CHARS */
#include "job/probe.h" /* struct sb_link_probe */
#include "workloads/workload.h" /* struct sb_layer_summary */

#define SB_REPORT_SCHEMA_VERSION "1.19" /* 1.19: a pipeline's exchange after the step, untimed */
#define SB_REPORT_LAYERS_MAX 256 /* layers model.layers lists (the rest left off) */

/* Most warnings a report records (sb_run_record.warnings). */
#define SB_REPORT_MAX_WARNINGS 5

struct sb_epoch_record {
    int epoch;             /* from 1 */
    double train_loss;     /* mean cross-entropy over the epoch's samples */
    double test_accuracy;  /* fraction of the 10k test images, 0..1 */
    double seconds;        /* training wall time of the epoch, evaluation excluded */
    double eval_seconds;   /* wall time of the evaluation after the epoch */
    double samples_per_s;  /* global samples trained / seconds */
};

/* How one timing spreads across ranks: each rank's median over its measured
 * steps, then the min, median (type 7) and max of those medians, the skew
 * (max - min) and the rank with the largest median (lowest on a tie). All
 * in milliseconds. ranks == 0: not computed (written as is: all 0). */
struct sb_rank_spread {
    int ranks;
    double min, median, max, skew;
    int slowest_rank;
};

/* One rank's noise over training (harness/run_noise.h measures it). */
struct sb_rank_noise {
    double involuntary_context_switches; /* getrusage ru_nivcsw, end - start */
    double cpu_steal_s;        /* /proc/stat steal ticks / USER_HZ (whole host); < 0 unknown */
    double cpu_steal_fraction; /* steal ticks / all ticks of the host, 0..1; < 0 unknown */
    double runqueue_wait_s;    /* s this rank's main thread waited runnable for a CPU (schedstat),
                                * end - start; < 0 unknown */
    double cpu_s;              /* CPU time of the process (getrusage user + system, every
                                * thread), end - start (the epochs, evaluation included): a
                                * rank that spins in its waits uses a core the whole time */
    double compute_wall_s;     /* s in the measured steps' forward and backward calls (the
                                * host path: sb_step_result's compute_wall_s); < 0 not
                                * measured */
    double compute_cpu_s;      /* CPU time the rank's compute thread used in them
                                * (CLOCK_THREAD_CPUTIME_ID); / compute_wall_s: the share of
                                * a core its compute had; < 0 not measured */
};

/* What the compute probe measured on rank 0 (harness/compute_probe.h). */
struct sb_compute_probe {
    int done;                 /* 1 once measured (0: not run; the rest is 0) */
    int batch[2];             /* samples per pass: b1 < b2 (b1 = b2 only for b2 = 1) */
    double forward_ms[2];     /* best wall time of a forward at batch[i], ms */
    double backward_ms[2];    /* likewise, the backward */
    double forward_cpu_ms[2]; /* best CPU time of the calling thread in it, ms */
    double backward_cpu_ms[2];
    double seconds;           /* the probe's wall time, all passes, s */
};

/* What the replica consistency checks found (harness/consistency.h). */
struct sb_consistency {
    int checks;          /* checks run (0: none; the report then says null) */
    int replicas;        /* replicas compared job-wide by the last check; 0: none */
    int checksums_equal; /* 1: every check found every replica's hash equal */
    double max_abs_diff; /* largest |param - replica 0's| any check measured */
    int worst_replica;   /* the replica of max_abs_diff; -1: none differed */
    double tolerance;    /* the bound of the last check that compared values; NaN: none */
};

/* One rank's load per measured step (harness/rank_stats.h), ms: compute
 * (data + h2d + forward + backward) and wait (idle at the step's
 * synchronisation point for slower ranks: max over ranks of compute minus
 * its own), as the median and the mean over the steps. */
struct sb_rank_load {
    double compute_median, compute_mean;
    double wait_median, wait_mean;
};

/* The straggler of a run (harness/rank_stats.h, sb_rank_timings_straggler).
 * The slowest rank k is the one with the largest median compute; its cost
 * is the time the other ranks wait for it per step: the median over steps
 * of compute_k - mean over q != k of compute_q where k is the slowest, 0
 * where it is not, ms. ranks == 0: not computed (one rank). */
struct sb_straggler {
    int ranks;
    int rank;                   /* k */
    double cost_ms;
    double slowest_fraction;    /* share of the steps in which k was the slowest */
    double compute_ms;          /* k's median compute */
    double others_compute_ms;   /* median over steps of max over q != k of compute_q */
    struct sb_rank_load *by_rank; /* ranks entries, rank order (owned) */
    const char **hosts;         /* ranks entries: each rank's host (not owned strings) */
};

/* The run's layout (the report's `layout`): every data-parallel strategy
 * is dp = replicas, tp = pp = 1, one micro-batch, no schedule; a strategy
 * that splits the model fills its own (the harness, run_outputs.c). */
struct sb_report_layout {
    int dp, tp, pp, microbatches, chunks, zero_stage;
    const char *schedule;   /* NULL: no pipeline (JSON null) */
    const char *rank_order; /* "tp-dp-pp" (Megatron-LM's) or "tp-pp-dp" */
};

struct sb_run_record {
    const struct sb_config *cfg;
    int argc;
    char **argv;
    int world_size;            /* MPI processes (1 without MPI) */
    char start_utc[32];        /* ISO 8601, e.g. 2026-11-21T10:00:00Z */
    char **hosts;              /* distinct host names of the job */
    int n_hosts;
    size_t n_params;
    /* The whole model's layer table (model.layers; n_layers 0: null) and
     * the run's layout (the report's `layout`, report/layout_report.c). */
    const struct sb_layer_summary *layers;
    int n_layers;
    struct sb_report_layout layout;
    int global_batch;
    double effective_lr;

    struct sb_epoch_record *epochs;
    int n_epochs;
    double final_test_accuracy;
    double time_to_accuracy_s; /* < 0: target not reached (JSON null) */
    double train_seconds;      /* sum of epoch seconds */
    double samples_trained;    /* global samples of every step, warm-up included */
    long steps_total;          /* optimizer steps, warm-up included */

    /* Rank 0's per-step timings after warm-up: n_measured entries each. */
    double *step_ms;
    double *phase_ms[SB_PHASE_COUNT];
    size_t n_measured;

    /* Rank 0's communication totals after warm-up; comm_ranks is the
     * number of ranks of the collective (n in the busbw factor). */
    struct sb_comm_counter comm[SB_COMM_NKINDS];
    int comm_ranks;
    /* The same per communicator role (comm.by_role), each with its own
     * communicator's ranks for busbw; ranks 0: no communicator of it. */
    struct sb_comm_role_totals comm_by_role[SB_COMM_NROLES];
    /* comm[SB_COMM_ALLREDUCE]'s non-blocking calls by the algorithm that
     * ran, and each algorithm's report name (sb_comm_algo_name; NULL for
     * algorithms that never ran). */
    struct sb_comm_counter allreduce_by_algo[SB_ALLREDUCE_NALGOS];
    const char *allreduce_algo_names[SB_ALLREDUCE_NALGOS];
    /* The stages of multi-stage algorithms (hierarchical), each under its
     * algorithm in comm.allreduce.algorithms.<name>.stages. */
    struct sb_comm_stage comm_stages[SB_COMM_STAGES_MAX];
    int n_comm_stages;

    /* --probe-links: the links' α and B (link.done = 0: not probed). */
    struct sb_link_probe link;
    /* With the links, rank 0's forward and backward at two batch sizes
     * (compute.done = 0: not probed). */
    struct sb_compute_probe compute;
    /* The strategy's α–β prediction of its communication per step from
     * those links (its comm_model op, filled by the harness);
     * has_comm_model = 0: none (not probed, or a strategy without one). */
    int has_comm_model;
    struct sb_comm_model_row comm_model;

    /* Rank 0's counters accumulated before the reset at the end of
     * warm-up: the initial broadcast of parameters and warm-up traffic. */
    struct sb_comm_counter comm_before[SB_COMM_NKINDS];

    /* Across ranks (MPI strategies; one rank otherwise): step_ms and each
     * phase, from every rank's per-step timings gathered to rank 0. */
    struct sb_rank_spread step_by_rank;
    struct sb_rank_spread phases_by_rank[SB_PHASE_COUNT];

    /* Per rank (world_size entries, rank order), over training: involuntary
     * context switches and CPU steal (harness/run_noise.h); NULL: none. */
    const struct sb_rank_noise *noise_by_rank;

    /* The slowest rank and what it costs the others (MPI strategies). */
    struct sb_straggler stragglers;

    struct sb_consistency replica_check; /* after training (and every --check-every) */

    long peak_rss_bytes;       /* VmHWM of rank 0 */
    /* --precision's state at the end (rank 0's): fp16's loss scale S (1
     * otherwise) and the steps its scaler skipped. */
    double loss_scale;
    long skipped_steps;
    /* The memory ledger: every rank's entries (n_memory, rank order;
     * mirrored states one per replica), gathered at the end of training;
     * NULL: none. */
    const struct sb_memory_entry *memory;
    int n_memory;
    int blas_threads;          /* compute threads per process actually used */
    /* How the ranks waited for their messages (comm/wait_policy.h): "spin"
     * or "sleep", --wait resolved on this machine of wait_cores cores
     * running wait_threads_on_machine compute threads (the job's ranks on
     * its kernel x compute threads); "" without MPI. */
    char wait_policy[8];
    long wait_threads_on_machine, wait_cores;
    /* The largest point-to-point message one rank sends (a pipeline's
     * boundary; 0: none), the largest message rank 0's own collectives
     * posted (comm/message_size.h; 0: none) and Open MPI's TCP eager limit
     * rank 0 runs with (MPI_T; 0: unknown), all bytes: the rendezvous
     * warnings (harness/run_warnings.h). */
    double p2p_max_bytes, collective_max_bytes, tcp_eager_limit_bytes;
    /* Open MPI's value in effect (MPI_T) of each variable stratbench may
     * choose (job/launcher.h's sb_launcher_transport(), in its order),
     * read once by rank 0 after training where it writes a report or
     * warns (harness/run_outputs.c);
     * "" where unread or MPI does not say: the report's
     * environment.mpi_transport[].in_effect. */
    char mpi_transport_in_effect[SB_MCA_CHOICES][SB_MPI_CVAR_CHARS];

    struct sb_strategy_details details; /* what the strategy states of itself */

    /* Why the figures may mislead (harness/run_warnings.h): oversubscribed
     * cores, a noisy run. Reported as "warnings" (schema 1.8). */
    char warnings[SB_REPORT_MAX_WARNINGS][256];
    int n_warnings;
    /* Why the run is taken as diverged or not learning (harness/
     * divergence.h), "" when it learned. Reported as "diverged" (1.11). */
    char diverged[256];
};

/* Builds the report of `rec` and writes it to `path` atomically.
 * Errors: SB_ERR_IO naming the path (directory missing, disk full, ...),
 * SB_ERR_NOMEM. On error no file is left at `path` or beside it. */
sb_status sb_report_write(const char *path, const struct sb_run_record *rec);

/* Throughput as work over wall time: samples / wall_s (0 when wall_s <= 0),
 * as MLPerf measures it. */
double sb_samples_per_s(double samples, double wall_s);

/* Peak resident set size of this process in bytes (VmHWM from
 * /proc/self/status), or -1 if unknown. */
long sb_peak_rss_bytes(void);

/* Current UTC time as ISO 8601 ("2026-11-21T10:00:00Z") into out[32]. */
void sb_utc_now(char out[32]);

#endif
