/* `stratbench predict`; see predict.h and docs/cost-model.md. */
#include "cli/predict.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "cli/outputs.h"
#include "cli/predict_link.h"
#include "cli/suggest.h"
#include "cli/sweep.h"
#include "cli/train_opts.h"
#include "comm/cost_model.h"
#include "core/config.h"
#include "core/status.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#define PREDICT_SCHEMA_VERSION "1.4"
#define MAX_COUNTS 64
#define MAX_BUCKETS 64
/* Plausibility bounds on what a report says (a corrupt or hand-edited report
 * is refused, not extrapolated): a petabyte of parameters (2.5e14 fp32, far
 * above any model), a message latency of 10 s, 100 TB/s of link (above any
 * NVLink or NIC). */
#define MAX_PARAM_BYTES 1e15
#define MAX_ALPHA_S 10.0
#define MAX_BANDWIDTH_BPS 1e14
#define MAX_STRATEGIES 32     /* registered strategies predict looks at */
#define MAX_VARIANTS 8        /* rows one strategy gives per replica count */
#define MAX_ROWS_PER_COUNT 32 /* rows of all strategies per replica count */

struct opts {
    const char *report;
    int counts[MAX_COUNTS];
    int n_counts;
    double bandwidth_Bps; /* 0 = the report's */
    double latency_s;     /* < 0 = the report's */
    const char *calibrate; /* --calibrate LAYERS: the link from two runs' steps */
    double device_memory_bytes; /* --device-memory; 0 = not given */
    int json;
    const char *out;
    int help;
};

/* What predict takes from a report. */
struct run {
    char strategy[64];
    int replicas, batch, overlap;
    double bytes;                /* parameter bytes: M */
    double compute_ms;           /* data + h2d + forward + backward + optimizer */
    double step_ms;              /* step_ms.median (NaN when absent) */
    int plain;                   /* no --grad-compression, no local SGD */
    double backward_ms;
    double buckets[MAX_BUCKETS]; /* the run's gradient buckets, launch order (when its
                                  * strategy_details list them all) */
    int n_buckets;                /* 0: not listed */
    struct sb_link link;
    const char *link_kind;       /* link.source: "probe", "given" or "calibrated" */
    double alpha_probe_s;        /* comm.model.alpha_s (NaN when absent) */
    char workload[32];           /* config.workload and config.hidden: the model whose */
    int hidden[SB_MAX_HIDDEN], n_hidden;    /* matrices PowerSGD would compress */
    enum sb_optimizer_kind optimizer; /* config.optimizer (sgd when absent) */
    double activation_bytes;          /* memory.by_rank[0].activation_bytes (0 when absent) */
};

/* One predicted point. */
struct row {
    int replicas, servers;
    const char *strategy, *algorithm;
    char method[SB_METHOD_NAME_MAX]; /* the gradient method: "none", "fp16/bf16",
                                      * "powersgd-r2", ... (sb_method_name) */
    double comm_ms, exposed_ms, step_ms, samples_per_s, efficiency;
    double model_state_bytes; /* the ledger formula's, the largest rank's */
    double memory_bytes;      /* model state + the run's activations */
    int fits;                 /* memory_bytes <= --device-memory: 1, 0; -1 not asked */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench predict REPORT [flags]\n"
            "\n"
            "Extrapolates a run report to other replica counts with the alpha-beta cost\n"
            "model: step time, samples/s and efficiency per strategy, from the run's\n"
            "measured compute per step and its probed links (docs/cost-model.md).\n"
            "\n"
            "  --replicas LIST        8,64,512   replica counts to predict\n"
            "  --bandwidth RATE       (probed)   link bandwidth: 100gbit, 1gbit, 100mbit,\n"
            "                                    12.5GB/s, 125MB/s\n"
            "  --latency TIME         (probed)   link latency per message: 5us, 0.1ms, 2ns\n"
            "  --calibrate LAYERS                the link from the steps of two ddp runs:\n"
            "                                    REPORT and LAYERS, the same run with\n"
            "                                    --bucket-mb 0.000001 --no-overlap (alpha\n"
            "                                    under load, B of the all-reduce)\n"
            "  --device-memory SIZE              mark the rows whose memory per rank fits:\n"
            "                                    16GiB, 80GB, 512MiB\n"
            "  --json                            print JSON instead of the table\n"
            "  --out FILE                        also write the JSON to FILE (atomically)\n"
            "  -h, --help                        this text\n");
}

/* A unit a number may carry, and what one of it is in the quantity's own
 * unit (bytes per second, seconds, bytes). */
struct unit {
    const char *suffix;
    double scale;
};

/* *out = the number text starts with (strtod) times the scale of the unit
 * in units[0..n) that is all the rest of text (with per_second, a trailing
 * "/s" may follow it). The number must be finite and > 0 (>= 0 with
 * allow_zero); the product may overflow to infinity. Returns 1, or 0 (out
 * untouched) when text is not such a quantity: the caller says what it
 * expected. */
static int parse_quantity(const char *text, const struct unit *units, size_t n, int allow_zero,
                          int per_second, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || !isfinite(v) || !(allow_zero ? v >= 0 : v > 0)) return 0;
    size_t len = strlen(end);
    if (per_second && len >= 2 && strcmp(end + len - 2, "/s") == 0) len -= 2;
    for (size_t i = 0; i < n; i++)
        if (strlen(units[i].suffix) == len && strncmp(end, units[i].suffix, len) == 0) {
            *out = v * units[i].scale;
            return 1;
        }
    return 0;
}

