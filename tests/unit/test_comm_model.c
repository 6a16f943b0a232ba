/* Unit tests for the strategies' comm_model ops (strategies/strategy.h):
 * the rows the report's comm.model (a run's cfg) and stratbench predict
 * (cfg NULL) get from ddp and central, pinned to answers worked by hand on
 * a link of α = 100 µs, B = 100 MB/s (one message of 8 MB: 0.0801 s), and
 * which strategies have a model and --cuda-graph; central's fp16 row (its
 * skip word) and its fp16 refusal off the CPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "comm/cost_model.h"
#include "core/details.h"
#include "strategies/strategy.h"

#define M 8e6
#define EPS 1e-12
static const struct sb_link link = {.alpha_s = 1e-4, .bandwidth_Bps = 1e8, .gamma_s_per_byte = 0.0};

/* A config of strategy `name` at its defaults, on n replicas. */
static struct sb_config config_of(const char *name, int n)
{
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.strategy, name);
    strcpy(cfg.allreduce, "auto");
    cfg.replicas = n;
    sb_strategy_options_defaults(sb_strategy_find(name), &cfg);
    return cfg;
}

static int model(const char *name, const struct sb_comm_model_query *q,
                 struct sb_comm_model_row *rows)
{
    const struct sb_strategy_ops *ops = sb_strategy_find(name);
    assert_non_null(ops);
    assert_non_null(ops->comm_model);
    memset(rows, 0, 8 * sizeof *rows);
    return ops->comm_model(q, rows, 8);
}

/* predict's ddp rows: --allreduce auto and mpi over the measured buckets. */
static void test_ddp_predict_rows(void **state)
{
    (void)state;
    struct sb_comm_model_row r[8];
    /* Two buckets (2 MB then 6 MB) on 4 ranks, backward 0.1 s, overlap:
     * ring 6(α + b/(4B)) = 0.0306 and 0.0906 s; ready at 0.025 and 0.1 s,
     * done at 0.0556 and 0.1906 s: 0.0906 s exposed. */
    const double buckets[] = {2e6, 6e6};
    struct sb_comm_model_query q = {.link = link, .replicas = 4, .bytes = M, .backward_s = 0.1,
                                    .bucket_bytes = buckets, .n_buckets = 2, .overlap = 1};
    assert_int_equal(model("ddp", &q, r), 2);
    assert_string_equal(r[0].variant, "ring");
    assert_string_equal(r[0].formula_name, "ring");
    assert_string_equal(r[0].formula, "2(n-1)(alpha + M/(n B))");
    assert_int_equal(r[0].servers, 0);
    assert_float_equal(r[0].comm_s, 0.0306 + 0.0906, EPS);
    assert_float_equal(r[0].exposed_s, 0.0906, EPS);
    /* mpi: binomial 2 ceil(lg 4)(α + b/B) = 0.0804 and 0.2404 s; done at
     * 0.1054 and 0.3458 s: 0.2458 s exposed. */
    assert_string_equal(r[1].variant, "binomial");
    assert_string_equal(r[1].formula_name, "binomial");
    assert_float_equal(r[1].comm_s, 0.0804 + 0.2404, EPS);
    assert_float_equal(r[1].exposed_s, 0.2458, EPS);
    assert_string_equal(r[0].legend, "ddp ring 2(n-1)(a + M/(nB)) (2a + 2(n-1)M/(nB) behind "
                        "one in flight), recursive doubling lg n (a + M/B), binomial "
                        "2 ceil(lg n)(a + M/B), 2 buckets, overlap bound;");
    /* Without overlap all of it is exposed, and both buckets are ready at
     * once: the second ring joins the first in flight, 2α for its start
     * instead of 6α (4e-4 less); the binomial trees do not. */
    q.overlap = 0;
    assert_int_equal(model("ddp", &q, r), 2);
    assert_float_equal(r[0].comm_s, 0.0306 + 0.0906 - 4e-4, EPS);
    assert_float_equal(r[0].exposed_s, 0.0306 + 0.0906 - 4e-4, EPS);
    assert_float_equal(r[1].exposed_s, 0.0804 + 0.2404, EPS);
    assert_non_null(strstr(r[0].legend, "no overlap;"));
    /* With overlap, a bucket ready while the one before is in flight joins
     * it: backward 0.02 s, ready at 0.005 and 0.02 s, the first done at
     * 0.0356 s, so the second starts behind it and takes 0.0906 - 4e-4. */
    q.overlap = 1;
    q.backward_s = 0.02;
    assert_int_equal(model("ddp", &q, r), 2);
    assert_float_equal(r[0].comm_s, 0.0306 + 0.0906 - 4e-4, EPS);
    assert_float_equal(r[0].exposed_s, 0.0356 + 0.0906 - 4e-4 - 0.02, EPS);
    /* No buckets listed: one bucket of M (<= 25 MiB), ring at 2 ranks:
     * 2(α + M/(2B)) = 0.0802 s, all after backward. */
    q = (struct sb_comm_model_query){.link = link, .replicas = 2, .bytes = M,
                                     .backward_s = 0.05, .overlap = 1};
    assert_int_equal(model("ddp", &q, r), 2);
    assert_float_equal(r[0].comm_s, 0.0802, EPS);
    assert_float_equal(r[0].exposed_s, 0.0802, EPS);
    assert_float_equal(r[1].comm_s, 2 * 0.0801, EPS);
    assert_non_null(strstr(r[0].legend, ", 1 bucket, "));
    /* 60 MB, no buckets listed: three even buckets of 20 MB (25 MiB cap). */
    q.bytes = 60e6;
    q.backward_s = 0.0;
    assert_int_equal(model("ddp", &q, r), 2);
    assert_float_equal(r[0].comm_s, 3 * 2 * (1e-4 + 0.1), EPS);
    assert_non_null(strstr(r[0].legend, ", 3 buckets, "));
    /* A small bucket takes recursive doubling, the large one the ring: the
     * variant names both, the formula the largest bucket's (the first here). */
    const double mixed[] = {M, 1000};
    q = (struct sb_comm_model_query){.link = link, .replicas = 512, .bytes = M + 1000,
                                     .bucket_bytes = mixed, .n_buckets = 2, .overlap = 0};
    assert_int_equal(model("ddp", &q, r), 2);
    assert_string_equal(r[0].variant, "ring+doubling");
    assert_string_equal(r[0].formula_name, "ring");
    assert_float_equal(r[0].comm_s, 9 * (1e-4 + 1e-5) + 1022 * (1e-4 + M / 512 / 1e8), EPS);
}

