/* Unit tests for sb_method_name (src/core/config.c), the one spelling of a
 * gradient method that sweep's file names, compare's labels and predict's
 * rows share: every form it returns, a compression winning over local SGD,
 * and a short buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/config.h"

static void test_forms(void **state)
{
    (void)state;
    char out[SB_METHOD_NAME_MAX];
    assert_string_equal(sb_method_name("bf16", 0, 0, out, sizeof out), "bf16");
    assert_string_equal(sb_method_name("fp16", 2, 0, out, sizeof out), "fp16"); /* rank: powersgd's */
    assert_string_equal(sb_method_name("powersgd", 2, 0, out, sizeof out), "powersgd-r2");
    assert_string_equal(sb_method_name("powersgd", 0, 0, out, sizeof out), "powersgd");
    assert_string_equal(sb_method_name("none", 0, 16, out, sizeof out), "local-sgd-16");
    assert_string_equal(sb_method_name(NULL, 0, 4, out, sizeof out), "local-sgd-4");
    assert_string_equal(sb_method_name("none", 0, 0, out, sizeof out), "none");
    assert_string_equal(sb_method_name(NULL, 0, 0, out, sizeof out), "none");
}

static void test_compression_wins_over_local_sgd(void **state)
{
    (void)state;
    char out[SB_METHOD_NAME_MAX];
    assert_string_equal(sb_method_name("powersgd", 4, 16, out, sizeof out), "powersgd-r4");
    assert_string_equal(sb_method_name("fp16", 0, 16, out, sizeof out), "fp16");
}

static void test_room(void **state)
{
    (void)state;
    char out[SB_METHOD_NAME_MAX], longest[SB_NAME_MAX];
    memset(longest, 'x', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    assert_string_equal(sb_method_name(longest, 0, 0, out, sizeof out), longest);
    assert_string_equal(sb_method_name("powersgd", 2147483647, 0, out, sizeof out),
                        "powersgd-r2147483647");
    assert_string_equal(sb_method_name("none", 0, 2147483647, out, sizeof out),
                        "local-sgd-2147483647");
    char small[5];
    assert_string_equal(sb_method_name("powersgd", 2, 0, small, sizeof small), "powe");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_compression_wins_over_local_sgd),
        cmocka_unit_test(test_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
