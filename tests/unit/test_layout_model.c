/* Unit tests for the layout model (strategies/shared/layout_model.c) and
 * the axis-to-link rule (sb_grid_axis_crosses_hosts), each against an
 * answer worked by hand or against the model it must reduce to:
 * - a dp-only layout is ddp's (zero's) predict row: compute + exposed
 *   communication, to rounding, and its memory the ZeRO accounting;
 * - a pp-only layout's bubble is the schedule's formula (p-1)(t_f + t_b)
 *   and its share (p-1)/(m+p-1), on free links;
 * - tp's bytes per micro-batch are 4b(out of the row-parallel layers)
 *   forward and 4b(in of the column-parallel ones) backward, priced as ring
 *   all-reduces on the link tp crosses;
 * - zero stages 2-3 with a pipeline are refused;
 * - each pipeline boundary is priced on the link it crosses (within a host
 *   or across: sb_grid_stages_cross_hosts), not on the axis's;
 * - the ledger of dp-only layouts (zero 0-3, bf16) and a tp shard of the
 *   mlp, category by category, by hand (sb_layout_memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/grid.h"
#include "strategies/shared/layout_links.h"
#include "strategies/shared/layout_memory.h"
#include "strategies/shared/layout_model.h"
#include "strategies/shared/schedule_sim.h"
#include "strategies/strategy.h"
#include "workloads/model_table.h"

#define REL 1e-12

/* mlp 784-512-256-10: fc1 column-parallel, fc2 row-parallel, fc3 whole
 * (widths that differ, so that a formula reading in for out fails). */
#define H1 512
#define H2 256
static struct sb_layer_summary mlp[3];
/* four equal layers, nothing split (for the pipeline's hand answers) */
static struct sb_layer_summary four[4];

static void setup_layers(void)
{
    mlp[0] = (struct sb_layer_summary){"fc1", 784 * H1 + H1, 784 * H1 + H1, 784, H1, 1, 0,
                                      H1, 784 * H1};
    mlp[1] = (struct sb_layer_summary){"fc2", H1 * H2 + H2, H1 * H2, H1, H2, 0, 1, H1,
                                      H1 * H2};
    mlp[2] = (struct sb_layer_summary){"fc3", H2 * 10 + 10, 0, H2, 10, 0, 0, 0, H2 * 10};
    for (int i = 0; i < 4; i++)
        four[i] = (struct sb_layer_summary){"L", 1000, 0, 100, 100, 0, 0, 0, 1000};
}

static struct sb_layout_inputs inputs(const struct sb_layer_summary *layers, int n, int batch)
{
    struct sb_layout_inputs in = {
        .layers = layers, .n_layers = n, .global_batch = batch,
        .data_s_per_sample = 1e-5, .forward_s_per_sample = 2e-4, .backward_s_per_sample = 4e-4,
        .optimizer_s_per_param = 1e-9, .activation_bytes_per_sample = 0, .ranks_per_host = 2,
        .links = {{1e-5, 1e10, 0}, {1e-4, 1.25e8, 0}}, .optimizer = SB_OPTIMIZER_SGD,
        .overlap = 1};
    in.dp_sync[0] = sb_strategy_find("ddp");
    in.dp_sync[1] = sb_strategy_find("zero");
    return in;
}

/* The four equal layers, global batch 64, no data or optimizer time, on
 * hosts of ranks_per_host ranks: the pipelines' hand answers. */
static struct sb_layout_inputs four_inputs(int ranks_per_host)
{
    setup_layers();
    struct sb_layout_inputs in = inputs(four, 4, 64);
    in.optimizer_s_per_param = 0;
    in.data_s_per_sample = 0;
    in.ranks_per_host = ranks_per_host;
    return in;
}

static double params_of(const struct sb_layer_summary *l, int n)
{
    double p = 0;
    for (int i = 0; i < n; i++) p += l[i].params;
    return p;
}

static struct sb_layout dp_only(int dp, int zero)
{
    return (struct sb_layout){dp, 1, 1, 1, SB_PP_GPIPE, 1, zero, SB_RANK_ORDER_TP_DP_PP};
}

/* dp-only, zero stage 0 and 1..3: the strategy's own row, on the link dp
 * crosses (4 ranks, 2 per host: across hosts). */
static void test_dp_only_is_the_strategy_row(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 256);
    double psi = params_of(mlp, 3);
    for (int zero = 0; zero <= 3; zero++) {
        struct sb_layout l = dp_only(4, zero);
        struct sb_layout_prediction p;
        if (zero == 0) in.ranks_per_host = 1; /* hosts of 2: the hierarchical test below */
        assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
        in.ranks_per_host = 2;
        const struct sb_strategy_ops *ops = in.dp_sync[zero > 0];
        struct sb_comm_model_query q = {.link = in.links.inter, .replicas = 4, .bytes = 4 * psi,
                                        .backward_s = 64 * 4e-4, .overlap = 1, .layers = 3};
        struct sb_comm_model_row rows[8];
        int n = ops->comm_model(&q, rows, 8);
        int k = zero > 0 ? zero - 1 : 0;
        assert_true(n > k);
        double exposed = isnan(rows[k].exposed_s) ? rows[k].comm_s : rows[k].exposed_s;
        double opt = 1e-9 * (zero > 0 ? psi / 4 : psi);
        double step = 64 * (1e-5 + 2e-4 + 4e-4) + exposed + opt;
        assert_true(fabs(p.step_s - step) <= REL * step);
        assert_true(p.dp_cross);
        assert_float_equal(p.bubble_s, 0.0, 0.0);
        assert_float_equal(p.dp_bytes, 4 * psi, 0.0);
        /* memory: the ZeRO accounting of the whole model + 8 bytes per
         * activation float (784 in + 512 + 256 + 10 out) per sample */
        struct sb_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.replicas = 4;
        sb_strategy_options_defaults(ops, &cfg);
        for (const struct sb_strategy_option *o = ops->options; o && o->flag; o++)
            if (strstr(o->flag, "-stage")) memcpy(cfg.strategy_opts + o->offset, &zero, sizeof zero);
        double state_bytes = sb_strategy_model_state_bytes(ops, &cfg, psi);
        /* SGD: 4Ψ parameters + 4Ψ gradients + 4Ψ momentum, sharded by stage */
        double by_hand[4] = {12 * psi, 8 * psi + 4 * psi / 4, 4 * psi + 8 * psi / 4,
                             12 * psi / 4};
        assert_true(fabs(state_bytes - by_hand[zero]) <= 1e-6 * by_hand[zero]);
        double act = 8.0 * (784 + H1 + H2 + 10) * 64;
        assert_true(fabs(p.memory_bytes - (state_bytes + act)) <= REL * p.memory_bytes);
    }
}

/* The ledger of dp-only layouts of the mlp 784-512-256-10 (Adam, global
 * batch 64 over dp 4: B = 16 < the eval batch 1000), by hand: Ψ = 401,920 +
 * 131,328 + 2,570 = 535,818; stages 1-2 one 25 MiB unit (535,818 floats),
 * dp rank 0's block 133,955 (the first 535,818 % 4 = 2 blocks one more);
 * stage 3 a unit per layer: 100,480 + 32,832 + 643 = 133,955. Activations:
 * 1000 samples x (512 + 256 + 10 outputs + 2 x 512 deltas + 10 dlogits)
 * x 4 bytes = 7,248,000. bf16: parameters and gradients at 2 bytes, the
 * other 2 in emulation_bytes, Adam + a master copy s = 3. */