/* "100gbit", "1Gbit/s", "12.5GB/s", "125MB" -> bytes per second. */
static sb_status parse_rate(const char *text, double *out)
{
    static const struct unit units[] = {
        {"bit", 0.125}, {"kbit", 125.0}, {"mbit", 125e3}, {"gbit", 125e6}, {"tbit", 125e9},
        {"Kbit", 125.0}, {"Mbit", 125e3}, {"Gbit", 125e6}, {"Tbit", 125e9},
        {"B", 1.0}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    };
    if (parse_quantity(text, units, sizeof units / sizeof units[0], 0, 1, out)) return SB_OK;
    return sb_error(SB_ERR_USAGE, "predict: --bandwidth: expected a positive rate like 100gbit, "
                    "1Gbit/s or 12.5GB/s, got '%s'", text);
}

/* "5us", "0.1ms", "2ns", "0s" -> seconds. */
static sb_status parse_time(const char *text, double *out)
{
    static const struct unit units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    if (parse_quantity(text, units, sizeof units / sizeof units[0], 1, 0, out)) return SB_OK;
    return sb_error(SB_ERR_USAGE, "predict: --latency: expected a time like 5us, 0.1ms or "
                    "2ns, got '%s'", text);
}

/* "16GiB", "80GB", "512MiB", "1.5TB" -> bytes (KiB.. powers of 1024, kB..
 * powers of 1000, B bytes). */
static sb_status parse_size(const char *text, double *out)
{
    static const struct unit units[] = {
        {"B", 1.0},           {"kB", 1e3},          {"KB", 1e3},          {"MB", 1e6},
        {"GB", 1e9},          {"TB", 1e12},         {"KiB", 1024.0},      {"MiB", 1048576.0},
        {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    double bytes;
    if (parse_quantity(text, units, sizeof units / sizeof units[0], 0, 0, &bytes) &&
        isfinite(bytes)) { /* not 1e308TiB */
        *out = bytes;
        return SB_OK;
    }
    return sb_error(SB_ERR_USAGE, "predict: --device-memory: expected a positive size like "
                    "16GiB, 80GB or 512MiB, got '%s'", text);
}

/* "8,64,512" -> counts, each 1..1000000. */
static sb_status parse_counts(const char *text, struct opts *o)
{
    o->n_counts = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 1 || v > 1000000 || (*end && *end != ',') ||
            o->n_counts == MAX_COUNTS)
            break;
        o->counts[o->n_counts++] = (int)v;
        if (!*end) return SB_OK;
        p = end + 1;
        if (!*p) break;
    }
    return sb_error(SB_ERR_USAGE, "predict: --replicas: expected up to %d counts in "
                    "1..1000000 like 8,64,512, got '%s'", MAX_COUNTS, text);
}

static sb_status parse_opts(struct opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"replicas", required_argument, NULL, 'r'}, {"bandwidth", required_argument, NULL, 'b'},
        {"latency", required_argument, NULL, 'l'},  {"json", no_argument, NULL, 'j'},
        {"calibrate", required_argument, NULL, 'c'},
        {"device-memory", required_argument, NULL, 'm'},
        {"out", required_argument, NULL, 'o'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->latency_s = -1.0;
    SB_TRY(parse_counts("8,64,512", o));
    optind = 1;
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":h", longs, NULL);
        const char *flag = argv[optind - 1]; /* the flag just read (getopt permutes) */
        if (c == -1) break;
        switch (c) {
        case 'h': o->help = 1; return SB_OK;
        case 'r': SB_TRY(parse_counts(optarg, o)); break;
        case 'b': SB_TRY(parse_rate(optarg, &o->bandwidth_Bps)); break;
        case 'l': SB_TRY(parse_time(optarg, &o->latency_s)); break;
        case 'm': SB_TRY(parse_size(optarg, &o->device_memory_bytes)); break;
        case 'c':
            if (!*optarg) return sb_error(SB_ERR_USAGE, "predict: --calibrate: expected a path");
            o->calibrate = optarg;
            break;
        case 'j': o->json = 1; break;
        case 'o':
            if (!*optarg) return sb_error(SB_ERR_USAGE, "predict: --out: expected a path");
            o->out = optarg;
            break;
        case ':': return sb_error(SB_ERR_USAGE, "predict: %s: missing value", flag);
        default:
            return sb_cli_bad_flag("predict", flag, longs);
        }
    }
    if (optind != argc - 1)
        return sb_error(SB_ERR_USAGE, "predict: expected one REPORT, got %d arguments (see "
                        "stratbench predict --help)", argc - optind);
    o->report = argv[optind];
    if (o->calibrate && (o->bandwidth_Bps > 0 || o->latency_s >= 0))
        return sb_error(SB_ERR_USAGE, "predict: --calibrate measures the link: give it or "
                        "--bandwidth/--latency, not both");
    if (o->calibrate && access(o->calibrate, R_OK) != 0)
        return sb_error(SB_ERR_USAGE, "predict: --calibrate %s: %s", o->calibrate,
                        strerror(errno));
    if (o->out) { /* checked before any work, as train's outputs are (cli/outputs.h) */
        const struct sb_output out = {"--out", o->out};
        const char *inputs[2] = {o->report, o->calibrate};
        SB_TRY(sb_outputs_check(&out, 1));
        SB_TRY(sb_outputs_check_inputs(&out, 1, inputs, o->calibrate ? 2 : 1));
    }
    return SB_OK;
}

