/* stratbench: benchmark distributed data-parallel training strategies.
 *
 * The command line: `stratbench train | sweep | compare | info`. Only this file decides how
 * the process (and the MPI job) ends: every other layer returns a status. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda.h"
#include "cli/compare.h"
#include "cli/info.h"
#include "cli/predict.h"
#include "cli/suggest.h"
#include "cli/sweep.h"
#include "cli/train_opts.h"
#include "comm/watchdog.h"
#include "core/interrupt.h"
#include "job/launcher.h"
#include "core/test_fault.h"
#include "data/mnist.h"
#include "job/control.h"
#include "harness/harness.h"
#include "job/job.h"
#include "harness/mem_estimate.h"
#include "report/flight_report.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench COMMAND [flags]\n"
            "\n"
            "Benchmarks distributed data-parallel training strategies on MNIST.\n"
            "\n"
            "commands:\n"
            "  train     train under one strategy and write a JSON report\n"
            "  sweep     run a matrix of strategies x replicas x scaling, write scaling.json\n"
            "  compare   compare two reports or sweeps; exit 1 on a regression (CI gate)\n"
            "  predict   extrapolate a report to 8..512 replicas with the alpha-beta model\n"
            "  info      what this build has: version, commit, backends, library versions\n"
            "\n"
            "  --version   version, git commit and the backends compiled in\n"
            "\n"
            "strategies:\n");
    for (int i = 0; i < sb_strategy_count(); i++)
        fprintf(out, "  %-9s %s\n", sb_strategy_at(i)->name, sb_strategy_at(i)->summary);
    fprintf(out, "\n`stratbench COMMAND --help` shows a command's flags and defaults.\n"
                 "\n");
    sb_train_opts_usage(out);
}

#if defined(__SANITIZE_ADDRESS__)
/* The address sanitizer build (./configure.py --sanitize=address,...):
 * defaults that make an MPI run clean without any LSAN_OPTIONS, as a user
 * runs it. Open MPI and its components allocate at start-up and never free
 * (the same list as configure.py's LSAN_SUPPRESSIONS, which `ninja test`
 * passes as a file). The suppressions match only on a full stack: with the
 * default fast unwinder a leak's stack stops at the first frame without a
 * frame pointer, inside a component Open MPI has already unloaded
 * ("<unknown module>"), so the slow unwinder is the default here. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libhwloc.so\n"
           "leak:libevent\nleak:libpmix.so\nleak:mca_\nleak:libucp\nleak:libucs\n"
           "leak:libfabric\nleak:__pthread_getattr_np\n";
}
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "fast_unwind_on_malloc=0:print_suppressions=0";
}
#endif

/* Prints the error line of `st` once: "stratbench: <message>". */
static void report_error(sb_status st, int rank, int world_size)
{
    const char *msg = sb_error_message();
    if (world_size > 1)
        fprintf(stderr, "stratbench: rank %d: %s\n", rank, *msg ? msg : sb_status_name(st));
    else
        fprintf(stderr, "stratbench: %s\n", *msg ? msg : sb_status_name(st));
}

/* Ends a run that failed during training (st: exit status 1 or 130) the
 * way docs/faults.md describes: collects the fault record over the
 * watchdog's side channel (every rank that can still run answers with its
 * flight recorder; a timeout has collected it already), and the reporting
 * rank writes the flight-recorder file, prints one line naming it and ends
 * the whole job. Other ranks wait quietly to be ended. Returns the exit
 * status (only without MPI, or if MPI_Abort returns). */