static void test_ledger_by_hand(void **state)
{
    (void)state;
    setup_layers();
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.workload, sizeof cfg.workload, "mlp");
    cfg.n_hidden = 2;
    cfg.hidden[0] = H1;
    cfg.hidden[1] = H2;
    cfg.eval_batch = 1000;
    struct sb_layout_inputs in = inputs(mlp, 3, 64);
    in.optimizer = SB_OPTIMIZER_ADAM;
    in.workload = sb_workload_find("mlp");
    in.model_cfg = &cfg;
    double psi = 535818, S = 133955, act = 1000.0 * (512 + 256 + 10 + 2 * 512 + 10) * 4;
    double comm[4] = {0, 4 * S, 4 * psi, 2 * 4 * 401920.0 + 4 * 131328.0};
    for (int zero = 0; zero <= 3; zero++) {
        struct sb_layout l = dp_only(4, zero);
        struct sb_memory_entry e;
        assert_int_equal(sb_layout_memory(&l, &in, NULL, 0, &e), 1);
        assert_float_equal(e.held.param_bytes, 4 * (zero >= 3 ? S : psi), 0);
        assert_float_equal(e.held.grad_bytes, 4 * (zero >= 2 ? S : psi), 0);
        assert_float_equal(e.held.optimizer_bytes, 8 * (zero >= 1 ? S : psi), 0);
        assert_float_equal(e.comm_bytes, comm[zero], 0);
        assert_float_equal(e.activation_bytes, act, 0);
        assert_float_equal(e.emulation_bytes, 0, 0);
        struct sb_layout_prediction p;
        assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
        assert_float_equal(p.memory_bytes, sb_memory_entry_total_bytes(&e), 0);
    }
    cfg.precision = SB_PRECISION_BF16;
    struct sb_layout l = dp_only(4, 1);
    struct sb_memory_entry e;
    assert_int_equal(sb_layout_memory(&l, &in, NULL, 0, &e), 1);
    assert_float_equal(e.held.param_bytes, 2 * psi, 0);
    assert_float_equal(e.held.grad_bytes, 2 * psi, 0);
    assert_float_equal(e.emulation_bytes, 4 * psi, 0);
    assert_float_equal(e.held.optimizer_bytes, 12 * S, 0);
    /* tp 2 (the tensor strategy's shard): fc1's 256 rows of 784 and their
     * biases, fc2's 256 columns and its whole bias, fc3 whole */
    l = (struct sb_layout){2, 2, 1, 1, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_memory(&l, &in, NULL, 0, &e), 1);
    assert_float_equal(e.held.param_bytes + e.emulation_bytes / 2,
                       4.0 * (784 * 256 + 256 + 256 * 256 + 256 + 2570), 0);
    /* no configuration: the scaled estimate (0) */
    in.model_cfg = NULL;
    assert_int_equal(sb_layout_memory(&l, &in, NULL, 0, &e), 0);
}

/* pp-only on free links: the bubble is (p-1)(t_f + t_b), its share
 * (p-1)/(m+p-1); 1f1b's first stage holds min(p, m) slots, gpipe m. */