/* obj.a.b... as a number, or NAN. */
static double num_path(const cJSON *o, const char *const *keys, int n)
{
    for (int i = 0; i < n && o; i++) o = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

/* The slowest rank's median of `phase` (phases_by_rank_ms.<phase>.max),
 * else rank 0's median (phases_ms.<phase>.median). */
static double phase_ms(const cJSON *doc, const char *phase)
{
    const char *by_rank[] = {"phases_by_rank_ms", phase, "max"};
    double v = num_path(doc, by_rank, 3);
    if (isfinite(v)) return v;
    const char *rank0[] = {"phases_ms", phase, "median"};
    return num_path(doc, rank0, 3);
}

/* Reads what predict needs from the report; bad input names the report. */
/* The error of a report without a probed link (comm.model null), naming the
 * reason the report shows: one process (nothing to probe), a strategy with
 * no cost model of its own (hierarchical: its report records no link), or
 * else --no-probe-links. */
static sb_status no_link_error(const char *path, const char *strategy, double world_size)
{
    const struct sb_strategy_ops *ops = sb_strategy_find(strategy);
    const char *why = "the run had --no-probe-links";
    char buf[160];
    if (!(world_size > 1) || (ops && !ops->uses_mpi)) {
        why = "a one-process run has no link to probe";
    } else if (ops && !ops->comm_model) {
        snprintf(buf, sizeof buf, "%s has no cost model of its own and records no link",
                 strategy);
        why = buf;
    }
    return sb_error(SB_ERR_INPUT, "predict: %s: no probed link (comm.model is null: %s); pass --bandwidth and "
                    "--latency", path, why);
}

/* config.workload and config.hidden of the report (empty: not stated). */
static void load_model_config(const cJSON *doc, struct run *r)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(doc, "config"), *h;
    const char *w = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "workload"));
    snprintf(r->workload, sizeof r->workload, "%s", w ? w : "");
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(cfg, "hidden"))
        if (cJSON_IsNumber(h) && r->n_hidden < (int)(sizeof r->hidden / sizeof r->hidden[0]))
            r->hidden[r->n_hidden++] = (int)h->valuedouble;
}

/* What the memory columns need from the report: the optimizer (its state
 * floats per parameter) and the activations of one rank (the same at every
 * replica count: the batch per replica is held). */
static void load_memory_inputs(const cJSON *doc, struct run *r)
{
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "config"), "optimizer");
    r->optimizer = cJSON_IsString(opt) && strcmp(opt->valuestring, "adam") == 0
                       ? SB_OPTIMIZER_ADAM
                       : SB_OPTIMIZER_SGD;
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "memory"), "by_rank");
    const char *k_act[] = {"activation_bytes"};
    double act = num_path(cJSON_GetArrayItem(ranks, 0), k_act, 1);
    r->activation_bytes = isfinite(act) && act > 0 ? act : 0.0;
}

/* The configuration row w stands for: w's replicas, the run's optimizer,
 * ops's defaults, and the options its variant names: a "servers" option
 * takes w->servers, a variant "stage-K" the option whose flag ends in
 * "-stage" (zero's --zero-stage). Written past the flag's accepted range
 * (--servers stops at 64; predict's rows reach 512). */
static void row_config(const struct run *r, const struct sb_strategy_ops *ops,
                       const struct row *w, struct sb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->replicas = w->replicas;
    cfg->optimizer = r->optimizer;
    sb_strategy_options_defaults(ops, cfg);
    for (const struct sb_strategy_option *op = ops->options; op && op->flag; op++) {
        size_t len = strlen(op->flag);
        int v = -1;
        if (strcmp(op->flag, "servers") == 0) v = w->servers;
        else if (len >= 6 && strcmp(op->flag + len - 6, "-stage") == 0 &&
                 strncmp(w->algorithm, "stage-", 6) == 0)
            v = atoi(w->algorithm + 6);
        else if (strcmp(op->flag, "stages") == 0 && strstr(w->algorithm, " P"))
            v = atoi(strstr(w->algorithm, " P") + 2); /* a pipeline's "1f1b P4" */
        if (v >= 0 && op->kind == SB_OPTION_INT)
            memcpy(cfg->strategy_opts + op->offset, &v, sizeof v);
    }
}

/* Fills w's memory columns: the largest model state of any rank by the
 * ledger's formula (sb_strategy_model_state_bytes: the ZeRO paper's fp32
 * accounting, docs/zero.md) for Ψ = M / 4, plus the run's activations;
 * fits against --device-memory where given. */
static void row_memory(const struct run *r, const struct opts *o,
                       const struct sb_strategy_ops *ops, struct row *w)
{
    struct sb_config cfg;
    row_config(r, ops, w, &cfg);
    w->model_state_bytes = sb_strategy_model_state_bytes(ops, &cfg, r->bytes / 4.0);
    w->memory_bytes = w->model_state_bytes + r->activation_bytes;
    w->fits = o->device_memory_bytes > 0 ? w->memory_bytes <= o->device_memory_bytes : -1;
}

