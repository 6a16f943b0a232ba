/* `stratbench train`: from the parsed flags to the end of the job; see
 * train.h. The run's stages each return a status; one place (the outcome)
 * says how the job ends, and main ends it (src/main.c: end_train). */
#include "cli/train.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda.h"
#include "cli/train_opts.h"
#include "comm/watchdog.h"
#include "core/interrupt.h"
#include "core/page_cache.h"
#include "core/test_fault.h"
#include "data/mnist.h"
#include "harness/harness.h"
#include "harness/mem_estimate.h"
#include "harness/straggler.h"
#include "job/control.h"
#include "job/hosts.h"
#include "job/launcher.h"
#include "report/flight_report.h"
#include "strategies/strategy.h"

/* Prints the error line of `st` once: "stratbench: <message>". */
static void report_error(sb_status st, int rank, int world_size)
{
    const char *msg = sb_error_message();
    if (world_size > 1)
        fprintf(stderr, "stratbench: rank %d: %s\n", rank, *msg ? msg : sb_status_name(st));
    else
        fprintf(stderr, "stratbench: %s\n", *msg ? msg : sb_status_name(st));
}

/* The outcome of a run that ends with `st` before any job was started (or
 * after one whose ranks all return): the exit status, MPI finalised
 * normally. `say`: this process prints the error line. */
static void fail_plain(struct sb_train_outcome *out, sb_status st, int say)
{
    if (st && say) report_error(st, 0, 1);
    out->code = sb_status_exit_code(st);
}

/* The fault line of a run that failed during training (see end_failed). */
static void fault_message(const struct sb_job *job, sb_status st, int n_missing,
                          const char *missing, char *message, size_t cap)
{
    int sig = sb_interrupted();
    if (st != SB_ERR_INTERRUPTED)
        snprintf(message, cap, "%s", *sb_error_message() ? sb_error_message() : sb_status_name(st));
    else if (job->mpi && sb_interrupt_sender() == (int)getppid() && n_missing)
        /* Open MPI ends every rank this way when one of them died. */
        snprintf(message, cap, "mpirun ended the job (%s): %s did not respond "
                 "(killed or stopped: mpirun's message names the signal)",
                 sb_signal_name(sig), missing);
    else if (job->mpi && sb_interrupt_sender() == (int)getppid())
        snprintf(message, cap, "interrupted (%s from mpirun)", sb_signal_name(sig));
    else
        snprintf(message, cap, "interrupted (%s)", sb_signal_name(sig ? sig : 2));
}

/* Ends a run that failed during training (st: exit status 1 or 130) the
 * way docs/faults.md describes: collects the fault record over the
 * watchdog's side channel (every rank that can still run answers with its
 * flight recorder; a timeout has collected it already), and the reporting
 * rank writes the flight-recorder file and prints one line naming it. Other
 * ranks wait quietly (up to 10 s) to be ended. Either way the job is to be
 * ended (out->abort). */
static void end_failed(struct sb_train_outcome *out, const struct sb_config *cfg, sb_status st)
{
    const struct sb_job *job = &out->job;
    out->code = sb_status_exit_code(st);
    out->abort = 1;
    /* Another rank reports (or has reported) this fault: end quietly. */
    int quiet = !sb_watchdog_fault() && sb_watchdog_check_followed();
    enum sb_fault_reason why = st == SB_ERR_INTERRUPTED ? SB_FAULT_SIGNAL : SB_FAULT_FAILURE;
    int reporter = !quiet && sb_watchdog_collect(why);
    char missing[512] = "", message[1024];
    int n_missing = reporter ? sb_watchdog_missing(missing, sizeof missing) : 0;
    fault_message(job, st, n_missing, missing, message, sizeof message);
    if (!reporter) {
        /* The reporting rank prints and ends the job; if it cannot, end it here. */
        sb_watchdog_linger(10.0);
        return;
    }
    const struct sb_fault *f = sb_watchdog_fault();
    char path[PATH_MAX] = "";
    if (f && f->ranks && (job->size > 1 || f->ranks[0].n_calls > 0)) {
        sb_flight_report_path(cfg->report_path, path, sizeof path);
        if (sb_flight_report_write(path, f, message) != SB_OK) {
            fprintf(stderr, "stratbench: %s\n", sb_error_message());
            path[0] = '\0';
        }
    }
    char where[160] = "";
    if (job->size > 1 && st != SB_ERR_INTERRUPTED)
        snprintf(where, sizeof where, "rank %d (host %s): ", job->rank,
                 sb_watchdog_host(job->rank));
    fprintf(stderr, "stratbench: %s%s%s%s\n", where, message,
            path[0] ? "; flight recorder: " : "", path);
    fflush(stderr);
    sb_watchdog_announce_end();
}

/* A SHA256SUMS beside the data that does not list every file loaded:
 * those are not checked, which the user should know. */
static void warn_unchecked(const struct sb_config *cfg, const struct sb_mnist *data)
{
    if (data->unchecked[0])
        fprintf(stderr, "stratbench: warning: %s/SHA256SUMS does not list %s: not checked\n",
                cfg->data_dir, data->unchecked);
}

