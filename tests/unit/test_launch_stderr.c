/* Unit tests for what the self-launch watcher reads from mpirun's stderr
 * (src/job/launch_stderr.c): the facts kept from Open MPI's framed banners (a
 * rank killed by a signal, a lost daemon), its internal lines counted and the
 * first ORTE_ERROR_LOG kept, the ranks' control lines and stratbench lines, and
 * lines read from a pipe in pieces, the unfinished last one taken at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "job/control.h"
#include "job/launch_stderr.h"

#define FRAME "--------------------------------------------------------------------------\n"

static void test_banners_noise_and_rank_lines(void **state)
{
    (void)state;
    struct sb_launch_stderr s;
    assert_int_equal(sb_launch_stderr_init(&s, 3), SB_OK);
    assert_int_equal(s.dead_rank, -1);
    /* A killed rank, in mpirun's framed banner. */
    sb_launch_stderr_take(&s, FRAME);
    assert_true(s.in_block);
    sb_launch_stderr_take(&s, "mpirun noticed that process rank 2 with PID 4242 on node hostb "
                              "exited on signal 9 (Killed).\n");
    assert_int_equal(s.dead_rank, -1); /* kept when the banner ends */
    sb_launch_stderr_take(&s, FRAME);
    assert_false(s.in_block);
    assert_int_equal(s.dead_rank, 2);
    assert_int_equal(s.dead_signal, 9);
    assert_string_equal(s.dead_host, "hostb");
    /* A lost daemon. */
    sb_launch_stderr_take(&s, FRAME);
    sb_launch_stderr_take(&s, "ORTE has lost communication with a remote daemon.\n");
    sb_launch_stderr_take(&s, "  Remote daemon: [[1234,0],1] on node hostc\n");
    sb_launch_stderr_take(&s, FRAME);
    assert_string_equal(s.lost_host, "hostc");
    /* Open MPI's own lines: counted, the first ORTE_ERROR_LOG kept. */
    sb_launch_stderr_take(&s, "[hosta:01234] [[1,0],0] ORTE_ERROR_LOG: Out of resource in "
                              "file base.c at line 7\n");
    sb_launch_stderr_take(&s, "[hosta:01234] [[1,0],0] ORTE_ERROR_LOG: Not found in file "
                              "x.c at line 9\n");
    sb_launch_stderr_take(&s, "Killed\n");
    assert_int_equal(s.noise, 3);
    assert_string_equal(s.mpi_error, "Out of resource");
    assert_true(s.fatal_at > 0);
    /* Control lines advance the ranks' progress, and are not kept. */
    sb_launch_stderr_take(&s, SB_CONTROL_PREFIX "started 0 hosta 42\n");
    sb_launch_stderr_take(&s, SB_CONTROL_PREFIX "started 1 hostb 43\n");
    assert_int_equal(s.rp.n_started, 2);
    assert_int_equal((int)s.len, 0);
    /* A rank's stratbench line is kept (in order), its flight record noted. */
    sb_launch_stderr_take(&s, "stratbench: rank 1: the all-reduce stalled; flight recorder: "
                              "/tmp/f.json\n");
    assert_string_equal(s.flight, "flight recorder: /tmp/f.json");
    assert_non_null(strstr(s.lines, "the all-reduce stalled"));
    sb_launch_stderr_free(&s);
}

static void test_pipe_lines_and_the_unfinished_last(void **state)
{
    (void)state;
    struct sb_launch_stderr s;
    assert_int_equal(sb_launch_stderr_init(&s, 1), SB_OK);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const char *text = "stratbench: first\nstratbench: sec";
    assert_int_equal(write(fd[1], text, strlen(text)), (int)strlen(text));
    assert_int_equal(sb_launch_stderr_read(&s, fd[0]), 1);
    assert_string_equal(s.lines, "stratbench: first\n");
    assert_int_equal((int)s.fill, (int)strlen("stratbench: sec"));
    assert_int_equal(write(fd[1], "ond", 3), 3);
    close(fd[1]);
    assert_int_equal(sb_launch_stderr_read(&s, fd[0]), 1);
    assert_int_equal(sb_launch_stderr_read(&s, fd[0]), 0); /* EOF */
    close(fd[0]);
    sb_launch_stderr_end(&s);
    assert_string_equal(s.lines, "stratbench: first\nstratbench: second");
    sb_launch_stderr_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_banners_noise_and_rank_lines),
        cmocka_unit_test(test_pipe_lines_and_the_unfinished_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