/* Reads what predict needs from the report at `path`; need_link: the
 * report must have a probed link unless --bandwidth and --latency replace
 * it. Bad input names the report (SB_ERR_INPUT). */
static sb_status load_run(const struct opts *o, const char *path, int need_link, struct run *r)
{
    memset(r, 0, sizeof *r);
    cJSON *doc = NULL;
    SB_TRY(sb_json_read_file(path, &doc));
    sb_status st = SB_OK;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "schema_version");
    const cJSON *strategy = cJSON_GetObjectItemCaseSensitive(doc, "strategy");
    const char *k_replicas[] = {"replicas"}, *k_batch[] = {"config", "batch"};
    const char *k_bytes[] = {"model", "param_bytes"};
    const char *k_alpha[] = {"comm", "model", "alpha_s"};
    const char *k_bw[] = {"comm", "model", "bandwidth_Bps"};
    r->replicas = (int)num_path(doc, k_replicas, 1);
    r->batch = (int)num_path(doc, k_batch, 2);
    r->bytes = num_path(doc, k_bytes, 2);
    const char *phases[] = {"data", "h2d", "forward", "backward", "optimizer"};
    r->compute_ms = 0.0;
    for (int i = 0; i < 5; i++) r->compute_ms += phase_ms(doc, phases[i]);
    r->backward_ms = phase_ms(doc, "backward");
    r->step_ms = num_path(doc, (const char *[]){"step_ms", "median"}, 2);
    if (!cJSON_IsString(v) || strncmp(v->valuestring, "1.", 2) != 0) {
        st = sb_error(SB_ERR_INPUT, "predict: %s: not a stratbench run report (schema_version "
                      "1.x expected)", path);
    } else if (!cJSON_IsString(strategy) || !(r->batch > 0) || !(r->replicas > 0) ||
               !(r->bytes > 0) || !isfinite(r->compute_ms) || !(r->compute_ms > 0)) {
        st = sb_error(SB_ERR_INPUT, "predict: %s: a run report needs strategy, replicas, "
                      "config.batch, model.param_bytes and measured phases_ms (was any step "
                      "measured after --warmup-steps?)", path);
    } else if (!sb_strategy_find(strategy->valuestring)) {
        st = sb_error(SB_ERR_INPUT, "predict: %s: strategy '%s' is not one stratbench runs",
                      path, strategy->valuestring);
    } else if (!(r->bytes <= MAX_PARAM_BYTES)) {
        st = sb_error(SB_ERR_INPUT, "predict: %s: model.param_bytes %g is not a plausible model "
                      "size (at most %g)", path, r->bytes, MAX_PARAM_BYTES);
    } else {
        snprintf(r->strategy, sizeof r->strategy, "%s", strategy->valuestring);
        load_model_config(doc, r);
        const cJSON *ov = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "config"), "overlap");
        r->overlap = !cJSON_IsFalse(ov);
        const cJSON *bb = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "strategy_details"), "bucket_bytes");
        const cJSON *b;
        cJSON_ArrayForEach(b, bb)
            if (cJSON_IsNumber(b) && r->n_buckets < MAX_BUCKETS)
                r->buckets[r->n_buckets++] = b->valuedouble;
        double sum = 0.0;
        for (int i = 0; i < r->n_buckets; i++) sum += r->buckets[i];
        if (fabs(sum - r->bytes) > 0.5) r->n_buckets = 0; /* not all listed: each model's default */
        load_memory_inputs(doc, r);
        const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(doc, "config");
        /* plain: the gradient method sb_method_name calls "none" (any local
         * SGD period > 0 counts as one) */
        const char *gc =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "grad_compression"));
        const cJSON *lsgd = cJSON_GetObjectItemCaseSensitive(cfg, "local_sgd");
        double h = cJSON_IsNumber(lsgd) ? lsgd->valuedouble : 0.0;
        char method[SB_METHOD_NAME_MAX];
        sb_method_name(gc, 0, h > 0 ? (int)fmin(ceil(h), 1e9) : 0, method, sizeof method);
        r->plain = strcmp(method, "none") == 0;
        r->link.alpha_s = r->alpha_probe_s = num_path(doc, k_alpha, 3);
        r->link.bandwidth_Bps = num_path(doc, k_bw, 3);
        r->link_kind = o->bandwidth_Bps > 0 || o->latency_s >= 0 ? "given" : "probe";
        if (o->bandwidth_Bps > 0) r->link.bandwidth_Bps = o->bandwidth_Bps;
        if (o->latency_s >= 0) r->link.alpha_s = o->latency_s;
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "comm"), "model");
        if (need_link && cJSON_IsObject(model) &&
            ((o->latency_s < 0 && !(r->alpha_probe_s >= 0 && r->alpha_probe_s <= MAX_ALPHA_S)) ||
             (!(o->bandwidth_Bps > 0) &&
              !(r->link.bandwidth_Bps > 0 && r->link.bandwidth_Bps <= MAX_BANDWIDTH_BPS))))
            st = sb_error(SB_ERR_INPUT, "predict: %s: comm.model's link is corrupt (alpha_s %g, "
                          "bandwidth_Bps %g: expected 0 <= alpha_s <= %g s and 0 < "
                          "bandwidth_Bps <= %g)", path, num_path(doc, k_alpha, 3),
                          num_path(doc, k_bw, 3), MAX_ALPHA_S, MAX_BANDWIDTH_BPS);
        else if (need_link && (!(r->link.bandwidth_Bps > 0) || !(r->link.alpha_s >= 0)))
            st = no_link_error(path, r->strategy,
                               num_path(doc, (const char *[]){"world_size"}, 1));
    }
    cJSON_Delete(doc);
    return st;
}