/* The report's ddp row: the run's bucket plan from its describe, its
 * --allreduce and its --no-overlap. */
static void test_ddp_run_row(void **state)
{
    (void)state;
    struct sb_comm_model_row r[8];
    struct sb_config cfg = config_of("ddp", 4);
    struct sb_strategy_details d;
    memset(&d, 0, sizeof d);
    double count = 2, bytes[] = {2e6, 6e6};
    sb_details_add(&d, "bucket_count", 0, &count, 1);
    sb_details_add(&d, "bucket_bytes", 1, bytes, 2);
    struct sb_comm_model_query q = {.link = link, .replicas = 4, .bytes = M, .backward_s = 0.1,
                                    .cfg = &cfg, .details = &d};
    assert_int_equal(model("ddp", &q, r), 1);
    assert_string_equal(r[0].formula_name, "ring");
    assert_float_equal(r[0].comm_s, 0.1212, EPS);
    assert_float_equal(r[0].exposed_s, 0.0906, EPS);
    strcpy(cfg.allreduce, "mpi");
    assert_int_equal(model("ddp", &q, r), 1);
    assert_string_equal(r[0].formula_name, "binomial");
    assert_string_equal(r[0].formula, "2 ceil(lg n)(alpha + M/B)");
    assert_float_equal(r[0].exposed_s, 0.2458, EPS);
    assert_int_equal(sb_strategy_option_parse(sb_strategy_find("ddp"), &cfg, "no-overlap", NULL),
                     SB_OK);
    assert_int_equal(model("ddp", &q, r), 1);
    assert_float_equal(r[0].exposed_s, 0.3208, EPS);
    /* --allreduce recursive-doubling: lg 4 (α + b/B) = 0.0402 and 0.1202 s. */
    strcpy(cfg.allreduce, "recursive-doubling");
    assert_int_equal(model("ddp", &q, r), 1);
    assert_string_equal(r[0].formula_name, "recursive-doubling");
    assert_float_equal(r[0].comm_s, 0.1604, EPS);
    /* A plan not listed in full: one bucket of M. */
    count = 3;
    memset(&d, 0, sizeof d);
    sb_details_add(&d, "bucket_count", 0, &count, 1);
    sb_details_add(&d, "bucket_bytes", 1, bytes, 2);
    strcpy(cfg.allreduce, "auto");
    assert_int_equal(model("ddp", &q, r), 1);
    assert_float_equal(r[0].comm_s, 6 * (1e-4 + 0.02), EPS);
}