/* The watching parent of a self-launched job: checks the input where an
 * error is one clear line, before starting a job of many processes, then
 * runs mpirun (job/job.h) and waits for it. */
static void launch_self(const struct sb_train_opts *opts, const struct sb_launcher *launch,
                        int full_argc, char **full_argv, struct sb_train_outcome *out)
{
    const struct sb_config *cfg = &opts->cfg;
    const struct sb_strategy_ops *ops = cfg->strategy_ops;
    struct sb_mnist data = {0};
    sb_status st = sb_train_check_outputs(cfg);
    /* Memory: every rank is on this host unless $STRATBENCH_MPIRUN
     * (a hostfile) spreads them, then each host holds at least one. */
    int np_all = sb_strategy_world_size(ops, cfg);
    if (!st) st = sb_mem_check(cfg, np_all, getenv("STRATBENCH_MPIRUN") ? 1 : np_all);
    if (!st) st = sb_mnist_check_files(cfg->data_dir, &data); /* the ranks load it */
    if (!st) warn_unchecked(cfg, &data);
    if (!st) st = sb_train_check_data(cfg, &data);
    sb_mnist_free(&data);
    /* Inside a Slurm allocation (sbatch -n N), use its N tasks unless
     * --replicas says otherwise; the ranks take replicas from the world. */
    int np = !opts->replicas_given && launch->slurm_tasks > 1 ? launch->slurm_tasks
                                                              : np_all;
    /* The test-only slow rank, refused once here rather than by every rank. */
    double slow_ms = 0.0;
    if (!st) st = sb_slow_rank_hook(0, np, &slow_ms);
    const char *outputs[] = {cfg->report_path, cfg->trace_path, cfg->mllog_path,
                             cfg->save_params_path};
    struct sb_watch_plan plan = {.np = np, .timeout_s = cfg->timeout_s, .report = cfg->report_path,
                                 .outputs = outputs, .n_outputs = 4};
    out->code = 1;
    if (!st) st = sb_job_relaunch_under_mpirun(np, full_argc, full_argv, &plan, &out->code);
    if (st) fail_plain(out, st, 1);
}

/* A rank's start: the transport settings MPI reads at MPI_Init, the
 * watcher's "started" line, the job, and a launcher whose tasks did not
 * meet in one MPI world refused. */
static sb_status start_rank(const struct sb_config *cfg, const struct sb_launcher *launch,
                            int *full_argc, char ***full_argv, struct sb_train_outcome *out)
{
    int uses_mpi = cfg->strategy_ops->uses_mpi;
    /* Full links (btl_tcp_links), yielding when oversubscribed and an
     * eager limit above the largest point-to-point message, unless the
     * user chose: before MPI_Init, which reads them. */
    if (uses_mpi) {
        /* The largest point-to-point message picks the TCP eager limit. */
        size_t p2p_bytes = 0;
        SB_TRY(sb_strategy_p2p_max_bytes(cfg->strategy_ops, cfg, &p2p_bytes));
        sb_launcher_tune_transport(launch, p2p_bytes);
        /* A rank of a job stratbench watches: dies with its launcher, says
         * it started (job/control.h). */
        sb_control_started(launch->task_rank);
        sb_test_fault_stop("stop-startup", launch->task_rank);
    }
    SB_TRY(sb_job_init(&out->job, full_argc, full_argv, uses_mpi));
    if (uses_mpi && launch->tasks > 1 && out->job.size != launch->tasks)
        return sb_error(SB_ERR_USAGE, "%s started %d tasks but each sees an MPI world of %d; "
                        "use srun --mpi=pmix (or mpirun)", sb_launcher_name(launch->kind),
                        launch->tasks, out->job.size);
    return SB_OK;
}

/* Rank r's host, as the watchdog gathered it (sb_hosts_check_even's callback). */
static const char *rank_host(int r, void *arg)
{
    (void)arg;
    return sb_watchdog_host(r);
}

/* The checks every rank runs before training (collective on every rank,
 * whatever they find): the watchdog, the world against the strategy, GPU
 * placement, outputs (rank 0 writes them), memory, --clear-cache and the
 * data. */