/* --calibrate: r's link from its own step and the per-layer run's
 * (predict_link.h). Both must be plain ddp runs (no gradient method) of the
 * same model and replica count, whose communication is all exposed (the
 * per-layer run without overlap; r without it, or in one bucket), and the
 * per-layer run must have more buckets. Errors: SB_ERR_INPUT naming the
 * report and what is wrong, or predict_link's. */
static sb_status calibrated_link(const struct opts *o, struct run *r)
{
    struct run l;
    SB_TRY(load_run(o, o->calibrate, 0, &l));
    const struct run *both[2] = {r, &l};
    const char *paths[2] = {o->report, o->calibrate};
    for (int i = 0; i < 2; i++) {
        const struct run *x = both[i];
        if (strcmp(x->strategy, "ddp") != 0 || !x->plain || x->replicas < 2)
            return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s: needs a ddp run of 2 or "
                            "more replicas without --grad-compression or --local-sgd (got %s, "
                            "%d replica%s)", paths[i], x->strategy, x->replicas,
                            x->replicas == 1 ? "" : "s");
        if (x->n_buckets < 1)
            return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s: its buckets are not "
                            "listed (strategy_details.bucket_bytes)", paths[i]);
        if (!(x->step_ms > x->compute_ms))
            return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s: its median step is no "
                            "longer than its compute: no communication to calibrate from",
                            paths[i]);
    }
    if (l.replicas != r->replicas || fabs(l.bytes - r->bytes) > 0.5)
        return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s ran %d replicas of %.0f "
                        "bytes, %s %d of %.0f: the same run is needed", o->calibrate,
                        l.replicas, l.bytes, o->report, r->replicas, r->bytes);
    if (l.overlap || (r->overlap && r->n_buckets > 1))
        return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s overlapped its all-reduces "
                        "with backward, which hides part of them: run it with --no-overlap",
                        l.overlap ? o->calibrate : o->report);
    if (l.n_buckets <= r->n_buckets)
        return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s has %d bucket%s, %s %d: run "
                        "it with --bucket-mb 0.000001 --no-overlap (a bucket per layer)",
                        o->calibrate, l.n_buckets, l.n_buckets == 1 ? "" : "s", o->report,
                        r->n_buckets);
    struct sb_link_run one = {o->report, r->replicas, r->buckets, r->n_buckets,
                              r->step_ms - r->compute_ms};
    struct sb_link_run layers = {o->calibrate, l.replicas, l.buckets, l.n_buckets,
                                 l.step_ms - l.compute_ms};
    SB_TRY(sb_predict_calibrate_link(&one, &layers, isfinite(r->alpha_probe_s) ? r->alpha_probe_s
                                                                                 : 0.0,
                                     &r->link));
    r->link_kind = "calibrated";
    return SB_OK;
}

static void finish_row(const struct run *r, struct row *w)
{
    w->step_ms = r->compute_ms + w->exposed_ms;
    w->samples_per_s = 1e3 * (double)w->replicas * r->batch / w->step_ms;
    w->efficiency = r->compute_ms / w->step_ms;
}

/* w's comm, exposed (all of comm where the model states none), step,
 * samples/s and efficiency from model row m, its communication divided by
 * `every` (local SGD: one all-reduce every H steps). */
static void set_times(const struct run *r, const struct sb_comm_model_row *m, double every,
                      struct row *w)
{
    w->comm_ms = 1e3 * m->comm_s / every;
    w->exposed_ms = isnan(m->exposed_s) ? w->comm_ms : 1e3 * m->exposed_s / every;
    finish_row(r, w);
}

/* Builds the report's model on the cpu backend (its workload and
 * --hidden) into *out; free with the workload's destroy, which
 * *ops_out gives. Errors: those of building the model; SB_ERR_INPUT when
 * the report names no known workload. */
static sb_status build_model(const struct run *r, const struct sb_workload_ops **ops_out,
                             struct sb_model **out)
{
    const struct sb_workload_ops *wl = sb_workload_find(r->workload);
    const struct sb_backend_ops *be = sb_backend_find("cpu");
    if (!wl || !be) return sb_error(SB_ERR_INPUT, "predict: the report's workload is unknown");
    struct sb_train_opts t;
    sb_train_opts_defaults(&t);
    snprintf(t.cfg.workload, sizeof t.cfg.workload, "%s", r->workload);
    if (r->n_hidden > 0 && r->n_hidden <= SB_MAX_HIDDEN) {
        t.cfg.n_hidden = r->n_hidden;
        for (int i = 0; i < r->n_hidden; i++) t.cfg.hidden[i] = r->hidden[i];
    }
    *ops_out = wl;
    return wl->create(&t.cfg, be, 1, out);
}

/* PowerSGD's factors for the report's model at rank `rank`: *mn = sum of m
 * n over the matrices it compresses, *mnr = sum of (m + n) r over them
 * (sb_strategy_powersgd_factors plans them from the workload's own layout).
 * Errors: those of build_model. */
