/* stratbench: benchmark distributed data-parallel training strategies.
 *
 * The command line: `stratbench train | sweep | compare | predict | schedule | info`, dispatched to
 * src/cli. Only this file ends the process and the MPI job: every other layer returns a
 * status, and `train` an outcome (cli/train.h) that end_train carries out. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/compare.h"
#include "cli/info.h"
#include "cli/predict.h"
#include "cli/schedule.h"
#include "cli/suggest.h"
#include "cli/sweep.h"
#include "cli/train.h"
#include "cli/train_opts.h"
#include "comm/watchdog.h"
#include "job/control.h"
#include "job/job.h"
#include "strategies/strategy.h"

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
            "  schedule  print a pipeline schedule's stage x slot grid, bubble and memory\n"
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

/* Ends a `train` run as its outcome says: the whole MPI job with MPI_Abort
 * (a failure or fault on a rank; returns only without MPI), the watchdog
 * after that where it still runs, MPI_Finalize of a started job, and the
 * watcher's "finished" line (job/control.h). Returns the exit status. */
static int end_train(struct sb_train_outcome *out)
{
    if (out->abort) sb_job_abort(&out->job, out->code);
    if (out->stop_watchdog) sb_watchdog_stop();
    if (out->finish) sb_job_finish(&out->job);
    if (out->control_rank >= 0) sb_control_finished(out->control_rank);
    return out->code;
}

/* `stratbench train` (cli/train.c) runs the job and says how to end it. */
static int cmd_train(int argc, char **argv, int full_argc, char **full_argv)
{
    struct sb_train_outcome out;
    sb_train_main(argc, argv, full_argc, full_argv, &out);
    return end_train(&out);
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
    if (strcmp(cmd, "schedule") == 0) return sb_schedule_main(argc - 1, argv + 1);
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
                                             {"info", 0, NULL, 0},    {"schedule", 0, NULL, 0},
                                             {"help", 0, NULL, 0},    {"version", 0, NULL, 0},
                                             {NULL, 0, NULL, 0}};
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
        fprintf(stderr, "stratbench: unknown command '%s' (expected train, sweep, compare, predict, "
                        "schedule or info; see stratbench --help)\n", cmd);
    return 2;
}
