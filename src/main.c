/* stratbench: benchmark distributed data-parallel training strategies.
 *
 * The command line: `stratbench train | sweep | compare | info`. Only this file decides how
 * the process (and the MPI job) ends: every other layer returns a status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "cli/compare.h"
#include "cli/predict.h"
#include "cli/sweep.h"
#include "cli/train_opts.h"
#include "core/launcher.h"
#include "data/mnist.h"
#include "harness/harness.h"
#include "harness/job.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#ifndef SB_VERSION
#define SB_VERSION "0.1.0"
#endif

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
            "  info      what this build supports\n"
            "\n"
            "strategies:\n");
    for (int i = 0; i < sb_strategy_count(); i++)
        fprintf(out, "  %-9s %s\n", sb_strategy_at(i)->name, sb_strategy_at(i)->summary);
    fprintf(out, "\n`stratbench COMMAND --help` shows a command's flags and defaults.\n"
                 "\n");
    sb_train_opts_usage(out);
}

/* Prints the error line of `st` once: "stratbench: <message>". */
static void report_error(sb_status st, int rank, int world_size)
{
    const char *msg = sb_error_message();
    if (world_size > 1)
        fprintf(stderr, "stratbench: rank %d: %s\n", rank, *msg ? msg : sb_status_name(st));
    else
        fprintf(stderr, "stratbench: %s\n", *msg ? msg : sb_status_name(st));
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
    const struct sb_strategy_ops *ops = sb_strategy_find(cfg->strategy);
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
        if (!st) st = sb_mnist_load(cfg->data_dir, &data);
        if (!st) st = sb_train_check_data(cfg, &data);
        sb_mnist_free(&data);
        /* Inside a Slurm allocation (sbatch -n N), use its N tasks unless
         * --replicas says otherwise; the ranks take replicas from the world. */
        int np = !opts.replicas_given && launch.slurm_tasks > 1 ? launch.slurm_tasks
                                                                : ops->processes(cfg);
        if (!st) st = sb_job_relaunch_under_mpirun(np, full_argc, full_argv);
        report_error(st, 0, 1);
        return sb_status_exit_code(st);
    }
    if (ops->uses_mpi) sb_launcher_yield_if_oversubscribed(&launch);

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
    if (ops->uses_mpi) st = sb_strategy_fit_world(ops, cfg, job.size, opts.replicas_given);
    if (!st && ops->uses_mpi && strcmp(cfg->device, "cuda") == 0) /* NCCL: one GPU per rank */
        st = sb_cuda_check_rank_placement(cfg->comm, job.local_size, sb_cuda_device_count());
    if (!st && job.rank == 0) st = sb_train_check_outputs(cfg); /* rank 0 writes them */
    if (!st) st = sb_mnist_load(cfg->data_dir, &data);
    if (!st) st = sb_train_check_data(cfg, &data);
    int first_failed;
    int code = sb_job_agree(&job, sb_status_exit_code(st), &first_failed);
    if (code) {
        if (st && job.rank == first_failed) report_error(st, job.rank, 1);
        sb_mnist_free(&data);
        sb_job_finish(&job);
        return code;
    }

    st = sb_harness_train(cfg, &data, &job, full_argc, full_argv);
    sb_mnist_free(&data);
    if (st == SB_ERR_DIVERGED) { /* every rank agreed to stop: no abort, one line */
        if (job.rank == 0) report_error(st, 0, 1);
        sb_job_finish(&job);
        return sb_status_exit_code(st);
    }
    if (st) {
        report_error(st, job.rank, job.size);
        sb_job_abort(&job, sb_status_exit_code(st));
        sb_job_finish(&job);
        return sb_status_exit_code(st);
    }
    sb_job_finish(&job);
    return 0;
}

static int cmd_info(void)
{
    printf("stratbench %s\n", SB_VERSION);
    printf("strategies: %s\n", sb_strategy_names());
    printf("workloads:  %s\n", sb_workload_names());
    int gpus = sb_cuda_device_count();
    printf("devices:    cpu%s\n", gpus > 0 ? ", cuda" : "");
    printf("cuda:       %d device%s", gpus, gpus == 1 ? "" : "s");
    for (int d = 0; d < gpus; d++) {
        char name[256];
        sb_cuda_device_name(d, name, sizeof name);
        printf("%s %d: %s", d == 0 ? ":" : ";", d, name);
    }
    printf("\n");
    printf("blas:       %s\n", sb_backend_cpu_blas_version());
#ifdef SB_HAVE_NVTX
    printf("nvtx:       yes (domain stratbench)\n");
#else
    printf("nvtx:       no\n");
#endif
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 1, argv + 1, argc, argv);
    if (strcmp(cmd, "info") == 0) return cmd_info();
    if (strcmp(cmd, "sweep") == 0) return sb_sweep_main(argc - 1, argv + 1);
    if (strcmp(cmd, "compare") == 0) return sb_compare_main(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return sb_predict_main(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0) {
        printf("stratbench %s\n", SB_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "stratbench: unknown command '%s' (expected train, sweep, compare, predict or info; see "
                    "stratbench --help)\n", cmd);
    return 2;
}