static sb_status powersgd_factors(const struct run *r, int rank, double *mn, double *mnr)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    SB_TRY(build_model(r, &wl, &m));
    sb_status st = sb_strategy_powersgd_factors(m, rank, mn, mnr);
    wl->destroy(m);
    return st;
}

/* The layers of the report's model (zero stage 3's units: the run's hook
 * gathers one layer at a time, sb_bucket_plan_create's layers), or 0 when
 * the model cannot be built (an unknown workload): the caller's models
 * then fall back to the buckets. */
static int model_layers(const struct run *r)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    int layers = 0;
    if (build_model(r, &wl, &m)) return 0;
    if (sb_strategy_model_layers(m, &layers)) layers = 0;
    wl->destroy(m);
    return layers;
}

/* Bytes per sample of the activation at a cut between two layers of the
 * report's model, the mean over its cuts (a pipeline's boundary), or 0
 * when the model cannot be built or has one layer. */
static double model_boundary_bytes(const struct run *r)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    if (build_model(r, &wl, &m)) return 0;
    double sum = 0;
    for (int l = 0; l + 1 < m->n_layers; l++) sum += 4.0 * (double)m->layers[l].out_floats;
    double mean = m->n_layers > 1 ? sum / (m->n_layers - 1) : 0;
    wl->destroy(m);
    return mean;
}

/* The ranks and periods predict models (bench/compression.py's). */
static const int POWERSGD_RANKS[] = {1, 2, 4};
static const int LOCAL_SGD_H[] = {4, 16};

/* One row of `ops` for method `name`: its comm_model's first (--allreduce
 * auto) variant on the buckets `bytes` (nb), after backward (no overlap:
 * the methods run after it), communication divided by `every`. */
static int method_row(const struct run *r, const struct sb_comm_model_query *q,
                      const struct sb_strategy_ops *ops, const double *bytes, int nb,
                      double every, const char *name, struct row *w)
{
    struct sb_comm_model_query mq = *q;
    struct sb_comm_model_row model[MAX_VARIANTS];
    mq.bucket_bytes = bytes;
    mq.n_buckets = nb;
    mq.overlap = 0;
    mq.bytes = 0;
    for (int b = 0; b < nb; b++) mq.bytes += bytes[b];
    if (ops->comm_model(&mq, model, MAX_VARIANTS) < 1) return 0;
    *w = (struct row){.replicas = q->replicas, .servers = model[0].servers,
                      .strategy = ops->name, .algorithm = model[0].variant};
    snprintf(w->method, sizeof w->method, "%s", name);
    set_times(r, &model[0], every, w);
    return 1;
}

/* Rows of the gradient methods (docs/cost-model.md) for a strategy whose
 * rows all-reduce the gradient buckets, at most cap: fp16/bf16 (every
 * bucket at half its bytes), PowerSGD at ranks 1, 2, 4 (three all-reduces:
 * the uncompressed tensors, 4(n_params - sum mn) bytes, and P and Q, each
 * modelled as half of 4 sum (m+n) r), local SGD H = 4, 16 (the plain
 * all-reduce every H steps: 1/H of it per step). Returns the rows added. */
static int method_rows(const struct run *r, const struct sb_comm_model_query *q,
                       const struct sb_strategy_ops *ops, struct row *rows, int cap)
{
    double half[MAX_BUCKETS], plain[MAX_BUCKETS];
    char name[SB_METHOD_NAME_MAX];
    int nb = r->n_buckets ? r->n_buckets : 1, k = 0;
    for (int b = 0; b < nb; b++) {
        plain[b] = r->n_buckets ? r->buckets[b] : r->bytes;
        half[b] = plain[b] / 2;
    }
    if (k < cap) k += method_row(r, q, ops, half, nb, 1.0, "fp16/bf16", &rows[k]);
    for (size_t i = 0; i < sizeof POWERSGD_RANKS / sizeof POWERSGD_RANKS[0] && k < cap; i++) {
        double mn, mnr;
        if (powersgd_factors(r, POWERSGD_RANKS[i], &mn, &mnr)) break; /* no model: no rows */
        double three[3] = {r->bytes - 4.0 * mn, 2.0 * mnr, 2.0 * mnr};
        sb_method_name("powersgd", POWERSGD_RANKS[i], 0, name, sizeof name);
        k += method_row(r, q, ops, three, 3, 1.0, name, &rows[k]);
    }
    for (size_t i = 0; i < sizeof LOCAL_SGD_H / sizeof LOCAL_SGD_H[0] && k < cap; i++) {
        sb_method_name("none", 0, LOCAL_SGD_H[i], name, sizeof name);
        k += method_row(r, q, ops, plain, nb, LOCAL_SGD_H[i], name, &rows[k]);
    }
    return k;
}

/* A strategy's model line for the table's header. */
typedef char legend_line[sizeof(((struct sb_comm_model_row *)0)->legend)];

/* Rows (at most cap): per replica count, every variant of every registered
 * strategy that has a cost model (its comm_model op), in registry order; a
 * variant that states no exposed time exposes all of its communication.
 * legends[i] gets registered strategy i's model line, "" for one without a
 * model. Returns the number of rows. */