static sb_status check_rank(struct sb_train_opts *opts, struct sb_job *job, struct sb_mnist *data)
{
    struct sb_config *cfg = &opts->cfg;
    const struct sb_strategy_ops *ops = cfg->strategy_ops;
    sb_status st = sb_watchdog_start(job);
    if (!st && ops->uses_mpi)
        st = sb_strategy_fit_world(ops, cfg, job->size, opts->replicas_given);
    /* The hierarchical all-reduce on real hosts: every rank judges the same
     * gathered host names, so the refusal is agreed and said once. */
    if (!st && ops->uses_mpi && cfg->ranks_per_host == 0 &&
        strcmp(cfg->allreduce, "hierarchical") == 0)
        st = sb_hosts_check_even(job->size, rank_host, NULL, strcmp(cfg->strategy, "hierarchical")
                                 ? "--allreduce hierarchical" : "--strategy hierarchical");
    if (!st && ops->uses_mpi && !cfg->backend->host_memory) /* NCCL: one GPU per rank */
        st = sb_cuda_check_rank_placement(cfg->comm_entry->gpu_per_member, job->local_size,
                                          sb_cuda_device_count());
    if (!st && job->rank == 0) st = sb_train_check_outputs(cfg); /* rank 0 writes them */
    /* The watching parent checked the memory of the whole job already. */
    if (!st && !sb_control_on()) st = sb_mem_check(cfg, job->size, job->local_size);
    /* --clear-cache: once per host, before the data is read (MLPerf's
     * cache_clear, core/page_cache.h). */
    if (!st && cfg->clear_cache && job->local_rank == 0) st = sb_page_cache_drop();
    if (!st) st = sb_mnist_load(cfg->data_dir, data);
    /* One warning: the watching parent gave it, else rank 0. */
    if (!st && job->rank == 0 && !sb_control_on()) warn_unchecked(cfg, data);
    if (!st) st = sb_train_check_data(cfg, data);
    if (!st) cfg->run_steps = sb_train_run_steps(cfg, data); /* the lr schedule's length */
    if (!st) sb_train_limit_eval(cfg, data);
    return st;
}

/* Trains on a started job whose ranks agreed on their checks, and sets how
 * the job ends: a failure during training ends the whole job (end_failed),
 * a usage error on a rank too, a diverged loss (every rank returns it
 * together) and success finalise MPI. */
static void train_rank(const struct sb_config *cfg, struct sb_mnist *data, int full_argc,
                       char **full_argv, struct sb_train_outcome *out)
{
    struct sb_job *job = &out->job;
    if (job->mpi) sb_control_joined(job->rank);
    sb_status st = sb_harness_train(cfg, data, job, full_argc, full_argv);
    sb_mnist_free(data);
    if (st == SB_ERR_DIVERGED) { /* every rank agreed to stop: no abort, one line */
        fail_plain(out, st, job->rank == 0);
        return;
    }
    if (st && sb_status_exit_code(st) != 2) {
        end_failed(out, cfg, st);
        return;
    }
    if (st) {
        report_error(st, job->rank, job->size);
        out->code = sb_status_exit_code(st);
        out->abort = out->stop_watchdog = 1;
        return;
    }
    sb_watchdog_stop();
    if (job->mpi) {
        sb_control_done(job->rank);
        sb_test_fault_stop("stop-finalize", job->rank);
        sb_test_fault_kill("kill-finalize", job->rank);
        out->control_rank = job->rank;
    }
    out->code = 0;
}

void sb_train_main(int argc, char **argv, int full_argc, char **full_argv,
                   struct sb_train_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->control_rank = -1;
    struct sb_launcher launch;
    sb_launcher_detect(&launch);
    struct sb_train_opts opts;
    sb_status st = sb_train_opts_parse(&opts, argc, argv);
    if (st || opts.help) {
        if (opts.help && !st) sb_train_opts_usage(stdout);
        return fail_plain(out, st, launch.task_rank == 0); /* every rank parses; one says it */
    }
    struct sb_config *cfg = &opts.cfg;
    sb_interrupt_install();
    sb_watchdog_set_timeout(cfg->timeout_s);
    /* Before MPI_Init: tasks that cannot form one MPI job are refused here. */
    st = sb_launcher_check(&launch, cfg->strategy_ops->uses_mpi, cfg->strategy);
    if (st) return fail_plain(out, st, launch.task_rank == 0);
    /* An srun step without PMIx (one task) is no MPI launcher: self-launch. */
    int under_launcher = sb_job_under_launcher() &&
                         !(launch.kind == SB_LAUNCHER_SRUN && !launch.pmix);
    if (cfg->strategy_ops->uses_mpi && !under_launcher)
        return launch_self(&opts, &launch, full_argc, full_argv, out);

    st = start_rank(cfg, &launch, &full_argc, &full_argv, out);
    if (st) {
        /* Before MPI_Init there is no job to end. After it (the usage error
         * of a launcher's split world, or a failure inside sb_job_init once
         * MPI runs) the job is ended: finished for the usage error, which
         * every rank sees alike; aborted for a failure one rank may have
         * alone, so no peer waits in start-up's collectives for it. */
        out->finish = out->job.mpi && st == SB_ERR_USAGE;
        out->abort = out->job.mpi && st != SB_ERR_USAGE;
        return fail_plain(out, st, st != SB_ERR_USAGE || launch.task_rank == 0);
    }
    out->finish = 1;
    struct sb_mnist data = {0};
    st = check_rank(&opts, &out->job, &data);
    int first_failed;
    sb_status agreed = sb_job_agree(&out->job, st, "its start-up checks", &first_failed);
    if (agreed) {
        if (st && out->job.rank == first_failed) report_error(st, out->job.rank, 1);
        sb_mnist_free(&data);
        sb_watchdog_stop();
        out->code = sb_status_exit_code(agreed);
        /* Every rank refuses alike and finalizes: tell the watcher so, or it
         * takes the line for an abort that mpirun does not carry out. */
        if (out->job.mpi) sb_control_done(out->job.rank);
        return;
    }
    train_rank(cfg, &data, full_argc, full_argv, out);
}
