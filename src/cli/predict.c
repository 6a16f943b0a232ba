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
#include "cli/predict_rows.h"
#include "cli/suggest.h"
#include "cli/sweep.h"
#include "cli/train_opts.h"
#include "comm/cost_model.h"
#include "core/config.h"
#include "core/status.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench predict REPORT [flags]\n"
            "       stratbench predict --params N [--replicas LIST] [--precision P]\n"
            "                          [--optimizer O] [--json] [--out FILE]\n"
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
            "  --params N                        no REPORT: the model state per rank of ddp\n"
            "                                    and zero stages 1-3 for N parameters (7.5e9)\n"
            "                                    in the ZeRO paper's accounting\n"
            "  --precision P          fp32       with --params: fp32 | bf16 | fp16\n"
            "  --optimizer O          adam       with --params: adam | sgd\n"
            "  --json                            print JSON instead of the table\n"
            "  --out FILE                        also write the JSON to FILE (atomically)\n"
            "  -h, --help                        this text\n");
    sb_predict_layouts_usage(out);
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
static sb_status parse_rate(const char *flag, const char *text, double *out)
{
    static const struct unit units[] = {
        {"bit", 0.125}, {"kbit", 125.0}, {"mbit", 125e3}, {"gbit", 125e6}, {"tbit", 125e9},
        {"Kbit", 125.0}, {"Mbit", 125e3}, {"Gbit", 125e6}, {"Tbit", 125e9},
        {"B", 1.0}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    };
    if (parse_quantity(text, units, sizeof units / sizeof units[0], 0, 1, out)) {
        if (*out <= MAX_BANDWIDTH_BPS) return SB_OK;
        return sb_error(SB_ERR_USAGE, "predict: %s: '%s' is out of range (at most "
                        "100TB/s, above any NVLink or NIC)", flag, text);
    }
    return sb_error(SB_ERR_USAGE, "predict: %s: expected a positive rate like 100gbit, "
                    "1Gbit/s or 12.5GB/s, got '%s'", flag, text);
}