static int predict_rows(const struct run *r, const struct opts *o, struct row *rows, int cap,
                        legend_line legends[MAX_STRATEGIES])
{
    struct sb_comm_model_row model[MAX_VARIANTS];
    int k = 0, n_strategies = sb_strategy_count(), layers = model_layers(r);
    double boundary = model_boundary_bytes(r);
    for (int i = 0; i < MAX_STRATEGIES; i++) legends[i][0] = 0;
    for (int c = 0; c < o->n_counts; c++) {
        struct sb_comm_model_query q = {
            .link = r->link,
            .replicas = o->counts[c],
            .bytes = r->bytes,
            .backward_s = 1e-3 * r->backward_ms,
            .bucket_bytes = r->n_buckets ? r->buckets : NULL,
            .n_buckets = r->n_buckets,
            .overlap = r->overlap,
            .layers = layers,
            .compute_s = 1e-3 * r->compute_ms,
            .batch = r->batch,
            .boundary_bytes = boundary,
        };
        for (int i = 0; i < n_strategies && i < MAX_STRATEGIES; i++) {
            const struct sb_strategy_ops *ops = sb_strategy_at(i);
            if (!ops->comm_model) continue;
            int n = ops->comm_model(&q, model, MAX_VARIANTS);
            if (n > 0 && c == 0) snprintf(legends[i], sizeof legends[i], "%s", model[0].legend);
            for (int v = 0; v < n && k < cap; v++) {
                struct row *w = &rows[k++];
                *w = (struct row){.replicas = q.replicas, .servers = model[v].servers,
                                  .strategy = ops->name, .algorithm = model[v].variant,
                                  .method = "none"};
                set_times(r, &model[v], 1.0, w);
                row_memory(r, o, ops, w);
            }
            if (ops->predict_methods) {
                int added = method_rows(r, &q, ops, rows + k, cap - k);
                for (int j = k; j < k + added; j++) row_memory(r, o, ops, &rows[j]);
                k += added;
            }
        }
    }
    return k;
}

/* The memory columns' header line. */
static void print_memory_legend(const struct run *r, const struct opts *o)
{
    printf("# memory per rank: model state by the ledger's formula (fp32; %s: %d optimizer "
           "float%s per parameter; docs/zero.md) + the run's activations %.1f MB; fits: <= "
           "--device-memory", sb_optimizer_name(r->optimizer),
           r->optimizer == SB_OPTIMIZER_ADAM ? 2 : 1, r->optimizer == SB_OPTIMIZER_ADAM ? "s" : "",
           1e-6 * r->activation_bytes);
    if (o->device_memory_bytes > 0) printf(" %.4g GB\n", 1e-9 * o->device_memory_bytes);
    else printf(" (not given)\n");
}

static void print_table(const struct run *r, const struct opts *o, const struct row *rows,
                        int n, legend_line legends[MAX_STRATEGIES])
{
    printf("# stratbench predict: %s (%s, %d replica%s measured, %.0f bytes of parameters, "
           "batch %d per replica)\n", o->report, r->strategy, r->replicas,
           r->replicas == 1 ? "" : "s", r->bytes, r->batch);
    printf("# link: latency %.2f us, bandwidth %.4g GB/s = %.4g Gbit/s (%s)\n",
           1e6 * r->link.alpha_s, 1e-9 * r->link.bandwidth_Bps, 8e-9 * r->link.bandwidth_Bps,
           strcmp(r->link_kind, "probe") == 0        ? "probed at the start of the run"
           : strcmp(r->link_kind, "calibrated") == 0 ? "calibrated from the steps of the two runs"
                                                     : "given");
    printf("# compute per step: %.3f ms (data + h2d + forward + backward + optimizer, slowest "
           "rank), the same at every scale (weak scaling)\n", r->compute_ms);
    printf("# model (docs/cost-model.md): "); /* one line per strategy's model */
    for (int i = 0, first = 1; i < sb_strategy_count() && i < MAX_STRATEGIES; i++)
        if (legends[i][0]) {
            printf("%s%s", first ? "" : "\n# ", legends[i]);
            first = 0;
        }
    printf(" efficiency = compute / step\n");
    print_memory_legend(r, o);
    printf("#\n");
    printf("# %8s  %-8s  %7s  %-18s  %-12s  %12s  %12s  %12s  %14s  %10s  %12s  %12s  %4s\n",
           "replicas", "strategy", "servers", "algorithm", "method", "comm", "exposed", "step",
           "samples", "efficiency", "state/rank", "memory/rank", "fits");
    printf("# %8s  %-8s  %7s  %-18s  %-12s  %12s  %12s  %12s  %14s  %10s  %12s  %12s  %4s\n", "",
           "", "", "", "", "ms", "ms", "ms", "1/s", "", "MB", "MB", "");
    for (int i = 0; i < n; i++) {
        const struct row *w = &rows[i];
        printf("  %8d  %-8s  %7d  %-18s  %-12s  %12.3f  %12.3f  %12.3f  %14.1f  %10.4f  %12.1f"
               "  %12.1f  %4s\n", w->replicas, w->strategy, w->servers, w->algorithm, w->method,
               w->comm_ms, w->exposed_ms, w->step_ms, w->samples_per_s, w->efficiency,
               1e-6 * w->model_state_bytes, 1e-6 * w->memory_bytes,
               w->fits < 0 ? "-" : w->fits ? "yes" : "no");
    }
}

