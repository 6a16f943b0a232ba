/* The largest point-to-point message a run sends, from its configuration
 * (sb_strategy_p2p_max_bytes; the pipeline's p2p_max_bytes op), and the TCP
 * eager limit chosen from it (job/eager_limit.h):
 *
 * - a pipeline of the mlp --hidden 1024,1024, --batch 64 in 4 micro-batches:
 *   16 samples x 1024 floats x 4 = 65,536 bytes (docs/layouts.md's
 *   dp1-tp2-pp2 m4), with and without --tp 2, and 8 micro-batches half;
 *   a cut after the input layer's 784-wide output is not the widest;
 * - every other strategy: 0 (no point-to-point message);
 * - the limit: 0 (Open MPI's default kept) up to 65,472 bytes, the message
 *   plus 64 bytes of header room rounded up to 4 KiB above. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "core/config.h"
#include "job/eager_limit.h"
#include "strategies/strategy.h"

/* The mlp --hidden h0,h1 --batch batch under ops, its options at their
 * defaults. */
static void config_of(const struct sb_strategy_ops *ops, int h0, int h1, int batch,
                      struct sb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->strategy, sizeof cfg->strategy, "%s", ops->name);
    cfg->strategy_ops = ops;
    cfg->backend = &sb_backend_cpu;
    cfg->comm_entry = sb_comm_find("mpi");
    assert_non_null(cfg->comm_entry);
    sb_strategy_options_defaults(ops, cfg);
    cfg->replicas = 1;
    cfg->batch = batch;
    snprintf(cfg->workload, sizeof cfg->workload, "mlp");
    cfg->hidden[0] = h0;
    cfg->hidden[1] = h1;
    cfg->n_hidden = 2;
}

/* The pipeline's figure for --stages stages --microbatches m --tp tp. */
static size_t pipeline_bytes(int h0, int h1, int batch, const char *stages, const char *m,
                             const char *tp)
{
    const struct sb_strategy_ops *ops = sb_strategy_find("pipeline");
    assert_non_null(ops);
    struct sb_config cfg;
    config_of(ops, h0, h1, batch, &cfg);
    assert_int_equal(sb_strategy_option_parse(ops, &cfg, "stages", stages), SB_OK);
    assert_int_equal(sb_strategy_option_parse(ops, &cfg, "microbatches", m), SB_OK);
    assert_int_equal(sb_strategy_option_parse(ops, &cfg, "tp", tp), SB_OK);
    size_t bytes = 1;
    assert_int_equal(sb_strategy_p2p_max_bytes(ops, &cfg, &bytes), SB_OK);
    return bytes;
}

static void pipeline_boundary_is_a_micro_batch_of_the_widest_cut(void **state)
{
    (void)state;
    assert_int_equal(pipeline_bytes(1024, 1024, 64, "2", "4", "1"), 16 * 1024 * 4);
    assert_int_equal(pipeline_bytes(1024, 1024, 64, "2", "4", "2"), 16 * 1024 * 4);
    assert_int_equal(pipeline_bytes(1024, 1024, 64, "2", "8", "1"), 8 * 1024 * 4);
    /* 3 stages: cuts after fc1 (h0 wide) and fc2 (h1 wide): the wider. */
    assert_int_equal(pipeline_bytes(512, 2048, 32, "3", "2", "1"), 16 * 2048 * 4);
    assert_int_equal(pipeline_bytes(2048, 512, 32, "3", "2", "1"), 16 * 2048 * 4);
}

static void other_strategies_send_none(void **state)
{
    (void)state;
    for (int i = 0; i < sb_strategy_count(); i++) {
        const struct sb_strategy_ops *ops = sb_strategy_at(i);
        if (strcmp(ops->name, "pipeline") == 0) continue;
        struct sb_config cfg;
        config_of(ops, 1024, 1024, 64, &cfg);
        size_t bytes = 1;
        assert_int_equal(sb_strategy_p2p_max_bytes(ops, &cfg, &bytes), SB_OK);
        assert_int_equal(bytes, 0);
    }
}

static void eager_limit_keeps_the_default_or_fits_the_message(void **state)
{
    (void)state;
    assert_int_equal(sb_eager_limit_for(0), 0);
    assert_int_equal(sb_eager_limit_for(32768), 0);
    assert_int_equal(sb_eager_limit_for(65536 - 64), 0); /* eager at the default (measured) */
    assert_int_equal(sb_eager_limit_for(65536 - 63), 69632);
    assert_int_equal(sb_eager_limit_for(65536), 69632);
    assert_int_equal(sb_eager_limit_for(69632 - 64), 69632);
    assert_int_equal(sb_eager_limit_for(69632 - 63), 73728);
    assert_int_equal(sb_eager_limit_for(278528), 282624);
    for (size_t b = 60000; b < 300000; b += 997)
        assert_true(sb_eager_fits(b, sb_eager_limit_for(b) ? sb_eager_limit_for(b)
                                                           : SB_TCP_EAGER_DEFAULT_BYTES));
    assert_true(sb_eager_fits(65472, 65536));
    assert_false(sb_eager_fits(65504, 65536)); /* rendezvous, measured */
    assert_false(sb_eager_fits(70000, 65536));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipeline_boundary_is_a_micro_batch_of_the_widest_cut),
        cmocka_unit_test(other_strategies_send_none),
        cmocka_unit_test(eager_limit_keeps_the_default_or_fits_the_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