/* central: max(2(kα + M/B), 2n(α + M/(kB))), rank 0's link with --servers 0. */
static void test_central_rows(void **state)
{
    (void)state;
    struct sb_comm_model_row r[8];
    struct sb_comm_model_query q = {.link = link, .replicas = 8, .bytes = M, .backward_s = 0.1,
                                    .overlap = 1};
    assert_int_equal(model("central", &q, r), 2); /* predict: k = 1 and k = n */
    assert_int_equal(r[0].servers, 1);
    assert_string_equal(r[0].variant, "push-pull");
    assert_string_equal(r[0].formula_name, "central");
    assert_float_equal(r[0].comm_s, 16 * (1e-4 + 0.08), EPS); /* the server's 16 messages */
    assert_true(isnan(r[0].exposed_s));
    assert_int_equal(r[1].servers, 8);
    assert_float_equal(r[1].comm_s, 16e-4 + 0.16, EPS); /* both links: 16 messages each */
    assert_string_equal(r[0].legend, "central max(2(ka + M/B), 2n(a + M/(kB))) (BytePS's bound, "
                        "a message each way per peer), no overlap with compute;");
    q.replicas = 1;
    assert_int_equal(model("central", &q, r), 1);
    assert_int_equal(r[0].servers, 1);
    assert_float_equal(r[0].comm_s, 2e-4 + 0.16, EPS);
    /* The run: its --servers. */
    struct sb_config cfg = config_of("central", 3);
    q = (struct sb_comm_model_query){.link = link, .replicas = 3, .bytes = M, .cfg = &cfg};
    assert_int_equal(model("central", &q, r), 1);
    assert_int_equal(r[0].servers, 0);
    assert_string_equal(r[0].formula_name, "central-servers0");
    assert_string_equal(r[0].formula, "2(n-1)(alpha + M/B)");
    assert_float_equal(r[0].comm_s, 4 * (1e-4 + 0.08), EPS);
    assert_true(isnan(r[0].exposed_s));
    assert_int_equal(sb_strategy_option_parse(sb_strategy_find("central"), &cfg, "servers", "2"),
                     SB_OK);
    assert_int_equal(model("central", &q, r), 1);
    assert_int_equal(r[0].servers, 2);
    assert_string_equal(r[0].formula_name, "central");
    assert_string_equal(r[0].formula, "max(2(k alpha + M/B), 2n(alpha + M/(k B)))");
    assert_float_equal(r[0].comm_s, 6 * (1e-4 + 0.04), EPS); /* the server's link */
}

/* central under fp16 (docs/precision.md, "fp16 under central"): the
 * synchronous run's M is the 16-bit wire's plus half of server 0's skip
 * word (2 bytes), the mean of a push and a pull; --async sends no word;
 * bf16 none either. Off the CPU (a backend without host memory) fp16 is
 * refused, bf16 is not. */
static void test_central_fp16(void **state)
{
    (void)state;
    struct sb_comm_model_row r[8];
    struct sb_config cfg = config_of("central", 3);
    cfg.backend = &sb_backend_cpu;
    struct sb_comm_model_query q = {.link = link, .replicas = 3, .bytes = M, .cfg = &cfg};
    cfg.precision = SB_PRECISION_FP16;
    assert_int_equal(model("central", &q, r), 1);
    assert_float_equal(r[0].wire_bytes, M / 2 + 1, EPS);
    assert_float_equal(r[0].comm_s, 4 * (1e-4 + (M / 2 + 1) / 1e8), EPS);
    cfg.precision = SB_PRECISION_BF16;
    assert_int_equal(model("central", &q, r), 1);
    assert_float_equal(r[0].wire_bytes, M / 2, EPS);
    cfg.precision = SB_PRECISION_FP16;
    assert_int_equal(sb_strategy_option_parse(sb_strategy_find("central"), &cfg, "async", NULL),
                     SB_OK);
    assert_int_equal(model("central", &q, r), 1);
    assert_float_equal(r[0].wire_bytes, M / 2, EPS);
    const struct sb_strategy_ops *ops = sb_strategy_find("central");
    struct sb_config sync = config_of("central", 2);
    sync.backend = &sb_backend_cpu;
    sync.precision = SB_PRECISION_FP16;
    assert_int_equal(ops->validate(&sync), SB_OK);
    struct sb_backend_ops device = sb_backend_cpu;
    device.host_memory = 0;
    sync.backend = &device;
    assert_int_equal(ops->validate(&sync), SB_ERR_USAGE);
    sync.precision = SB_PRECISION_BF16;
    assert_int_equal(ops->validate(&sync), SB_OK);
}

