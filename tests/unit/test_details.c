/* Unit tests for a strategy's details (src/core/details.c): entries kept in
 * order, a list capped at SB_DETAIL_VALUES_MAX values, a flag kept as a
 * bool, and an entry beyond SB_DETAILS_MAX counted in `dropped` (the report
 * refuses to be written then), never silently lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/details.h"

static void test_kept_then_dropped(void **state)
{
    (void)state;
    struct sb_strategy_details *d = calloc(1, sizeof *d);
    assert_non_null(d);
    double many[SB_DETAIL_VALUES_MAX + 5];
    for (int i = 0; i < SB_DETAIL_VALUES_MAX + 5; i++) many[i] = i;
    sb_details_add(d, "list", 1, many, SB_DETAIL_VALUES_MAX + 5);
    assert_int_equal(d->item[0].count, SB_DETAIL_VALUES_MAX);
    sb_details_add_bool(d, "flag", 1);
    assert_true(d->item[1].is_bool);
    for (int i = 2; i < SB_DETAILS_MAX; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        double v = i;
        sb_details_add(d, key, 0, &v, 1);
    }
    assert_int_equal(d->n, SB_DETAILS_MAX);
    assert_int_equal(d->dropped, 0);
    double v = 1;
    sb_details_add(d, "one_too_many", 0, &v, 1);
    sb_details_add_bool(d, "and_another", 0);
    assert_int_equal(d->n, SB_DETAILS_MAX);
    assert_int_equal(d->dropped, 2);
    char last[16];
    snprintf(last, sizeof last, "k%d", SB_DETAILS_MAX - 1);
    assert_string_equal(d->item[SB_DETAILS_MAX - 1].key, last);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kept_then_dropped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