static void test_pp_only_bubble(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(four, 4, 64);
    in.links.intra = in.links.inter = (struct sb_link){.alpha_s = 0.0,
                                                       .bandwidth_Bps = INFINITY,
                                                       .gamma_s_per_byte = 0.0};
    in.optimizer_s_per_param = 0;
    in.data_s_per_sample = 0;
    for (int kind = SB_PP_GPIPE; kind <= SB_PP_1F1B; kind++) {
        struct sb_layout l = {1, 1, 4, 8, (enum sb_pp_kind)kind, 1, 0, SB_RANK_ORDER_TP_DP_PP};
        struct sb_layout_prediction p;
        assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
        double b = 64.0 / 8, t_f = 2e-4 * b / 4, t_b = 4e-4 * b / 4;
        assert_true(fabs(p.bubble_s - 3 * (t_f + t_b)) <= REL * p.bubble_s);
        assert_true(fabs(p.bubble_share - 3.0 / 11) <= REL);
        assert_true(fabs(p.step_s - (8 + 3) * (t_f + t_b)) <= REL * p.step_s);
        int slots = kind == SB_PP_GPIPE ? 8 : 4;
        double slot = 8.0 * 100 * b; /* one layer's output, 8 bytes a float */
        /* stage 0 also keeps the model's input */
        assert_true(fabs(p.activation_bytes - slots * (slot + 8.0 * 100 * b)) <=
                    REL * p.activation_bytes);
        /* activations sent forward: m boundary activations of 4b x 100 */
        assert_float_equal(p.pp_bytes, 8 * 4.0 * b * 100, 0.0);
    }
    /* interleaved shrinks it by v */
    struct sb_layout l = {1, 1, 2, 4, SB_PP_INTERLEAVED, 2, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p;
    assert_int_equal(sb_layout_predict(&l, &in, 2, &p), SB_OK);
    double b = 64.0 / 4, t = (2e-4 + 4e-4) * b / 2;
    assert_true(fabs(p.bubble_s - t / 2) <= REL * p.bubble_s);
}

/* tp: the bytes by the formula and their time on the link tp crosses. */
static void test_tp_collectives(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 64);
    double f, b;
    sb_layout_tp_bytes(&in, 0, 3, 64, &f, &b);
    assert_float_equal(f, 4.0 * 64 * H2, 0.0); /* fc2's output */
    assert_float_equal(b, 0.0, 0.0); /* fc1 is the first layer: no input gradient, no f */
    for (int r = 1; r <= 2; r++) {
        in.ranks_per_host = r;
        struct sb_layout l = {1, 2, 1, 1, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
        struct sb_layout_prediction p;
        assert_int_equal(sb_layout_predict(&l, &in, 2, &p), SB_OK);
        const struct sb_link *link = r == 2 ? &in.links.intra : &in.links.inter;
        /* 65 kB at tp 2: below the ring's 160 kB, recursive doubling (one
         * exchange, alpha + M/B), as the tp communicator's auto runs it */
        double tp = link->alpha_s + f / link->bandwidth_Bps;
        assert_int_equal(p.tp_cross, r == 1);
        assert_true(fabs(p.tp_comm_s - tp) <= REL * tp);
        assert_float_equal(p.tp_bytes, f + b, 0.0);
        /* compute: each layer's work split in the share of its split
         * parameters: fc1 halved, fc2's H1 H2 of H1 H2 + H2 halved, fc3 whole */
        double flops = 784.0 * H1 + H1 * H2 + H2 * 10;
        double fc2 = (double)H1 * H2 * (H2 + H1 * H2 / 2.0) / (H1 * H2 + H2);
        double compute = 64 * 6e-4 * (784.0 * H1 / 2 + fc2 + H2 * 10) / flops;
        assert_true(fabs(p.compute_s - compute) <= REL * compute);
        /* model state: SGD 12 bytes per held parameter */
        double held = (784.0 * H1 + H1) / 2 + H1 * H2 / 2.0 + H2 + H2 * 10 + 10;
        assert_true(fabs(p.model_state_bytes - 12 * held) <= REL * p.model_state_bytes);
    }
    /* tp 3 does not divide 512; a cut between fc1 and fc2 splits the pair */
    struct sb_layout bad = {1, 3, 1, 1, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_check(&bad, &in, 3), SB_ERR_USAGE);
    struct sb_layout cut = {1, 2, 3, 2, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_check(&cut, &in, 6), SB_ERR_USAGE); /* [fc1] [fc2] [fc3] */
    cut.pp = 2; /* [fc1 fc2] [fc3] keeps the pair */
    assert_int_equal(sb_layout_check(&cut, &in, 4), SB_OK);
}

static void test_refusals(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(four, 4, 64);
    struct sb_layout l = {2, 1, 2, 2, SB_PP_1F1B, 1, 2, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_check(&l, &in, 4), SB_ERR_USAGE); /* zero 2 + pp */
    l.zero_stage = 1;
    assert_int_equal(sb_layout_check(&l, &in, 4), SB_OK);
    assert_int_equal(sb_layout_check(&l, &in, 8), SB_ERR_USAGE); /* not the ranks */
    l.microbatches = 3;
    assert_int_equal(sb_layout_check(&l, &in, 4), SB_ERR_USAGE); /* 32 / 3 */
}

/* The layer table from a model's tensors (sb_model_layer_summaries): a
 * transformer block of width W = 64, mlp F = 256, 65 tokens (q, k, v and fc1
 * column-parallel with their biases, proj and fc2 row-parallel with
 * replicated biases, LayerNorms replicated) runs 2 all-reduces of b s h
 * forward and 2 backward (Shoeybi et al. 2019), must be split by a divisor of
 * gcd(W, F), and works 2 x params x 65 per sample; a dense column-parallel
 * layer runs one backward all-reduce of its input. */
static void test_summaries_of_a_block(void **state)
{
    (void)state;
    enum { W = 64, F = 256 };
    struct { const char *name; size_t count; enum sb_tp_split split; } t[] = {
        {"norm1.weight", W, SB_TP_REPLICATED}, {"q.weight", W * W, SB_TP_COLUMN},
        {"q.bias", W, SB_TP_COLUMN}, {"k.weight", W * W, SB_TP_COLUMN},
        {"k.bias", W, SB_TP_COLUMN}, {"v.weight", W * W, SB_TP_COLUMN},
        {"v.bias", W, SB_TP_COLUMN}, {"proj.weight", W * W, SB_TP_ROW},
        {"proj.bias", W, SB_TP_REPLICATED}, {"fc1.weight", F * W, SB_TP_COLUMN},
        {"fc1.bias", F, SB_TP_COLUMN}, {"fc2.weight", W * F, SB_TP_ROW},
        {"fc2.bias", W, SB_TP_REPLICATED},
        {"fc.weight", 784 * F, SB_TP_COLUMN}, {"fc.bias", F, SB_TP_COLUMN}};
    struct sb_tensor_desc tensors[15];
    size_t block = 0;
    for (int i = 0; i < 15; i++) {
        tensors[i] = (struct sb_tensor_desc){.count = t[i].count, .tp_split = t[i].split};
        snprintf(tensors[i].name, sizeof tensors[i].name, "%s", t[i].name);
        if (i < 13) block += t[i].count;
    }
    struct sb_layer_desc layers[2] = {
        {.name = "block0", .first_tensor = 0, .n_tensors = 13, .count = block,
         .in_shape = {65, W, 1}, .out_shape = {65, W, 1}, .in_floats = 65 * W,
         .out_floats = 65 * W},
        {.name = "fc", .first_tensor = 13, .n_tensors = 2, .count = 784 * F + F,
         .in_shape = {784, 1, 1}, .out_shape = {F, 1, 1}, .in_floats = 784, .out_floats = F}};
    struct sb_model m = {.tensors = tensors, .n_tensors = 15, .layers = layers, .n_layers = 2};
    struct sb_layer_summary y[2];
    assert_int_equal(sb_model_layer_summaries(&m, y, 2), 2);
    assert_int_equal(y[0].tp_row, 2);
    assert_int_equal(y[0].tp_column, 2);
    assert_int_equal(y[0].split_width, 64); /* gcd(W, F) */
    assert_float_equal(y[0].flops, 2.0 * block * 65, 0.0);
    assert_float_equal(y[0].split_params, block - 3.0 * W, 0.0); /* less norm1, the 2 row biases */
    assert_int_equal(y[1].tp_row, 0);
    assert_int_equal(y[1].tp_column, 1);
    assert_int_equal(y[1].split_width, F);
    assert_float_equal(y[1].flops, 2.0 * (784 * F + F), 0.0);
    /* a block of 6 heads: tp must divide them too (gcd(64, 6) = 2) */
    layers[0].split_units = 6;
    assert_int_equal(sb_model_layer_summaries(&m, y, 2), 2);
    assert_int_equal(y[0].split_width, 2);
    layers[0].split_units = 0;
    assert_int_equal(sb_model_layer_summaries(&m, y, 2), 2);
    struct sb_layout_inputs in = {.layers = y, .n_layers = 2};
    double f, b;
    sb_layout_tp_bytes(&in, 0, 1, 8, &f, &b);
    assert_float_equal(f, 2 * 4.0 * 8 * 65 * W, 0.0); /* 2 all-reduces of b s h forward */
    assert_float_equal(b, 0.0, 0.0); /* the model's first layer: no input gradient */
    sb_layout_tp_bytes(&in, 1, 2, 8, &f, &b);
    assert_float_equal(f, 0.0, 0.0);
    assert_float_equal(b, 4.0 * 8 * 784, 0.0);
    /* the block behind another layer: its 2 backward all-reduces of b s h */
    struct sb_layer_summary z[2] = {y[1], y[0]};
    struct sb_layout_inputs in2 = {.layers = z, .n_layers = 2};
    sb_layout_tp_bytes(&in2, 1, 2, 8, &f, &b);
    assert_float_equal(b, 2 * 4.0 * 8 * 65 * W, 0.0);
}

/* Which axis crosses hosts, 8 ranks (dp 2, tp 2, pp 2). */
static void test_axis_links(void **state)
{
    (void)state;
    enum sb_rank_order a = SB_RANK_ORDER_TP_DP_PP, b = SB_RANK_ORDER_TP_PP_DP;
    /* 2 per host: tp [0,1] stays; dp [0,2] and pp [0,4] cross */
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_TP, 2), 0);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_DP, 2), 1);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_PP, 2), 1);
    /* 4 per host: dp [0,2] stays, pp [0,4] crosses; tp-pp-dp the reverse */
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_DP, 4), 0);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_PP, 4), 1);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, b, SB_COMM_ROLE_PP, 4), 0);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, b, SB_COMM_ROLE_DP, 4), 1);
    /* tp 4 on hosts of 2 crosses; one host holds everything */
    assert_int_equal(sb_grid_axis_crosses_hosts(1, 4, 1, a, SB_COMM_ROLE_TP, 2), 1);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_PP, 8), 0);
    assert_int_equal(sb_grid_axis_crosses_hosts(2, 2, 2, a, SB_COMM_ROLE_WORLD, 8), -1);
    /* boundary by boundary: pp 4 on hosts of 2 ([0,1] [2,3]) crosses between
     * stages 1 and 2 and at interleaved's wrap 3 -> 0, not 0 -> 1 or 2 -> 3 */
    assert_int_equal(sb_grid_stages_cross_hosts(1, 1, 4, a, 0, 1, 2), 0);
    assert_int_equal(sb_grid_stages_cross_hosts(1, 1, 4, a, 1, 2, 2), 1);
    assert_int_equal(sb_grid_stages_cross_hosts(1, 1, 4, a, 2, 3, 2), 0);
    assert_int_equal(sb_grid_stages_cross_hosts(1, 1, 4, a, 3, 0, 2), 1);
    /* dp 2 x pp 2 on hosts of 2: tp-dp-pp puts stage 1 on the other host
     * (rank = dp + 2 pp), tp-pp-dp next to stage 0 (rank = pp + 2 dp) */
    assert_int_equal(sb_grid_stages_cross_hosts(2, 1, 2, a, 0, 1, 2), 1);
    assert_int_equal(sb_grid_stages_cross_hosts(2, 1, 2, b, 0, 1, 2), 0);
    /* dp 2 x pp 4 in tp-pp-dp on hosts of 2: pipelines [0..3] and [4..7] */
    assert_int_equal(sb_grid_stages_cross_hosts(2, 1, 4, b, 0, 1, 2), 0);
    assert_int_equal(sb_grid_stages_cross_hosts(2, 1, 4, b, 1, 2, 2), 1);
    assert_int_equal(sb_grid_stages_cross_hosts(1, 1, 4, a, 3, 4, 2), -1);
    assert_int_equal(sb_grid_stages_cross_hosts(1, 1, 4, a, 0, 1, 0), -1);
}