/* zero: the ring's reduce-scatter and one ring all-gather (stages 1-2)
 * or two (stage 3) per unit. At n = 4, one unit of M: each 3(α + M/(4B)). */
static void test_zero_rows(void **state)
{
    (void)state;
    struct sb_comm_model_row r[8];
    struct sb_comm_model_query q = {.link = link, .replicas = 4, .bytes = M, .overlap = 1};
    assert_int_equal(model("zero", &q, r), 3); /* predict: stages 1, 2, 3 */
    double rs = 3 * (1e-4 + 0.02), ag = 3 * (1e-4 + 0.02);
    assert_string_equal(r[0].variant, "stage-1");
    assert_string_equal(r[0].formula_name, "zero-2");
    assert_float_equal(r[0].comm_s, rs + ag, EPS);
    assert_float_equal(r[1].comm_s, rs + ag, EPS);
    assert_string_equal(r[2].variant, "stage-3");
    assert_string_equal(r[2].formula_name, "zero-3");
    assert_float_equal(r[2].comm_s, rs + 2 * ag, EPS);
    assert_true(isnan(r[2].exposed_s));
    /* two units of M/2 in flight together: α once more per collective
     * (4 ring steps' α, not 3 + 3), the bytes the same */
    double halves[] = {M / 2, M / 2};
    q.bucket_bytes = halves;
    q.n_buckets = 2;
    assert_int_equal(model("zero", &q, r), 3);
    assert_float_equal(r[0].comm_s, rs + ag + 2e-4, EPS);
    assert_float_equal(r[2].comm_s, rs + 2 * ag + 3e-4, EPS);
    /* the model's layers are stage 3's units (predict), stages 1-2 keep
     * the buckets: 3 layers add 2 α to each of stage 3's collectives */
    q.layers = 3;
    assert_int_equal(model("zero", &q, r), 3);
    assert_float_equal(r[0].comm_s, rs + ag + 2e-4, EPS);
    assert_float_equal(r[2].comm_s, rs + 2 * ag + 6e-4, EPS);
    q.layers = 0;
    q.replicas = 1;
    assert_int_equal(model("zero", &q, r), 3);
    assert_float_equal(r[2].comm_s, 0.0, EPS);
    /* The run (stage 1, one unit): fp32, then fp16's 2-byte reduce-scatter
     * (3 steps of M/8) with the fp32 all-gather. */
    struct sb_config cfg = config_of("zero", 4);
    assert_int_equal(sb_strategy_option_parse(sb_strategy_find("zero"), &cfg, "zero-stage", "1"),
                     SB_OK);
    strcpy(cfg.grad_compression, "none");
    q = (struct sb_comm_model_query){.link = link, .replicas = 4, .bytes = M, .cfg = &cfg};
    assert_int_equal(model("zero", &q, r), 1);
    assert_string_equal(r[0].formula, "2((n-2+u) alpha + (n-1)M/(n B))");
    assert_float_equal(r[0].comm_s, rs + ag, EPS);
    strcpy(cfg.grad_compression, "fp16");
    assert_int_equal(model("zero", &q, r), 1);
    assert_string_equal(r[0].formula,
                        "(n-2+u) alpha + (n-1)M/(2n B) + (n-2+u) alpha + (n-1)M/(n B)");
    assert_float_equal(r[0].comm_s, 3 * (1e-4 + 0.01) + ag, EPS);
}

/* Which strategies state a model and take --cuda-graph (the CLI asks the
 * ops, never a name). */
static void test_capabilities(void **state)
{
    (void)state;
    const char *with_model[] = {"ddp", "central"}, *without[] = {"single", "mirrored"};
    for (int i = 0; i < 2; i++) {
        assert_non_null(sb_strategy_find(with_model[i])->comm_model);
        assert_null(sb_strategy_find(without[i])->comm_model);
    }
    for (int i = 0; i < sb_strategy_count(); i++)
        assert_int_equal(sb_strategy_at(i)->cuda_graph,
                         strcmp(sb_strategy_at(i)->name, "single") == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_predict_rows),
        cmocka_unit_test(test_ddp_run_row),
        cmocka_unit_test(test_central_rows),
        cmocka_unit_test(test_central_fp16),
        cmocka_unit_test(test_zero_rows),
        cmocka_unit_test(test_capabilities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
