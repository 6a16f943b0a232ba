/* Unit test of the one agreement rule, sb_job_agree (src/job/job.c), over a
 * real MPI job of 3 ranks: when ranks fail a stage each ran on its own,
 * every rank returns an error together with the largest exit code, the
 * failing ranks keep their own message, the others name the lowest failed
 * rank, and every rank learns that rank; when none fails, all return SB_OK.
 * Starts itself under `mpirun -n 3`; exit 0 pass, 1 fail, 77 skip (no
 * mpirun). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "job/job.h"

static int failures;

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            failures++;                                                            \
            fprintf(stderr, "rank %d: %s:%d: ", job.rank, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
        }                                                                          \
    } while (0)

static struct sb_job job;

/* Every rank passes `mine`; checks the status, message and first rank. */
static void expect(sb_status mine, sb_status want, const char *message, int want_first)
{
    int first = -2;
    sb_status got = sb_job_agree(&job, mine, "its set-up", &first);
    CHECK(got == want, "status %s, expected %s", sb_status_name(got), sb_status_name(want));
    CHECK(first == want_first, "first failed %d, expected %d", first, want_first);
    if (message)
        CHECK(strstr(sb_error_message(), message), "message '%s' lacks '%s'", sb_error_message(),
              message);
}

static int run_checks(int argc, char **argv)
{
    if (sb_job_init(&job, &argc, &argv, 1) != SB_OK || job.size != 3) {
        fprintf(stderr, "needs an MPI job of 3 ranks\n");
        return 1;
    }
    /* None fails. */
    expect(SB_OK, SB_OK, NULL, -1);
    /* Rank 1 fails (exit 1): it keeps its own line, the others name it. */
    sb_status mine = job.rank == 1 ? sb_error(SB_ERR_DEVICE, "cudaSetDevice: rank 1 broke") : SB_OK;
    if (job.rank == 1) expect(mine, SB_ERR_DEVICE, "rank 1 broke", 1);
    else expect(mine, SB_ERR_COMM, "rank 1 failed its set-up", 1);
    /* Ranks 1 (exit 1) and 2 (exit 2) fail: every rank exits 2, rank 1 is
     * the one that prints, each failing rank keeps its message. */
    mine = job.rank == 1   ? sb_error(SB_ERR_DEVICE, "rank 1 broke again")
           : job.rank == 2 ? sb_error(SB_ERR_USAGE, "--flag: rank 2's bad value")
                           : SB_OK;
    if (job.rank == 0) expect(mine, SB_ERR_USAGE, "rank 1 failed its set-up", 1);
    if (job.rank == 1) expect(mine, SB_ERR_USAGE, "rank 1 broke again", 1);
    if (job.rank == 2) expect(mine, SB_ERR_USAGE, "rank 2's bad value", 1);
    int rank = job.rank;
    sb_job_finish(&job);
    if (rank == 0) printf("%s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_checks(argc, argv);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 120 mpirun -n 3 --oversubscribe --bind-to none '%s'",
             argv[0]);
    return system(cmd) == 0 ? 0 : 1;
}
