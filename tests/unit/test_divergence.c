/* sb_divergence_check (harness/divergence.h): the loss rule (last epoch's
 * train loss above 10 x ln(C)) at and just past its threshold, the
 * not-learning rule (accuracy <= 2/C) only after a full epoch of at least
 * SB_NOT_LEARNING_MIN_STEPS steps, and what a
 * flagged record carries: the reason, a warning, a null time to accuracy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "harness/divergence.h"

/* A record of one epoch of `steps` steps with this loss and accuracy, which
 * reached its target after 3 s. */
static void one_epoch(struct sb_run_record *rec, struct sb_epoch_record *e, double loss,
                      double accuracy, long steps)
{
    memset(rec, 0, sizeof *rec);
    memset(e, 0, sizeof *e);
    e->epoch = 1;
    e->train_loss = loss;
    e->test_accuracy = accuracy;
    rec->epochs = e;
    rec->n_epochs = 1;
    rec->final_test_accuracy = accuracy;
    rec->steps_total = steps;
    rec->time_to_accuracy_s = 3.0;
}

static void test_loss_rule_at_and_past_its_threshold(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_epoch_record e;
    double limit = SB_DIVERGED_LOSS_FACTOR * log(10.0); /* 23.03 */
    one_epoch(&rec, &e, limit, 0.9, 30);
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 0);
    assert_string_equal(rec.diverged, "");
    assert_int_equal(rec.n_warnings, 0);
    assert_true(rec.time_to_accuracy_s == 3.0);
    one_epoch(&rec, &e, limit * 1.01, 0.9, 30);
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 1);
    assert_non_null(strstr(rec.diverged, "diverged: train loss 23.3 > 10 x ln(10) = 23.0"));
    assert_int_equal(rec.n_warnings, 1);
    assert_string_equal(rec.warnings[0], rec.diverged);
    assert_true(rec.time_to_accuracy_s < 0);
}

static void test_accuracy_rule_needs_a_full_epoch(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_epoch_record e;
    one_epoch(&rec, &e, 2.31, 0.12, 936); /* one step short of the epoch */
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 0);
    one_epoch(&rec, &e, 2.31, 0.2, 937); /* exactly twice chance, a full epoch */
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 1);
    assert_non_null(strstr(rec.diverged, "not learning: test accuracy 20.0% after 937 steps"));
    one_epoch(&rec, &e, 2.0, 0.2001, 937);
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 0);
    /* An epoch of one step (batch 40000) is too short to judge... */
    one_epoch(&rec, &e, 2.3, 0.1, 1);
    assert_int_equal(sb_divergence_check(&rec, 10, 1), 0);
    one_epoch(&rec, &e, 2.3, 0.1, SB_NOT_LEARNING_MIN_STEPS - 1);
    assert_int_equal(sb_divergence_check(&rec, 10, 1), 0);
    /* ... until it has SB_NOT_LEARNING_MIN_STEPS steps. */
    one_epoch(&rec, &e, 2.3, 0.1, SB_NOT_LEARNING_MIN_STEPS);
    assert_int_equal(sb_divergence_check(&rec, 10, 1), 1);
}

static void test_warning_list_full_keeps_the_reason(void **state)
{
    (void)state;
    struct sb_run_record rec;
    struct sb_epoch_record e;
    one_epoch(&rec, &e, 1e9, 0.1, 30);
    rec.n_warnings = SB_REPORT_MAX_WARNINGS;
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 1);
    assert_int_equal(rec.n_warnings, SB_REPORT_MAX_WARNINGS);
    assert_non_null(strstr(rec.diverged, "diverged: train loss 1e+09"));
}

static void test_no_epoch_is_no_verdict(void **state)
{
    (void)state;
    struct sb_run_record rec;
    memset(&rec, 0, sizeof rec);
    assert_int_equal(sb_divergence_check(&rec, 10, 937), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_rule_at_and_past_its_threshold),
        cmocka_unit_test(test_accuracy_rule_needs_a_full_epoch),
        cmocka_unit_test(test_warning_list_full_keeps_the_reason),
        cmocka_unit_test(test_no_epoch_is_no_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
