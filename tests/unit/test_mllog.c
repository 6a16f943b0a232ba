/* Unit tests for the :::MLLOG writer (src/report/mllog.c): numbers as
 * Python's json.dumps(float(x)) writes them (expected strings produced by
 * CPython 3.11), string escaping, the line layout and member order of
 * mlcommons' mllog.py, a log that is off, and the atomic write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/mllog.h"

static void test_numbers_as_python_floats(void **state)
{
    (void)state;
    static const struct {
        double x;
        const char *text;
    } cases[] = {
        {60000, "60000.0"}, {0.03, "0.03"}, {1e-05, "1e-05"}, {1.5e16, "1.5e+16"},
        {1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {128, "128.0"}, {0.9143, "0.9143"},
        {-0.5, "-0.5"}, {123456789.125, "123456789.125"}, {1e-4, "0.0001"},
        {0.00012, "0.00012"}, {1.0 / 3, "0.3333333333333333"}, {0, "0.0"},
        {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        assert_string_equal(sb_mllog_num(buf, cases[i].x), cases[i].text);
    assert_string_equal(sb_mllog_num(buf, NAN), "NaN");
    assert_string_equal(sb_mllog_num(buf, -INFINITY), "-Infinity");
}

static void test_strings_are_escaped(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(sb_mllog_str(buf, sizeof buf, "a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    assert_string_equal(sb_mllog_str(buf, 8, "truncated text"), "\"\"");
}

static void test_line_layout(void **state)
{
    (void)state;
    struct sb_mllog log;
    sb_mllog_init(&log, 1);
    char v[32];
    sb_mllog_add(&log, "f.c", 7, SB_MLLOG_POINT, "eval_accuracy", sb_mllog_num(v, 0.5),
                 "\"epoch_num\": 3");
    sb_mllog_add(&log, "f.c", 8, SB_MLLOG_END, "run_stop", NULL, "\"status\": \"success\"");
    assert_false(log.fail);
    long long t = 0;
    char rest[256];
    assert_int_equal(sscanf(log.text, ":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, %255[^\n]",
                            &t, rest), 2);
    assert_true(t > 1600000000000LL); /* Unix time in ms, after 2020 */
    assert_string_equal(rest, "\"event_type\": \"POINT_IN_TIME\", \"key\": \"eval_accuracy\", "
                              "\"value\": 0.5, \"metadata\": {\"file\": \"f.c\", \"lineno\": 7, "
                              "\"epoch_num\": 3}}");
    const char *second = strchr(log.text, '\n') + 1;
    assert_non_null(strstr(second, "\"event_type\": \"INTERVAL_END\", \"key\": \"run_stop\", "
                                   "\"value\": null, \"metadata\": {\"file\": \"f.c\", \"lineno\": "
                                   "8, \"status\": \"success\"}}\n"));
    sb_mllog_free(&log);
}

static void test_off_writes_nothing(void **state)
{
    (void)state;
    struct sb_mllog log;
    sb_mllog_init(&log, 0);
    sb_mllog_add(&log, "f.c", 1, SB_MLLOG_START, "run_start", NULL, NULL);
    assert_null(log.text);
    const char *path = "/tmp/sb-mllog-off-test";
    unlink(path);
    assert_int_equal(sb_mllog_write(&log, path), SB_OK);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_write_is_the_lines(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb-mllog-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/run.log", dir);
    struct sb_mllog log;
    sb_mllog_init(&log, 1);
    for (int i = 0; i < 500; i++) /* grows the buffer several times */
        sb_mllog_add(&log, "f.c", i, SB_MLLOG_POINT, "seed", "42.0", NULL);
    assert_int_equal(sb_mllog_write(&log, path), SB_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        assert_true(strncmp(line, ":::MLLOG {", 10) == 0);
        n++;
    }
    fclose(f);
    assert_int_equal(n, 500);
    sb_mllog_free(&log);
    /* A missing folder is created; a regular file in the way is an error. */
    char blocker[320];
    snprintf(blocker, sizeof blocker, "%s/run.log", dir);
    snprintf(path, sizeof path, "%s/run.log/sub/run.log", dir);
    sb_mllog_init(&log, 1);
    sb_mllog_add(&log, "f.c", 1, SB_MLLOG_POINT, "seed", "42.0", NULL);
    assert_int_equal(sb_mllog_write(&log, path), SB_ERR_IO);
    assert_non_null(strstr(sb_error_message(), "mllog"));
    snprintf(path, sizeof path, "%s/missing/run.log", dir);
    assert_int_equal(sb_mllog_write(&log, path), SB_OK);
    sb_mllog_free(&log);
    unlink(path);
    snprintf(path, sizeof path, "%s/missing", dir);
    rmdir(path);
    unlink(blocker);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_as_python_floats),
        cmocka_unit_test(test_strings_are_escaped),
        cmocka_unit_test(test_line_layout),
        cmocka_unit_test(test_off_writes_nothing),
        cmocka_unit_test(test_write_is_the_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