static int end_failed(struct sb_job *job, const struct sb_config *cfg, sb_status st)
{
    int code = sb_status_exit_code(st);
    char message[1024];
    int sig = sb_interrupted();
    /* Another rank reports (or has reported) this fault: end quietly. */
    int quiet = !sb_watchdog_fault() && sb_watchdog_check_followed();
    enum sb_fault_reason why = st == SB_ERR_INTERRUPTED ? SB_FAULT_SIGNAL : SB_FAULT_FAILURE;
    int reporter = !quiet && sb_watchdog_collect(why);
    char missing[512] = "";
    int n_missing = reporter ? sb_watchdog_missing(missing, sizeof missing) : 0;
    if (st != SB_ERR_INTERRUPTED)
        snprintf(message, sizeof message, "%s", *sb_error_message() ? sb_error_message()
                                                                    : sb_status_name(st));
    else if (job->mpi && sb_interrupt_sender() == (int)getppid() && n_missing)
        /* Open MPI ends every rank this way when one of them died. */
        snprintf(message, sizeof message, "mpirun ended the job (%s): %s did not respond "
                 "(killed or stopped: mpirun's message names the signal)",
                 sb_signal_name(sig), missing);
    else if (job->mpi && sb_interrupt_sender() == (int)getppid())
        snprintf(message, sizeof message, "interrupted (%s from mpirun)", sb_signal_name(sig));
    else
        snprintf(message, sizeof message, "interrupted (%s)", sb_signal_name(sig ? sig : 2));
    if (!reporter) {
        /* The reporting rank prints and ends the job; if it cannot, end it here. */
        sb_watchdog_linger(10.0);
        sb_job_abort(job, code);
        sb_job_finish(job);
        return code;
    }
    const struct sb_fault *f = sb_watchdog_fault();
    char path[PATH_MAX] = "";
    int write = f && f->ranks && (job->size > 1 || f->ranks[0].n_calls > 0);
    if (write) {
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
    sb_job_abort(job, code);
    sb_job_finish(job);
    return code;
}

/* A SHA256SUMS beside the data that does not list every file loaded:
 * those are not checked, which the user should know. */
static void warn_unchecked(const struct sb_config *cfg, const struct sb_mnist *data)
{
    if (data->unchecked[0])
        fprintf(stderr, "stratbench: warning: %s/SHA256SUMS does not list %s: not checked\n",
                cfg->data_dir, data->unchecked);
}

static int cmd_train(int argc, char **argv, int full_argc, char **full_argv)
{
    struct sb_launcher launch;
    sb_launcher_detect(&launch);
    struct sb_train_opts opts;
    sb_status st = sb_train_opts_parse(&opts, argc, argv);
    if (st) {
        if (launch.task_rank == 0) report_error(st, 0, 1); /* every rank parses; one says it */
        return sb_status_exit_code(st);
    }
    if (opts.help) {
        sb_train_opts_usage(stdout);
        return 0;
    }
    struct sb_config *cfg = &opts.cfg;
    sb_interrupt_install();
    sb_watchdog_set_timeout(cfg->timeout_s);
    const struct sb_strategy_ops *ops = cfg->strategy_ops;
    /* Before MPI_Init: tasks that cannot form one MPI job are refused here. */
    st = sb_launcher_check(&launch, ops->uses_mpi, cfg->strategy);
    if (st) {
        if (launch.task_rank == 0) report_error(st, 0, 1);
        return sb_status_exit_code(st);
    }
    /* An srun step without PMIx (one task) is no MPI launcher: self-launch. */
    int under_launcher = sb_job_under_launcher() &&
                         !(launch.kind == SB_LAUNCHER_SRUN && !launch.pmix);
    struct sb_mnist data = {0};

    if (ops->uses_mpi && !under_launcher) {
        /* Check the input here, where an error is one clear line, before
         * starting a job of many processes. */
        st = sb_train_check_outputs(cfg);
        /* Memory: every rank is on this host unless $STRATBENCH_MPIRUN
         * (a hostfile) spreads them, then each host holds at least one. */
        int np_all = ops->processes(cfg);
        if (!st) st = sb_mem_check(cfg, np_all, getenv("STRATBENCH_MPIRUN") ? 1 : np_all);
        if (!st) st = sb_mnist_load(cfg->data_dir, &data);
        if (!st) warn_unchecked(cfg, &data);
        if (!st) st = sb_train_check_data(cfg, &data);
        sb_mnist_free(&data);
        /* Inside a Slurm allocation (sbatch -n N), use its N tasks unless
         * --replicas says otherwise; the ranks take replicas from the world. */
        int np = !opts.replicas_given && launch.slurm_tasks > 1 ? launch.slurm_tasks
                                                                : ops->processes(cfg);
        int code = 1;
        const char *outputs[] = {cfg->report_path, cfg->trace_path, cfg->mllog_path,
                                 cfg->save_params_path};
        struct sb_watch_plan plan = {.np = np, .timeout_s = cfg->timeout_s,
                                     .report = cfg->report_path, .outputs = outputs,
                                     .n_outputs = 4};
        if (!st) st = sb_job_relaunch_under_mpirun(np, full_argc, full_argv, &plan, &code);
        if (!st) return code;
        report_error(st, 0, 1);
        return sb_status_exit_code(st);
    }
    /* Full links (btl_tcp_links) and yielding when oversubscribed, unless
     * the user chose: before MPI_Init, which reads them. */
    if (ops->uses_mpi) sb_launcher_tune_transport(&launch);

    /* A rank of a job stratbench watches: dies with its launcher, says it
     * started (job/control.h). */
    if (ops->uses_mpi) {
        sb_control_started(launch.task_rank);
        sb_test_fault_stop("stop-startup", launch.task_rank);
    }
    struct sb_job job;
    st = sb_job_init(&job, &full_argc, &full_argv, ops->uses_mpi);
    if (st) {
        report_error(st, 0, 1);
        return sb_status_exit_code(st);
    }
    if (ops->uses_mpi && launch.tasks > 1 && job.size != launch.tasks) {
        /* A launcher whose tasks did not meet in one MPI world. */
        st = sb_error(SB_ERR_USAGE, "%s started %d tasks but each sees an MPI world of %d; use "
                      "srun --mpi=pmix (or mpirun)", sb_launcher_name(launch.kind), launch.tasks,
                      job.size);
        if (launch.task_rank == 0) report_error(st, 0, 1);
        sb_job_finish(&job);
        return sb_status_exit_code(st);
    }
    /* Collective on every rank, whatever the checks below say. */
    st = sb_watchdog_start(job.mpi ? job.world : NULL);
    if (!st && ops->uses_mpi) st = sb_strategy_fit_world(ops, cfg, job.size, opts.replicas_given);
    if (!st && ops->uses_mpi && !cfg->backend->host_memory) /* NCCL: one GPU per rank */
        st = sb_cuda_check_rank_placement(cfg->comm_entry->gpu_per_member, job.local_size,
                                          sb_cuda_device_count());
    if (!st && job.rank == 0) st = sb_train_check_outputs(cfg); /* rank 0 writes them */
    /* The watching parent checked the memory of the whole job already. */
    if (!st && !sb_control_on()) st = sb_mem_check(cfg, job.size, job.local_size);
    if (!st) st = sb_mnist_load(cfg->data_dir, &data);
    /* One warning: the watching parent gave it, else rank 0. */
    if (!st && job.rank == 0 && !sb_control_on()) warn_unchecked(cfg, &data);
    if (!st) st = sb_train_check_data(cfg, &data);
    int first_failed;
    int code = sb_job_agree(&job, sb_status_exit_code(st), &first_failed);
    if (code) {
        if (st && job.rank == first_failed) report_error(st, job.rank, 1);
        sb_mnist_free(&data);
        sb_watchdog_stop();
        sb_job_finish(&job);
        return code;
    }

    if (job.mpi) sb_control_joined(job.rank);
    st = sb_harness_train(cfg, &data, &job, full_argc, full_argv);
    sb_mnist_free(&data);
    if (st == SB_ERR_DIVERGED) { /* every rank agreed to stop: no abort, one line */
        if (job.rank == 0) report_error(st, 0, 1);
        sb_job_finish(&job);
        return sb_status_exit_code(st);
    }
    if (st && sb_status_exit_code(st) != 2) return end_failed(&job, cfg, st);
    if (st) {
        report_error(st, job.rank, job.size);
        sb_job_abort(&job, sb_status_exit_code(st));
        sb_watchdog_stop();
        sb_job_finish(&job);
        return sb_status_exit_code(st);
    }
    sb_watchdog_stop();
    int rank = job.rank, mpi = job.mpi;
    if (mpi) {
        sb_control_done(rank);
        sb_test_fault_stop("stop-finalize", rank);
        sb_test_fault_kill("kill-finalize", rank);
    }
    sb_job_finish(&job);
    if (mpi) sb_control_finished(rank);
    return 0;
}

/* The exit status after a command returned `code`: standard output that
 * could not be written (a closed pipe, a full disk: /dev/full) is reported
 * on stderr and turns a 0 into 1 (docs/faults.md); the run's files stay. */
static int check_stdout(int code)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return code;
    int err = errno;
    fprintf(stderr, "stratbench: standard output: %s (its lines were lost%s)\n",
            err ? strerror(err) : "write error", code == 0 ? "; the run completed" : "");
    return code ? code : 1;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    /* A closed stdout (`| head -1`) must not kill a run: writes fail with
     * EPIPE instead, and check_stdout says so at the end. */
    signal(SIGPIPE, SIG_IGN);
    return check_stdout(dispatch(argc, argv));
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 1, argv + 1, argc, argv);
    if (strcmp(cmd, "info") == 0) return sb_info_main(argc - 1, argv + 1);
    if (strcmp(cmd, "sweep") == 0) return sb_sweep_main(argc - 1, argv + 1);
    if (strcmp(cmd, "compare") == 0) return sb_compare_main(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return sb_predict_main(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        sb_info_version(stdout);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    static const struct option commands[] = {{"train", 0, NULL, 0},   {"sweep", 0, NULL, 0},
                                             {"compare", 0, NULL, 0}, {"predict", 0, NULL, 0},
                                             {"info", 0, NULL, 0},    {"help", 0, NULL, 0},
                                             {"version", 0, NULL, 0}, {NULL, 0, NULL, 0}};
    const char *meant = sb_cli_suggest(commands, cmd);
    if (meant && cmd[0] == '-')
        fprintf(stderr, "stratbench: unknown flag '%s' (did you mean --%s? see stratbench --help)\n",
                cmd, meant);
    else if (meant)
        fprintf(stderr, "stratbench: unknown command '%s' (did you mean %s? see stratbench --help)\n",
                cmd, meant);
    else if (cmd[0] == '-')
        fprintf(stderr, "stratbench: unknown flag '%s' (see stratbench --help)\n", cmd);
    else
        fprintf(stderr, "stratbench: unknown command '%s' (expected train, sweep, compare, predict "
                        "or info; see stratbench --help)\n", cmd);
    return 2;
}