/* "5us", "0.1ms", "2ns", "0s" -> seconds. */
static sb_status parse_time(const char *flag, const char *text, double *out)
{
    static const struct unit units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    if (parse_quantity(text, units, sizeof units / sizeof units[0], 1, 0, out)) {
        if (*out <= MAX_ALPHA_S) return SB_OK;
        return sb_error(SB_ERR_USAGE, "predict: %s: '%s' is out of range (at most 10s "
                        "per message)", flag, text);
    }
    return sb_error(SB_ERR_USAGE, "predict: %s: expected a time like 5us, 0.1ms or "
                    "2ns, got '%s'", flag, text);
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

/* An integer flag in [lo, hi] into *out; SB_ERR_USAGE naming the flag. */
static sb_status parse_int(const char *flag, const char *text, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return sb_error(SB_ERR_USAGE, "predict: %s: expected an integer in %d..%d, got '%s'",
                        flag, lo, hi, text);
    *out = (int)v;
    return SB_OK;
}

static sb_status parse_opts(struct opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"replicas", required_argument, NULL, 'r'}, {"bandwidth", required_argument, NULL, 'b'},
        {"latency", required_argument, NULL, 'l'},  {"json", no_argument, NULL, 'j'},
        {"calibrate", required_argument, NULL, 'c'},
        {"device-memory", required_argument, NULL, 'm'},
        {"out", required_argument, NULL, 'o'},      {"help", no_argument, NULL, 'h'},
        {"layouts", no_argument, NULL, 'y'},        {"hosts", required_argument, NULL, 'H'},
        {"ranks-per-host", required_argument, NULL, 'R'},
        {"intra-bandwidth", required_argument, NULL, 'B'},
        {"intra-latency", required_argument, NULL, 'L'},
        {"links-from", required_argument, NULL, 'F'},
        {"global-batch", required_argument, NULL, 'g'},
        {"top", required_argument, NULL, 't'},
        {"shared-cores", required_argument, NULL, 'C'},
        {"params", required_argument, NULL, 'p'},   {"precision", required_argument, NULL, 'P'},
        {"optimizer", required_argument, NULL, 'O'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->optimizer = SB_OPTIMIZER_ADAM; /* the paper's K = 12 is mixed-precision Adam's */
    int memory_flag = 0;              /* --precision or --optimizer given */
    o->latency_s = -1.0;
    o->intra_latency_s = -1.0;
    o->top = -1;
    SB_TRY(parse_counts("8,64,512", o));
    int counts_given = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":h", longs, NULL);
        const char *flag = argv[optind - 1]; /* the flag just read (getopt permutes) */
        if (c == -1) break;
        switch (c) {
        case 'h': o->help = 1; return SB_OK;
        case 'r':
            SB_TRY(parse_counts(optarg, o));
            counts_given = 1;
            break;
        case 'b': SB_TRY(parse_rate("--bandwidth", optarg, &o->bandwidth_Bps)); break;
        case 'l': SB_TRY(parse_time("--latency", optarg, &o->latency_s)); break;
        case 'B': SB_TRY(parse_rate("--intra-bandwidth", optarg, &o->intra_bandwidth_Bps)); break;
        case 'L': SB_TRY(parse_time("--intra-latency", optarg, &o->intra_latency_s)); break;
        case 'F':
            if (!*optarg) return sb_error(SB_ERR_USAGE, "predict: --links-from: expected a path");
            o->links_from = optarg;
            break;
        case 'y': o->layouts = 1; break;
        case 'H': SB_TRY(parse_int("--hosts", optarg, 1, 4096, &o->hosts)); break;
        case 'R': SB_TRY(parse_int("--ranks-per-host", optarg, 1, 1024, &o->ranks_per_host)); break;
        case 'g': SB_TRY(parse_int("--global-batch", optarg, 1, 1 << 24, &o->global_batch)); break;
        case 't': SB_TRY(parse_int("--top", optarg, 0, 1 << 20, &o->top)); break;
        case 'C': SB_TRY(parse_int("--shared-cores", optarg, 1, 1 << 20, &o->shared_cores)); break;
        case 'm': SB_TRY(parse_size(optarg, &o->device_memory_bytes)); break;
        case 'c':
            if (!*optarg) return sb_error(SB_ERR_USAGE, "predict: --calibrate: expected a path");
            o->calibrate = optarg;
            break;
        case 'p': SB_TRY(sb_predict_parse_params(optarg, &o->n_params)); break;
        case 'P':
            if (!sb_precision_parse(optarg, &o->precision))
                return sb_error(SB_ERR_USAGE, "predict: --precision: expected fp32, bf16 or "
                                "fp16, got '%s'", optarg);
            memory_flag = 1;
            break;
        case 'O':
            if (strcmp(optarg, "adam") != 0 && strcmp(optarg, "sgd") != 0)
                return sb_error(SB_ERR_USAGE, "predict: --optimizer: expected adam or sgd, got "
                                "'%s'", optarg);
            o->optimizer = strcmp(optarg, "adam") == 0 ? SB_OPTIMIZER_ADAM : SB_OPTIMIZER_SGD;
            memory_flag = 1;
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
    if (o->n_params > 0) { /* the memory table alone: no report */
        if (optind != argc)
            return sb_error(SB_ERR_USAGE, "predict: --params: takes no REPORT (got '%s')",
                            argv[optind]);
        if (o->calibrate || o->bandwidth_Bps > 0 || o->latency_s >= 0 ||
            o->device_memory_bytes > 0)
            return sb_error(SB_ERR_USAGE, "predict: --params: only with --replicas, "
                            "--precision, --optimizer, --json and --out");
        if (o->out) {
            const struct sb_output out = {"--out", o->out};
            SB_TRY(sb_outputs_check(&out, 1));
        }
        return SB_OK;
    }
    if (memory_flag)
        return sb_error(SB_ERR_USAGE, "predict: --precision and --optimizer go with --params "
                        "(a REPORT states its own)");
    int n_reports = argc - optind;
    if (o->layouts && n_reports > SB_PREDICT_MAX_REPORTS)
        return sb_error(SB_ERR_USAGE, "predict: --layouts: at most %d REPORTs (runs of one "
                        "probe), got %d", SB_PREDICT_MAX_REPORTS, n_reports);
    if (n_reports < 1 || (n_reports > 1 && !o->layouts))
        return sb_error(SB_ERR_USAGE, "predict: expected one REPORT, got %d arguments (several "
                        "go with --layouts; see stratbench predict --help)", n_reports);
    for (int i = 0; i < n_reports; i++) o->reports[i] = argv[optind + i];
    o->n_reports = n_reports;
    o->report = o->reports[0];
    SB_TRY(sb_predict_layouts_check_flags(o, counts_given));
    if (o->calibrate && (o->bandwidth_Bps > 0 || o->latency_s >= 0))
        return sb_error(SB_ERR_USAGE, "predict: --calibrate measures the link: give it or "
                        "--bandwidth/--latency, not both");
    if (o->calibrate && access(o->calibrate, R_OK) != 0)
        return sb_error(SB_ERR_USAGE, "predict: --calibrate %s: %s", o->calibrate,
                        strerror(errno));
    if (o->out) { /* checked before any work, as train's outputs are (cli/outputs.h) */
        const struct sb_output out = {"--out", o->out};
        const char *inputs[SB_PREDICT_MAX_REPORTS + 1];
        int n_inputs = 0;
        for (int i = 0; i < o->n_reports; i++) inputs[n_inputs++] = o->reports[i];
        if (o->calibrate) inputs[n_inputs++] = o->calibrate;
        SB_TRY(sb_outputs_check(&out, 1));
        SB_TRY(sb_outputs_check_inputs(&out, 1, inputs, n_inputs));
    }
    return SB_OK;
}

double sb_predict_num_path(const cJSON *o, const char *const *keys, int n)
{
    for (int i = 0; i < n && o; i++) o = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

double sb_predict_phase_ms(const cJSON *doc, const char *phase)
{
    const char *by_rank[] = {"phases_by_rank_ms", phase, "max"};
    double v = sb_predict_num_path(doc, by_rank, 3);
    if (isfinite(v)) return v;
    const char *rank0[] = {"phases_ms", phase, "median"};
    return sb_predict_num_path(doc, rank0, 3);
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

/* config.workload, config.hidden, config.transformer and config.eval_batch
 * of the report, and whether it ran with --sequence-parallel (empty or
 * zeros: not stated). */
static void load_model_config(const cJSON *doc, struct run *r)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(doc, "config"), *h;
    const char *w = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "workload"));
    snprintf(r->workload, sizeof r->workload, "%s", w ? w : "");
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(cfg, "hidden"))
        if (cJSON_IsNumber(h) && r->n_hidden < (int)(sizeof r->hidden / sizeof r->hidden[0]))
            r->hidden[r->n_hidden++] = (int)h->valuedouble;
    const cJSON *eb = cJSON_GetObjectItemCaseSensitive(cfg, "eval_batch");
    r->eval_batch = cJSON_IsNumber(eb) && eb->valuedouble >= 1 && eb->valuedouble <= 1e6
                        ? (int)eb->valuedouble : 0;
    r->sequence_parallel = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "strategy_details"), "sequence_parallel"));
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, "transformer");
    const char *keys[] = {"patch", "width", "depth", "heads", "mlp_ratio"};
    int *fields[] = {&r->vit.patch, &r->vit.width, &r->vit.depth, &r->vit.heads,
                     &r->vit.mlp_ratio};
    for (int i = 0; i < 5; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, keys[i]);
        if (cJSON_IsNumber(x)) *fields[i] = (int)x->valuedouble;
    }
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
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "config"), "precision");
    r->precision = SB_PRECISION_FP32; /* reports before schema 1.12 trained in fp32 */
    if (cJSON_IsString(prec)) sb_precision_parse(prec->valuestring, &r->precision);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "memory"), "by_rank");
    const char *k_act[] = {"activation_bytes"};
    double act = sb_predict_num_path(cJSON_GetArrayItem(ranks, 0), k_act, 1);
    r->activation_bytes = isfinite(act) && act > 0 ? act : 0.0;
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
    r->replicas = (int)sb_predict_num_path(doc, k_replicas, 1);
    r->batch = (int)sb_predict_num_path(doc, k_batch, 2);
    r->bytes = sb_predict_num_path(doc, k_bytes, 2);
    const char *phases[] = {"data", "h2d", "forward", "backward", "optimizer"};
    r->compute_ms = 0.0;
    for (int i = 0; i < 5; i++) r->compute_ms += sb_predict_phase_ms(doc, phases[i]);
    r->backward_ms = sb_predict_phase_ms(doc, "backward");
    r->step_ms = sb_predict_num_path(doc, (const char *[]){"step_ms", "median"}, 2);
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
        sb_predict_load_layout_inputs(doc, r);
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
        r->link.alpha_s = r->alpha_probe_s = sb_predict_num_path(doc, k_alpha, 3);
        r->link.bandwidth_Bps = sb_predict_num_path(doc, k_bw, 3);
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
                          "bandwidth_Bps <= %g)", path, sb_predict_num_path(doc, k_alpha, 3),
                          sb_predict_num_path(doc, k_bw, 3), MAX_ALPHA_S, MAX_BANDWIDTH_BPS);
        else if (need_link && (!(r->link.bandwidth_Bps > 0) || !(r->link.alpha_s >= 0)))
            st = no_link_error(path, r->strategy,
                               sb_predict_num_path(doc, (const char *[]){"world_size"}, 1));
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
    static struct run l;
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