/* The share of a host's link (layout_links.h), by hand: flows to the ring
 * successor (dp, tp) or the next stage (pp) that cross hosts, through each
 * host's link out and in, k_s = sum_j min(w_j, w_s) / w_s. */
static void test_link_share(void **state)
{
    (void)state;
    enum sb_rank_order a = SB_RANK_ORDER_TP_DP_PP, b = SB_RANK_ORDER_TP_PP_DP;
    double one[2] = {1.0, 1.0}, k[2];
    /* dp 2 x tp 2 on 2 hosts of 2: dp groups [0,2] [1,3] both leave host 0 */
    assert_int_equal(sb_layout_link_share(2, 2, 1, a, SB_COMM_ROLE_DP, 2, one, k), 0);
    assert_float_equal(k[0], 2.0, 0.0);
    assert_int_equal(sb_layout_link_share(2, 2, 1, a, SB_COMM_ROLE_TP, 2, one, k), 0);
    assert_float_equal(k[0], 1.0, 0.0); /* tp [0,1] stays inside */
    /* dp 4 as one ring 0-1-2-3 on hosts of 2: one flow out of each host */
    assert_int_equal(sb_layout_link_share(4, 1, 1, a, SB_COMM_ROLE_DP, 2, one, k), 0);
    assert_float_equal(k[0], 1.0, 0.0);
    /* dp 8 on 4 hosts of 2, and on 2 hosts of 4: still one */
    assert_int_equal(sb_layout_link_share(8, 1, 1, a, SB_COMM_ROLE_DP, 4, one, k), 0);
    assert_float_equal(k[0], 1.0, 0.0);
    /* dp 2 x pp 2 in tp-pp-dp: dp [0,2] (stage 0) and [1,3] (stage 1) share
     * host 0's link; stage 0 sends 1000, stage 1 10: stage 0 barely slowed
     * (1010/1000), stage 1 waits as long as the link is shared (20/10) */
    double w[2] = {1000.0, 10.0};
    assert_int_equal(sb_layout_link_share(2, 1, 2, b, SB_COMM_ROLE_DP, 2, w, k), 0);
    assert_float_equal(k[0], 1.01, 1e-12);
    assert_float_equal(k[1], 2.0, 1e-12);
    /* a stage that sends nothing makes no flow */
    double none[2] = {1000.0, 0.0};
    assert_int_equal(sb_layout_link_share(2, 1, 2, b, SB_COMM_ROLE_DP, 2, none, k), 0);
    assert_float_equal(k[0], 1.0, 0.0);
    /* pp of tp 2 x pp 2 on hosts of 2: stage 0 -> 1 as 0->2 and 1->3 */
    assert_int_equal(sb_layout_link_share(1, 2, 2, a, SB_COMM_ROLE_PP, 2, one, k), 0);
    assert_float_equal(k[0], 2.0, 0.0);
    /* tp 4 on hosts of 2: ring 0-1-2-3, 1->2 leaves host 0 alone */
    assert_int_equal(sb_layout_link_share(1, 4, 1, a, SB_COMM_ROLE_TP, 2, one, k), 0);
    assert_float_equal(k[0], 1.0, 0.0);
    assert_int_equal(sb_layout_link_share(2, 2, 1, a, SB_COMM_ROLE_WORLD, 2, one, k), -1);
    struct sb_link l = {.alpha_s = 1e-5,
                        .bandwidth_Bps = 1e8, .gamma_s_per_byte = 0}, h = sb_link_shared(&l, 2.0);
    assert_float_equal(h.bandwidth_Bps, 5e7, 0.0);
    assert_float_equal(h.alpha_s, 1e-5, 0.0);
    /* a sized link: every class's bandwidth and lower bound shared too, α
     * and γ kept */
    struct sb_link z = {.alpha_s = 1e-5, .bandwidth_Bps = 1e8, .gamma_s_per_byte = 1e-9,
                        .n_sizes = 2, .size_bytes = {0, 1e6}, .size_alpha_s = {1e-5, 2e-5},
                        .size_bandwidth_Bps = {4e8, 1e8}},
                   zh = sb_link_shared(&z, 2.0);
    assert_float_equal(zh.size_bandwidth_Bps[0], 2e8, 0.0);
    assert_float_equal(zh.size_bandwidth_Bps[1], 5e7, 0.0);
    assert_float_equal(zh.size_alpha_s[1], 2e-5, 0.0);
    assert_float_equal(zh.gamma_s_per_byte, 1e-9, 0.0);
    assert_float_equal(sb_cost_message_s(&zh, 2e6), 2e-5 + 2e6 / 5e7, 1e-15);
    /* two flows' messages of 0.6 MB go at once: 1.2 MB through the link,
     * priced in the class of 1.2 MB (alone 0.6 MB is in class 0) */
    assert_float_equal(zh.size_bytes[1], 5e5, 0.0);
    assert_float_equal(sb_cost_message_s(&zh, 6e5), 2e-5 + 2 * 6e5 / 1e8, 1e-15);
    assert_float_equal(sb_cost_message_s(&z, 6e5), 1e-5 + 6e5 / 4e8, 1e-15);
    /* its exchange classes alike (a ring's blocks through the shared link) */
    z.n_exchange_sizes = 2;
    z.exchange_bytes[1] = 1e6;
    z.exchange_alpha_s[0] = 1e-6, z.exchange_alpha_s[1] = 3e-6;
    z.exchange_bandwidth_Bps[0] = 8e8, z.exchange_bandwidth_Bps[1] = 2e8;
    zh = sb_link_shared(&z, 2.0);
    assert_float_equal(zh.exchange_bytes[1], 5e5, 0.0);
    assert_float_equal(zh.exchange_bandwidth_Bps[0], 4e8, 0.0);
    assert_float_equal(zh.exchange_bandwidth_Bps[1], 1e8, 0.0);
    assert_float_equal(zh.exchange_alpha_s[1], 3e-6, 0.0);
}