/* The memory inputs of the JSON document (reports/README.md). */
static int add_memory_header(cJSON *doc, const struct run *r, const struct opts *o)
{
    return cJSON_AddStringToObject(doc, "optimizer",
                                   sb_optimizer_name(r->optimizer)) &&
           cJSON_AddNumberToObject(doc, "activation_bytes", r->activation_bytes) &&
           (o->device_memory_bytes > 0
                ? cJSON_AddNumberToObject(doc, "device_memory_bytes", o->device_memory_bytes) != NULL
                : cJSON_AddNullToObject(doc, "device_memory_bytes") != NULL);
}

/* A row's memory columns. */
static int add_memory_row(cJSON *e, const struct row *w)
{
    return cJSON_AddNumberToObject(e, "model_state_bytes", w->model_state_bytes) &&
           cJSON_AddNumberToObject(e, "memory_bytes", w->memory_bytes) &&
           (w->fits < 0 ? cJSON_AddNullToObject(e, "fits") != NULL
                        : cJSON_AddBoolToObject(e, "fits", w->fits) != NULL);
}

/* The JSON document of the prediction (documented in reports/README.md). */
static cJSON *to_json(const struct run *r, const struct opts *o, const struct row *rows, int n)
{
    cJSON *doc = cJSON_CreateObject(), *link = NULL, *arr = NULL;
    int ok = doc && cJSON_AddStringToObject(doc, "schema_version", PREDICT_SCHEMA_VERSION) &&
             cJSON_AddStringToObject(doc, "report", o->report) &&
             cJSON_AddStringToObject(doc, "measured_strategy", r->strategy) &&
             cJSON_AddNumberToObject(doc, "measured_replicas", r->replicas) &&
             cJSON_AddNumberToObject(doc, "batch", r->batch) &&
             cJSON_AddNumberToObject(doc, "bytes", r->bytes) &&
             cJSON_AddNumberToObject(doc, "compute_ms", r->compute_ms) &&
             cJSON_AddNumberToObject(doc, "backward_ms", r->backward_ms) &&
             cJSON_AddBoolToObject(doc, "overlap", r->overlap) &&
             add_memory_header(doc, r, o) &&
             (link = cJSON_AddObjectToObject(doc, "link")) &&
             cJSON_AddNumberToObject(link, "alpha_s", r->link.alpha_s) &&
             cJSON_AddNumberToObject(link, "bandwidth_Bps", r->link.bandwidth_Bps) &&
             cJSON_AddStringToObject(link, "source", r->link_kind) &&
             (!o->calibrate ||
              (cJSON_AddStringToObject(link, "calibrate_report", o->calibrate) &&
               (isfinite(r->alpha_probe_s)
                    ? cJSON_AddNumberToObject(link, "alpha_probe_s", r->alpha_probe_s)
                    : cJSON_AddNullToObject(link, "alpha_probe_s")))) &&
             (arr = cJSON_AddArrayToObject(doc, "rows"));
    for (int i = 0; ok && i < n; i++) {
        const struct row *w = &rows[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            ok = 0;
            break;
        }
        ok = cJSON_AddNumberToObject(e, "replicas", w->replicas) &&
             cJSON_AddStringToObject(e, "strategy", w->strategy) &&
             cJSON_AddNumberToObject(e, "servers", w->servers) &&
             cJSON_AddStringToObject(e, "algorithm", w->algorithm) &&
             cJSON_AddStringToObject(e, "method", w->method) &&
             cJSON_AddNumberToObject(e, "comm_ms", w->comm_ms) &&
             cJSON_AddNumberToObject(e, "exposed_ms", w->exposed_ms) &&
             cJSON_AddNumberToObject(e, "step_ms", w->step_ms) &&
             cJSON_AddNumberToObject(e, "samples_per_s", w->samples_per_s) &&
             cJSON_AddNumberToObject(e, "efficiency", w->efficiency) && add_memory_row(e, w);
    }
    if (!ok) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

int sb_predict_main(int argc, char **argv)
{
    struct opts o;
    struct run r;
    sb_status st = parse_opts(&o, argc, argv);
    if (!st && o.help) {
        usage(stdout);
        return 0;
    }
    if (!st) st = load_run(&o, o.report, !o.calibrate, &r);
    if (!st && o.calibrate) st = calibrated_link(&o, &r);
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return sb_status_exit_code(st);
    }
    int cap = MAX_COUNTS * MAX_ROWS_PER_COUNT;
    struct row *rows = malloc((size_t)cap * sizeof *rows);
    legend_line legends[MAX_STRATEGIES];
    int n = rows ? predict_rows(&r, &o, rows, cap, legends) : 0;
    cJSON *doc = rows ? to_json(&r, &o, rows, n) : NULL;
    if (!doc) {
        free(rows);
        fprintf(stderr, "stratbench: predict: out of memory\n");
        return 1;
    }
    if (o.out) st = sb_json_write_file_atomic(o.out, doc);
    if (!st) {
        if (o.json) {
            char *text = cJSON_Print(doc);
            if (text) printf("%s\n", text);
            cJSON_free(text);
        } else {
            print_table(&r, &o, rows, n, legends);
        }
    }
    free(rows);
    cJSON_Delete(doc);
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return sb_status_exit_code(st);
    }
    return 0;
}