/* predict --layouts R1 R2 ...: several runs of one probe, whose compute a
 * step varies between runs by more than any model term on shared cores
 * (docs/layouts.md, "The probe, four times over"). The one whose compute a
 * step (forward + backward, as the layout model prices them:
 * sb_predict_phase_ms) is the median, of an even count the lower of the
 * middle two, becomes o->report; each one's compute goes to
 * o->reports_compute_ms. Errors: load_run's, naming the file; SB_ERR_INPUT
 * naming the file when it lacks the forward and backward phases or is not a
 * run of the first report's strategy, replica count, batch, workload and
 * model size. */
static sb_status median_report(struct opts *o)
{
    static struct run first, x; /* large: their layer tables */
    int order[SB_PREDICT_MAX_REPORTS];
    for (int i = 0; i < o->n_reports; i++) {
        struct run *y = i ? &x : &first;
        SB_TRY(load_run(o, o->reports[i], 0, y));
        if (i && (strcmp(x.strategy, first.strategy) != 0 || x.replicas != first.replicas ||
                  x.batch != first.batch || strcmp(x.workload, first.workload) != 0 ||
                  fabs(x.bytes - first.bytes) > 0.5))
            return sb_error(SB_ERR_INPUT, "predict: %s: a run of %s, %d replicas of batch %d, "
                            "%s of %.0f bytes; %s: of %s, %d of %d, %s of %.0f bytes: "
                            "several REPORTs must be runs of one probe", o->reports[i],
                            x.strategy, x.replicas, x.batch, x.workload, x.bytes, o->reports[0],
                            first.strategy, first.replicas, first.batch, first.workload,
                            first.bytes);
        double c = y->forward_ms + y->backward_ms;
        if (!(y->forward_ms > 0 && y->backward_ms > 0 && isfinite(c)))
            return sb_error(SB_ERR_INPUT, "predict: %s: --layouts needs the measured forward "
                            "and backward phases (phases_ms)", o->reports[i]);
        o->reports_compute_ms[i] = c;
        int k = i; /* insertion by compute, ties in the order given */
        while (k > 0 && o->reports_compute_ms[order[k - 1]] > c) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    o->report = o->reports[order[(o->n_reports - 1) / 2]];
    return SB_OK;
}

int sb_predict_main(int argc, char **argv)
{
    struct opts o;
    static struct run r; /* its layer table is large */
    sb_status st = parse_opts(&o, argc, argv);
    if (!st && o.help) {
        usage(stdout);
        return 0;
    }
    if (!st && o.n_params > 0) return sb_predict_memory(&o);
    if (!st && o.n_reports > 1) st = median_report(&o);
    if (!st) st = load_run(&o, o.report, !o.calibrate && !o.layouts, &r);
    if (!st && o.layouts) return sb_predict_layouts_main(&o, &r);
    if (!st && o.calibrate) st = calibrated_link(&o, &r);
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return sb_status_exit_code(st);
    }
    int cap = MAX_COUNTS * MAX_ROWS_PER_COUNT;
    struct row *rows = malloc((size_t)cap * sizeof *rows);
    legend_line legends[MAX_STRATEGIES];
    int n = rows ? sb_predict_rows(&r, &o, rows, cap, legends) : 0;
    cJSON *doc = rows ? sb_predict_to_json(&r, &o, rows, n) : NULL;
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
            sb_predict_print_table(&r, &o, rows, n, legends);
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