/* ddp over the world of 2 hosts of 2: auto's hierarchical all-reduce, its
 * cross stage (2 shards of M/2 at once through each host's link) at B/2:
 * (L-1)(a_i + M/(L B_i)) twice within the host + 2(H-1)(a + (M/L)/(H B/L)). */
static void test_world_hierarchical(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 256);
    in.overlap = 0;
    double psi = params_of(mlp, 3), m = 4 * psi;
    const struct sb_link *i = &in.links.intra, *x = &in.links.inter;
    assert_int_equal(sb_layout_world_hosts(4, 2), 2);
    assert_int_equal(sb_layout_world_hosts(4, 1), 0);
    assert_int_equal(sb_layout_world_hosts(2, 2), 0);
    assert_int_equal(sb_layout_world_hosts(8, 2), 4);
    enum sb_allreduce_algo algo;
    double t = sb_layout_world_allreduce_s(i, x, 2, 2, m, &algo);
    assert_int_equal(algo, SB_ALLREDUCE_HIERARCHICAL);
    double hand = 2 * (i->alpha_s + m / (2 * i->bandwidth_Bps)) +
                  2 * (x->alpha_s + (m / 2) / (2 * x->bandwidth_Bps / 2));
    assert_true(fabs(t - hand) <= REL * hand);
    struct sb_layout l = dp_only(4, 0);
    struct sb_layout_prediction p;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    /* one bucket (no measured buckets; 3.7 MB under the 25 MiB cap), no overlap */
    assert_true(fabs(p.dp_comm_s - hand) <= REL * hand);
    assert_true(fabs(p.dp_exposed_s - hand) <= REL * hand);
}

/* dp 2 x tp 2 on 2 hosts of 2: the two dp groups' all-reduces share each
 * host's link: ddp's own row on the link at B/2. */
static void test_dp_groups_share_the_link(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 256);
    struct sb_layout l = {2, 2, 1, 1, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    assert_true(p.dp_cross);
    double held = (784.0 * H1 + H1) / 2 + H1 * H2 / 2.0 + H2 + H2 * 10 + 10;
    struct sb_link half = {.alpha_s = in.links.inter.alpha_s,
                           .bandwidth_Bps = in.links.inter.bandwidth_Bps / 2,
                           .gamma_s_per_byte = 0};
    struct sb_comm_model_query q = {.link = half, .replicas = 2, .bytes = 4 * held,
                                    .overlap = 0};
    struct sb_comm_model_row rows[8];
    assert_true(in.dp_sync[0]->comm_model(&q, rows, 8) >= 1);
    assert_true(fabs(p.dp_comm_s - rows[0].comm_s) <= REL * rows[0].comm_s);
    /* and twice what one group alone would take, to within its two alphas */
    q.link = in.links.inter;
    in.dp_sync[0]->comm_model(&q, rows + 1, 7);
    assert_true(p.dp_comm_s > 1.9 * rows[1].comm_s);
}

/* Unbalanced stages: the schedule's own timing, not p - 1 copies of the
 * slowest stage. [fc1 fc2] [fc3] on free links, m 4, stage 0 t0 = f0 + b0
 * a micro-batch, stage 1 t1 < f0. gpipe: stage 0's four forwards, then its
 * first backward waits for stage 1's forward and backward of the last
 * micro-batch (t1), then its four backwards: step 4 t0 + t1, bubble t1.
 * 1f1b: each gradient is back before stage 0 needs it (stage 1 takes t1,
 * stage 0 a forward or a backward meanwhile): step 4 t0, bubble 0. (The
 * closed form (p - 1)(t_f + t_b) of the slowest stage would add t0.) */
static void test_unbalanced_bubble(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 64);
    in.links.intra = in.links.inter = (struct sb_link){.alpha_s = 0.0,
                                                       .bandwidth_Bps = INFINITY,
                                                       .gamma_s_per_byte = 0.0};
    in.optimizer_s_per_param = 0;
    in.data_s_per_sample = 0;
    double flops = 784.0 * H1 + H1 * H2 + H2 * 10, b = 64.0 / 4;
    double w0 = (784.0 * H1 + H1 * H2) / flops, w1 = H2 * 10 / flops;
    double t0 = 6e-4 * b * w0, t1 = 6e-4 * b * w1;
    assert_true(t1 < 2e-4 * b * w0);
    struct sb_layout_prediction p;
    struct sb_layout g = {1, 1, 2, 4, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_predict(&g, &in, 2, &p), SB_OK);
    assert_true(fabs(p.bubble_s - t1) <= 1e-9 * t1);
    assert_true(fabs(p.step_s - (4 * t0 + t1)) <= 1e-9 * p.step_s);
    assert_true(fabs(p.bubble_share - t1 / (4 * t0 + t1)) <= 1e-9);
    struct sb_layout l = {1, 1, 2, 4, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_predict(&l, &in, 2, &p), SB_OK);
    assert_true(fabs(p.bubble_s) <= 1e-9 * t0);
    assert_true(fabs(p.step_s - 4 * t0) <= 1e-9 * p.step_s);
}

/* --shared-cores: 4 ranks on 2 cores. The measured run (4 ranks, dp) got
 * half a core each; dp 4 likewise (factor 1); dp 2 x pp 2 of [fc1 fc2]
 * [fc3] computes on n ranks at once, the pipeline's busy time over its
 * span (the fixed point pipeline_core_scale finds): at most the
 * work-weighted n_eff = 2 (w0 + w1) / w0 (its boundary crosses the 1 Gbit/s
 * hosts' link, which lengthens the span), so its compute is
 * 0.5 / min(1, 2 / n) of the measured per sample. */
static void test_shared_cores(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 64);
    struct sb_layout_prediction p, q;
    struct sb_layout d = dp_only(4, 1);
    assert_int_equal(sb_layout_predict(&d, &in, 4, &p), SB_OK);
    in.shared_cores = 2;
    in.probe_ranks = 4;
    assert_int_equal(sb_layout_predict(&d, &in, 4, &q), SB_OK);
    assert_true(fabs(p.compute_s - q.compute_s) <= REL * p.compute_s);
    struct sb_layout l = {2, 1, 2, 2, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    assert_int_equal(sb_layout_predict(&l, &in, 4, &q), SB_OK);
    in.shared_cores = 0;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    double flops = 784.0 * H1 + H1 * H2 + H2 * 10;
    double w0 = (784.0 * H1 + H1 * H2) / flops, w1 = H2 * 10 / flops;
    double n_eff = 2 * (w0 + w1) / w0, n = q.ranks_computing;
    double scale = 0.5 / (2 / n < 1 ? 2 / n : 1);
    assert_true(n >= 1 && n <= n_eff * (1 + 1e-9));
    assert_true(p.ranks_computing == 0);
    assert_true(fabs(q.compute_s - scale * p.compute_s) <= 1e-2 * p.compute_s);
    /* A probe whose compute had 0.9 of a core (measured: its ranks slept
     * through their communication) is priced by that share, not by the
     * rank count's 0.5: with n <= 3.6 ranks computing at once the share is
     * min(1, 0.9 (2 / n) / (2 / 4)) = 1, so the layout computes at the
     * probe's 0.9 of its measured time per sample. */
    in.shared_cores = 2;
    in.probe_core_share = 0.9;
    struct sb_layout_prediction r;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &r), SB_OK);
    assert_true(r.ranks_computing <= 3.6);
    assert_true(fabs(r.compute_s - 0.9 * p.compute_s) <= REL * p.compute_s);
}

