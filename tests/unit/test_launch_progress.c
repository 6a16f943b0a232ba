/* Unit tests for the self-launch watcher's bookkeeping (src/job/launch_progress.c):
 * the ranks' control lines, what is named when a deadline passes, and the outputs a
 * failed run removes (only those written since the launch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/launch_progress.h"

static void test_control_lines_and_what_is_missing(void **state)
{
    (void)state;
    struct sb_rank_progress p;
    char out[1024];
    assert_int_equal(sb_rank_progress_init(&p, 3), SB_OK);
    sb_rank_progress_describe(&p, 0, 0, out, sizeof out);
    assert_string_equal(out, "rank 0, rank 1, rank 2 never started (0 of 3 did)");
    sb_rank_progress_line(&p, "started 0 hosta 4242");
    sb_rank_progress_line(&p, "started 2 hostb 4343");
    sb_rank_progress_line(&p, "started 7 hostb 1");  /* out of range: ignored */
    sb_rank_progress_line(&p, "nonsense");
    assert_int_equal(p.n_started, 2);
    sb_rank_progress_describe(&p, 0, 0, out, sizeof out);
    assert_string_equal(out, "rank 1 never started (2 of 3 did)");
    sb_rank_progress_line(&p, "started 1 hosta 4444");
    sb_rank_progress_line(&p, "joined 0");
    sb_rank_progress_describe(&p, 0, 0, out, sizeof out);
    assert_string_equal(out, "rank 1 (host hosta), rank 2 (host hostb) did not join the job "
                             "(MPI_Init, loading the data)");
    sb_rank_progress_line(&p, "joined 1");
    sb_rank_progress_line(&p, "joined 2");
    sb_rank_progress_line(&p, "joined 2"); /* counted once */
    assert_int_equal(p.n_joined, 3);
    sb_rank_progress_describe(&p, 0, 0, out, sizeof out);
    assert_string_equal(out, "rank 0 (host hosta), rank 1 (host hosta), rank 2 (host hostb) "
                             "were still running");
    assert_true(p.done_at == 0);
    sb_rank_progress_line(&p, "done 0");
    assert_true(p.done_at > 0);
    sb_rank_progress_line(&p, "finished 0");
    sb_rank_progress_line(&p, "finished 2");
    sb_rank_progress_describe(&p, 0, 1, out, sizeof out);
    assert_string_equal(out, "rank 1 (host hosta) did not finish (MPI_Finalize)");
    sb_rank_progress_on_host(&p, "hostb", out, sizeof out);
    assert_string_equal(out, "rank 2 ended with it");
    sb_rank_progress_on_host(&p, "nowhere", out, sizeof out);
    assert_string_equal(out, "");
    sb_rank_progress_line(&p, "finished 1");
    sb_rank_progress_describe(&p, 0, 1, out, sizeof out);
    assert_non_null(strstr(out, "every rank finished"));
    sb_rank_progress_free(&p);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_only_outputs_written_since_the_launch_are_removed(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb-progress-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char old[128], fresh[128], replaced[128], absent[128];
    snprintf(old, sizeof old, "%s/old.json", dir);
    snprintf(fresh, sizeof fresh, "%s/fresh.json", dir);
    snprintf(replaced, sizeof replaced, "%s/replaced.json", dir);
    snprintf(absent, sizeof absent, "%s/absent.json", dir);
    write_file(old, "old");
    write_file(replaced, "before");
    const char *paths[] = {old, fresh, replaced, absent, ""};
    struct sb_output_snapshot snap[5];
    sb_output_snapshot(paths, 5, snap);
    assert_false(sb_output_written(paths, 5, snap, fresh));
    write_file(fresh, "new");
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", replaced);
    write_file(tmp, "after");
    assert_int_equal(rename(tmp, replaced), 0); /* as the atomic writers do */
    assert_true(sb_output_written(paths, 5, snap, fresh));
    assert_true(sb_output_written(paths, 5, snap, replaced));
    assert_false(sb_output_written(paths, 5, snap, old));
    assert_true(sb_output_written(paths, 5, snap, "")); /* no report asked for */
    sb_output_remove_written(paths, 5, snap);
    assert_int_equal(access(old, F_OK), 0);      /* the user's file from before stays */
    assert_int_not_equal(access(fresh, F_OK), 0);
    assert_int_not_equal(access(replaced, F_OK), 0);
    unlink(old);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_lines_and_what_is_missing),
        cmocka_unit_test(test_only_outputs_written_since_the_launch_are_removed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