/* The probe's share, relative (docs/layouts.md, 2026-11-29): 4 ranks on 2
 * cores that measured 0.9 of a core each; the dp 4 layout (the probe's
 * own) computes at 0.9 x min(1, 2/4) / min(1, 2/4) = 0.9: its measured
 * compute, as without shared cores. The cores as a resource: its 4 ranks'
 * compute at a whole core, 4 x 0.9 t, over 2 cores is cores_s; on 1 core
 * with a share of 1 (ranks that took turns) the step is data + 4 t +
 * optimizer, above the critical path's data + t + exposed sync + optimizer. */
static void test_relative_share_and_cores_floor(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 64);
    struct sb_layout d = dp_only(4, 0);
    struct sb_layout_prediction p, q, r;
    assert_int_equal(sb_layout_predict(&d, &in, 4, &p), SB_OK);
    assert_true(p.cores_s == 0.0);
    in.shared_cores = 2;
    in.probe_ranks = 4;
    in.probe_core_share = 0.9;
    assert_int_equal(sb_layout_predict(&d, &in, 4, &q), SB_OK);
    assert_true(fabs(q.compute_s - p.compute_s) <= REL * p.compute_s);
    assert_true(fabs(q.cores_s - 4 * 0.9 * p.compute_s / 2) <= REL * p.compute_s);
    in.shared_cores = 1;
    in.probe_core_share = 1.0;
    assert_int_equal(sb_layout_predict(&d, &in, 4, &r), SB_OK);
    assert_true(fabs(r.compute_s - p.compute_s) <= REL * p.compute_s);
    assert_true(fabs(r.cores_s - 4 * p.compute_s) <= REL * p.compute_s);
    double path = r.data_s + r.compute_s + r.dp_exposed_s + r.optimizer_s;
    double floor_s = r.data_s + r.cores_s + r.optimizer_s;
    assert_true(floor_s > path);
    assert_true(fabs(r.step_s - floor_s) <= REL * floor_s);
}

/* A pipeline's compute all falls in its span, its dp sync after the flush:
 * dp 2 x pp 2 on 2 hosts of 2 (tp-pp-dp: each pipeline within a host, dp
 * across the slow link), the 4 ranks on 1 core, a probe whose 4 ranks had
 * a whole core each (they took turns): the span priced at a whole core is
 * (m + p - 1) t = 5 t, the cores' time 2 replicas x 2 stages x m t = 16 t;
 * the step is data + cores + the exposed dp sync + optimizer, above both
 * the critical path and the floor without the dp sync. */
static void test_pipeline_span_at_least_the_cores(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(four, 4, 64);
    struct sb_layout l = {2, 1, 2, 4, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_PP_DP};
    struct sb_layout_prediction p, q;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    in.shared_cores = 1;
    in.probe_ranks = 4;
    in.probe_core_share = 1.0;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &q), SB_OK);
    assert_true(q.dp_exposed_s > 0.0);
    double path = p.step_s; /* a whole core each: the critical path unchanged */
    double floor_s = q.data_s + q.cores_s + q.dp_exposed_s + q.optimizer_s;
    assert_true(fabs(q.cores_s - 2 * 2 * q.compute_s) <= REL * q.cores_s);
    assert_true(floor_s > path);
    assert_true(fabs(q.step_s - floor_s) <= REL * floor_s);
}

/* A pass's fixed part (the compute probe's fit): with phi of the measured
 * pass at the run's batch B fixed, a stage's pass on b samples is
 * F (phi p_s + (1 - phi) (b / B) w_s). tp 4 over the 3-layer mlp (fc1
 * column-, fc2 row-parallel, fc3 whole): p_s and w_s the tp rank's shares
 * of the parameters and of the work; b = B = 64 (dp 1). Without a fit
 * (phi 0) the work share alone. */
static void test_fixed_part(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(mlp, 3, 64);
    struct sb_layout l = {1, 4, 1, 1, SB_PP_GPIPE, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p, q;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    in.probe_batch = 16; /* the run measured 16 samples a replica: F = 16 per sample */
    in.forward_fixed_fraction = 0.6;
    in.backward_fixed_fraction = 0.3;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &q), SB_OK);
    double params = mlp[0].params + mlp[1].params + mlp[2].params;
    double flops = mlp[0].flops + mlp[1].flops + mlp[2].flops;
    double p_s = (mlp[0].params / 4 + (mlp[1].params - mlp[1].split_params) +
                  mlp[1].split_params / 4 + mlp[2].params) / params;
    double w_s = (mlp[0].flops / 4 + mlp[1].flops * (1 - mlp[1].split_params / mlp[1].params) +
                  mlp[1].flops * mlp[1].split_params / mlp[1].params / 4 + mlp[2].flops) / flops;
    double f = 2e-4 * 16 * (0.6 * p_s + 0.4 * (64.0 / 16) * w_s);
    double b = 4e-4 * 16 * (0.3 * p_s + 0.7 * (64.0 / 16) * w_s);
    assert_true(fabs(p.compute_s - (2e-4 + 4e-4) * 64 * w_s) <= REL * p.compute_s);
    assert_true(fabs(q.compute_s - (f + b)) <= REL * q.compute_s);
    assert_true(q.compute_s < p.compute_s); /* a quarter of the weights to read at 64 */
}

/* A balanced, compute-bound pipeline (four equal stages, fast links, one
 * core, p = m = 4): its span is (m + p - 1) t and each stage busy m t, so
 * n = p m / (m + p - 1) = 16 / 7 ranks compute at once, each at 1/n of the
 * core: the compute n times the one-core compute (probe: one rank). */
static void test_pipeline_ranks_computing(void **state)
{
    (void)state;
    setup_layers();
    struct sb_layout_inputs in = inputs(four, 4, 64);
    in.ranks_per_host = 4;
    in.links.intra = (struct sb_link){.alpha_s = 0, .bandwidth_Bps = 1e15};
    struct sb_layout l = {1, 1, 4, 4, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p, q;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    in.shared_cores = 1;
    in.probe_ranks = 1;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &q), SB_OK);
    assert_true(fabs(q.ranks_computing - 16.0 / 7) <= 1e-3 * 16.0 / 7);
    assert_true(fabs(q.compute_s - 16.0 / 7 * p.compute_s) <= 1e-3 * q.compute_s);
}

/* A within-host tp all-reduce keeps its ranks on their cores (shared memory:
 * the CPU copies and adds), so a pipeline's ranks computing at once count it
 * as busy: tp 2 x pp 2 on one host of 4 ranks sharing 1 core, blocks of
 * column/row pairs, m = 4; an intra link slow enough that the tp
 * all-reduces take about twice the compute leaves n near where it was (2.83
 * of 3.2: the first block has no input gradient to all-reduce, so the stages
 * differ), where counting compute alone takes it to 1. Across hosts (1 rank
 * a host) the same slow link is the network's time: n falls. */
static void test_tp_all_reduce_keeps_its_cores(void **state)
{
    (void)state;
    struct sb_layer_summary blocks[4];
    for (int i = 0; i < 4; i++)
        blocks[i] = (struct sb_layer_summary){"B", 1000, 1000, 100, 100, 1, 1, 100, 1000};
    struct sb_layout_inputs in = inputs(blocks, 4, 64);
    in.shared_cores = 1;
    in.probe_ranks = 1;
    struct sb_layout l = {1, 2, 2, 4, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction fast, slow;
    for (int hosts_of = 4; hosts_of >= 1; hosts_of -= 3) {
        in.ranks_per_host = hosts_of;
        struct sb_link quick = {.alpha_s = 0, .bandwidth_Bps = 1e15};
        struct sb_link crawl = {.alpha_s = 0, .bandwidth_Bps = 1e15};
        crawl.bandwidth_Bps = 2 * 4.0 * 16 * 100 / (3 * (2e-4 + 4e-4) * 16 / 4);
        if (hosts_of == 4) in.links.intra = quick; else in.links.inter = quick;
        assert_int_equal(sb_layout_predict(&l, &in, 4, &fast), SB_OK);
        if (hosts_of == 4) in.links.intra = crawl; else in.links.inter = crawl;
        assert_int_equal(sb_layout_predict(&l, &in, 4, &slow), SB_OK);
        assert_true(slow.tp_comm_s > 0.5 * slow.compute_s);
        if (hosts_of == 4)
            assert_true(slow.ranks_computing >= 0.8 * fast.ranks_computing);
        else
            assert_true(slow.ranks_computing <= 0.5 * fast.ranks_computing);
    }
}

/* One step of shape sh simulated with times tt (schedule_sim.h). */
static double simulated_step(const struct sb_pp_shape *sh, const struct sb_pp_times *tt)
{
    struct sb_pp_schedule sch;
    struct sb_pp_timeline tl;
    assert_int_equal(sb_pp_schedule_build(sh, &sch), SB_OK);
    assert_int_equal(sb_pp_simulate(&sch, tt, &tl), SB_OK);
    double step = tl.step_s;
    sb_pp_timeline_free(&tl);
    sb_pp_schedule_free(&sch);
    return step;
}

/* The schedule simulated with 4 equal stages, forward t/3 and backward
 * 2t/3 a micro-batch, and the messages p2p on the given links (the
 * stages' hosts' ways out 2h and in 2h + 1; NULL: free): the span the
 * model must price. */
static double simulated_span(enum sb_pp_kind kind, int m, double t, const double *p2p,
                             const int *act, const int *grad, int n_links)
{
    struct sb_pp_shape sh = {kind, 4, m, 1};
    double f[4] = {t / 3, t / 3, t / 3, t / 3}, b[4] = {2 * t / 3, 2 * t / 3, 2 * t / 3,
                                                     2 * t / 3};
    struct sb_pp_times tt = {.forward_s = f, .backward_s = b, .p2p_s = p2p, .act_links = act,
                             .grad_links = grad, .n_links = n_links};
    return simulated_step(&sh, &tt);
}

/* A host's one link carries both directions: four equal stages on hosts of
 * one rank, compute t a micro-batch, each message L = alpha + 4b x 100 / B
 * on the link out of its sender's host and into its receiver's. The model
 * is that schedule simulated (stage s on host s: activations s -> s + 1 on
 * 2s and 2(s+1) + 1, gradients back on 2(s+1) and 2s + 1). Link-bound
 * (L > t): hosts 1 and 2 each send m activations and m gradients, so the
 * step is at least 2 m L, above the m L + 4t + 5L of pricing each
 * direction as a link of its own (as before 2026-11-29: 16 L against
 * 13 L + 4t here); compute-bound (L < t): at least (m + p - 1) t. */
static void test_pipeline_links(void **state)
{
    (void)state;
    struct sb_layout_inputs in = four_inputs(1);
    double b = 64.0 / 8, t = 6e-4 * b / 4;
    double rates[2] = {1e6, 1e9}; /* 3.2 kB: 3.2 ms a message (> t = 1.2 ms); 3.2 us */
    int act[8] = {0, 3, 2, 5, 4, 7, -1, -1}, grad[8] = {2, 1, 4, 3, 6, 5, -1, -1};
    for (int i = 0; i < 2; i++) {
        in.links.inter = (struct sb_link){.alpha_s = 1e-5,
                                          .bandwidth_Bps = rates[i], .gamma_s_per_byte = 0};
        struct sb_layout l = {1, 1, 4, 8, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
        struct sb_layout_prediction p;
        assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
        double link = 1e-5 + 4.0 * b * 100 / rates[i], z[4] = {link, link, link, 0};
        double want = simulated_span(SB_PP_1F1B, 8, t, z, act, grad, 8);
        assert_true(fabs(p.step_s - want) <= 1e-9 * want);
        if (link > t)
            assert_true(p.step_s >= 2 * 8 * link && p.step_s > 8 * link + 4 * t + 5 * link);
        else
            assert_true(p.step_s >= 11 * t);
        assert_true(p.pp_cross);
    }
}

/* Each pipeline boundary on the link it crosses: four equal stages on 2
 * hosts of 2 ranks ([0,1] [2,3]), the within-host link free, the cross-host
 * one L = alpha + 4b x 100 / B per message > t (link-bound). Only the
 * boundary 1 -> 2 crosses (host 0's way out and host 1's way in, the
 * gradients back the other way), the other messages are free: the model is
 * that schedule simulated. Pricing every boundary on the cross-host link
 * (the axis's class; hosts of one rank above) costs more, by at least the
 * 4 L of the two other boundaries' fill and drain (the vit's pp 4 measured
 * 1.5-1.75x below that: docs/layouts.md, "The pipeline's boundaries, one
 * by one"). */
static void test_pipeline_boundaries(void **state)
{
    (void)state;
    struct sb_layout_inputs in = four_inputs(2);
    in.links.intra = (struct sb_link){.alpha_s = 0.0, .bandwidth_Bps = INFINITY,
                                      .gamma_s_per_byte = 0.0};
    in.links.inter = (struct sb_link){.alpha_s = 1e-5, .bandwidth_Bps = 1e6,
                                      .gamma_s_per_byte = 0.0};
    double b = 64.0 / 8, t = 6e-4 * b / 4, link = 1e-5 + 4.0 * b * 100 / 1e6;
    assert_true(link > t);
    struct sb_layout l = {1, 1, 4, 8, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p, every;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    double z[4] = {0, link, 0, 0};
    int act[8] = {-1, -1, 0, 3, -1, -1, -1, -1}, grad[8] = {-1, -1, 2, 1, -1, -1, -1, -1};
    double want = simulated_span(SB_PP_1F1B, 8, t, z, act, grad, 4);
    assert_true(fabs(p.step_s - want) <= 1e-9 * want);
    assert_true(p.step_s >= 8 * link); /* the boundary's m activations */
    assert_true(p.pp_cross); /* the axis as a whole still crosses hosts */
    in.ranks_per_host = 1;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &every), SB_OK);
    assert_true(every.step_s >= p.step_s + 4 * link);
    /* one host of 4 ranks: every boundary inside it, compute-bound */
    in.ranks_per_host = 4;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    assert_true(fabs(p.step_s - (8 + 3) * t) <= 1e-9 * p.step_s);
    assert_false(p.pp_cross);
}

/* A stage whose tp group spans hosts sends its collectives through its
 * host's link, the one its boundary's messages take (docs/layouts.md, "The
 * tp collectives on the boundary's link"). Four blocks of 1000 parameters,
 * all split (one all-reduce of the 100-float output forward, one of the
 * input backward but the first layer's), dp 1 x tp 2 x pp 2 on hosts of one
 * rank, m = 4 (b = 16): stage 0 (ranks 0, 1) on hosts 0 and 1, stage 1 on
 * 2 and 3. Each stage computes 0.25 of the work; a 6.4 kB all-reduce
 * (recursive doubling at tp 2) and a 6.4 kB message each take
 * alpha + 6400 / B on the cross-host link, one flow each on every host link
 * (w = 1). The model is the schedule simulated with those times and stage
 * s's forwards' and backwards' all-reduces on its host's links 2s' and
 * 2s' + 1 (s' its first rank's host: 0, 2), which meet the activations and
 * gradients there: above the same simulation without them. */
static void test_tp_traffic_on_the_boundary_link(void **state)
{
    (void)state;
    struct sb_layer_summary block[4];
    for (int i = 0; i < 4; i++)
        block[i] = (struct sb_layer_summary){"B", 1000, 1000, 100, 100, 1, 1, 100, 1000};
    struct sb_layout_inputs in = inputs(block, 4, 64);
    in.optimizer_s_per_param = 0;
    in.data_s_per_sample = 0;
    in.ranks_per_host = 1;
    in.links.inter = (struct sb_link){.alpha_s = 1e-5, .bandwidth_Bps = 1e6,
                                      .gamma_s_per_byte = 0};
    struct sb_layout l = {1, 2, 2, 4, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    assert_true(p.tp_cross && p.pp_cross);
    double b = 64.0 / 4, bytes = 4.0 * b * 100;
    double ar = sb_cost_allreduce_s(&in.links.inter, sb_allreduce_choose((size_t)bytes, 2), 2,
                                    bytes);
    double msg = 1e-5 + bytes / 1e6, tf = 2e-4 * b / 4, tb = 4e-4 * b / 4;
    struct sb_pp_shape sh = {SB_PP_1F1B, 2, 4, 1};
    double f[2] = {tf + 2 * ar, tf + 2 * ar}, bw[2] = {tb + ar, tb + 2 * ar};
    double z[2] = {msg, 0}, traffic[4] = {2 * ar, 2 * ar, ar, 2 * ar}, w[2] = {1, 1};
    int act[4] = {0, 5, -1, -1}, grad[4] = {4, 1, -1, -1}, on[4] = {0, 1, 4, 5};
    struct sb_pp_times tt = {.forward_s = f, .backward_s = bw, .p2p_s = z, .act_links = act,
                             .grad_links = grad, .n_links = 6, .compute_link_s = traffic,
                             .compute_links = on, .compute_weight = w};
    double shared = simulated_step(&sh, &tt);
    tt.compute_link_s = NULL;
    double apart = simulated_step(&sh, &tt);
    assert_true(fabs(p.step_s - shared) <= 1e-9 * shared);
    assert_true(shared > apart + msg / 2);
}

/* A stage's dp sync starts when its last backward ends and shares its
 * host's link with the gradients it sends after it (docs/layouts.md, "The
 * dp sync on the drain's link"). dp 2 x pp 2 of the four layers on 4 hosts
 * of one rank (tp-dp-pp: stage 0 on hosts 0 and 1, stage 1 on 2 and 3),
 * no overlap, so each stage's sync E is ddp's all-reduce of its 2000
 * parameters over 2 ranks on the cross-host link. The span is the schedule
 * simulated with those syncs as tails on the stages' hosts' links, and
 * stage 1's sync delays the drain's last gradient (host 2 to host 0): the
 * step is more than the flush plus E; the parts add up to the step. */
static void test_dp_sync_on_the_drain_link(void **state)
{
    (void)state;
    struct sb_layout_inputs in = four_inputs(1);
    in.overlap = 0;
    in.links.inter = (struct sb_link){.alpha_s = 1e-5, .bandwidth_Bps = 1e6,
                                      .gamma_s_per_byte = 0};
    struct sb_layout l = {2, 1, 2, 4, SB_PP_1F1B, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    struct sb_layout_prediction p;
    assert_int_equal(sb_layout_predict(&l, &in, 4, &p), SB_OK);
    struct sb_comm_model_query q = {.link = in.links.inter, .replicas = 2, .bytes = 4 * 2000.0,
                                    .backward_s = 0, .overlap = 0, .layers = 2};
    struct sb_comm_model_row rows[8];
    assert_true(in.dp_sync[0]->comm_model(&q, rows, 8) > 0);
    double sync = rows[0].comm_s, b = 64.0 / 2 / 4, t = 6e-4 * b / 2;
    double msg = 1e-5 + 4.0 * b * 100 / 1e6;
    struct sb_pp_shape sh = {SB_PP_1F1B, 2, 4, 1};
    double f[2] = {t / 3, t / 3}, bw[2] = {2 * t / 3, 2 * t / 3}, z[2] = {msg, 0};
    double tails[2] = {sync, sync};
    int act[4] = {0, 5, -1, -1}, grad[4] = {4, 1, -1, -1}, tail_links[4] = {0, 1, 4, 5};
    struct sb_pp_times tt = {.forward_s = f, .backward_s = bw, .p2p_s = z, .act_links = act,
                             .grad_links = grad, .n_links = 8, .tail_s = tails,
                             .tail_links = tail_links};
    double span = simulated_step(&sh, &tt);
    tt.tail_s = NULL;
    double flush = simulated_step(&sh, &tt);
    assert_true(fabs(p.step_s - span) <= 1e-9 * span);
    assert_true(span > flush + sync + 1e-9);
    assert_true(fabs(p.dp_exposed_s - (span - flush)) <= 1e-9 * span);
    assert_true(fabs(p.data_s + p.compute_s + p.bubble_s + p.dp_exposed_s + p.optimizer_s -
                     p.step_s) <= 1e-9 * p.step_s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_only_is_the_strategy_row), cmocka_unit_test(test_pp_only_bubble),
        cmocka_unit_test(test_ledger_by_hand),
        cmocka_unit_test(test_tp_collectives), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_axis_links),     cmocka_unit_test(test_summaries_of_a_block),
        cmocka_unit_test(test_link_share),
        cmocka_unit_test(test_relative_share_and_cores_floor),     cmocka_unit_test(test_world_hierarchical),
        cmocka_unit_test(test_dp_groups_share_the_link),
        cmocka_unit_test(test_unbalanced_bubble), cmocka_unit_test(test_shared_cores),
        cmocka_unit_test(test_pipeline_links), cmocka_unit_test(test_pipeline_boundaries),
        cmocka_unit_test(test_fixed_part), cmocka_unit_test(test_pipeline_ranks_computing),
        cmocka_unit_test(test_tp_all_reduce_keeps_its_cores),
        cmocka_unit_test(test_pipeline_span_at_least_the_cores),
        cmocka_unit_test(test_dp_sync_on_the_drain_link),
        cmocka_unit_test(test_tp_traffic_on_the_boundary_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
