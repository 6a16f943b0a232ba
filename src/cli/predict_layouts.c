/* `stratbench predict REPORT... --layouts --hosts H --ranks-per-host R`: every
 * dp x tp x pp layout of H x R ranks that fits, ranked by the layout model
 * (from the median of several runs of one probe when given several)
 * (strategies/shared/layout_model.h, docs/layouts.md); the JSON document is
 * in reports/README.md ("predict --layouts"). */
#include "cli/predict_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sweep.h"
#include "cli/train_opts.h"
#include "core/atomic_file.h"
#include "core/memory.h"

#define LAYOUTS_SCHEMA_VERSION "1.9" /* 1.2: links.*.gamma_s_per_byte, sizes; 1.3: memory.ledger;
                                     * 1.4: measured.core_share; 1.5: measured.cores_busy;
                                     * 1.6: layouts[].cores_ms; 1.7: links.*.exchange_sizes;
                                     * 1.8: reports; 1.9: a pipeline's bubble_ms and
                                     * comm.dp.exposed_ms from its simulated schedule */
#define TOP_DEFAULT 20
/* measured.cores_busy from which the table says its step was CPU demand */
#define CORES_BUSY_NOTE 0.9

/* The micro-batch counts and schedules tried with a pipeline. */
static const int MICROBATCHES[] = {1, 2, 4, 8, 16};
static const enum sb_pp_kind SCHEDULES[] = {SB_PP_GPIPE, SB_PP_1F1B, SB_PP_INTERLEAVED,
                                            SB_PP_ZBH1};

void sb_predict_layouts_usage(FILE *out)
{
    fprintf(out,
            "\n"
            "usage: stratbench predict REPORT [REPORT...] --layouts --hosts H\n"
            "                          --ranks-per-host R [flags]\n"
            "\n"
            "Ranks every dp x tp x pp layout of H x R ranks (micro-batches, schedule, zero\n"
            "stage, rank order) by predicted step time, with memory per rank, bubble share\n"
            "and communication per axis (docs/layouts.md). Given several runs of one probe\n"
            "(up to %d), it predicts from the one whose compute a step is the median.\n"
            "\n"
            "  --layouts                         rank the layouts (this mode)\n"
            "  --hosts H                         hosts\n"
            "  --ranks-per-host R                ranks per host (consecutive ranks)\n"
            "  --bandwidth RATE                  the cross-host link (probed)\n"
            "  --latency TIME                    ... and its latency per message\n"
            "  --intra-bandwidth RATE            the link within a host (probed)\n"
            "  --intra-latency TIME              ... and its latency per message\n"
            "  --links-from REPORT               the links (sized classes, gamma) another\n"
            "                                    run probed, in place of REPORT's\n"
            "  --global-batch N       (measured) samples per step, all replicas\n"
            "  --device-memory SIZE              leave out layouts that do not fit\n"
            "  --top N                20         table rows (0: all; the JSON has all)\n"
            "  --shared-cores C                  all H x R ranks share C cores (one machine)\n"
            "  --json, --out FILE                as above\n", SB_PREDICT_MAX_REPORTS);
}

sb_status sb_predict_layouts_check_flags(const struct opts *o, int counts_given)
{
    const char *only = o->intra_bandwidth_Bps > 0 ? "--intra-bandwidth"
                       : o->intra_latency_s >= 0  ? "--intra-latency"
                       : o->links_from            ? "--links-from"
                       : o->global_batch > 0      ? "--global-batch"
                       : o->top >= 0              ? "--top"
                       : o->shared_cores > 0      ? "--shared-cores"
                       : o->hosts > 0             ? "--hosts"
                       : o->ranks_per_host > 0    ? "--ranks-per-host"
                                                  : NULL;
    if (!o->layouts) {
        if (only) return sb_error(SB_ERR_USAGE, "predict: %s: only with --layouts", only);
        return SB_OK;
    }
    if (!(o->hosts > 0))
        return sb_error(SB_ERR_USAGE, "predict: --layouts needs --hosts H (and --ranks-per-host R)");
    if (!(o->ranks_per_host > 0))
        return sb_error(SB_ERR_USAGE, "predict: --layouts needs --ranks-per-host R");
    if ((long)o->hosts * o->ranks_per_host > 4096)
        return sb_error(SB_ERR_USAGE, "predict: --hosts x --ranks-per-host: at most 4096 ranks");
    if (counts_given)
        return sb_error(SB_ERR_USAGE, "predict: --replicas: not with --layouts (the ranks are "
                        "--hosts x --ranks-per-host)");
    if (o->calibrate)
        return sb_error(SB_ERR_USAGE, "predict: --calibrate: not with --layouts (give "
                        "--bandwidth/--latency and --intra-bandwidth/--intra-latency)");
    return SB_OK;
}


/* A layer's all-reduce count: a number (0..64), or true as 1. */
static int count_of(const cJSON *v)
{
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 64) return (int)v->valuedouble;
    return cJSON_IsTrue(v);
}

/* One array of a link's classes (key: 1.14 "sizes", 1.18 "exchange_sizes";
 * each {from_bytes, alpha_s, bandwidth_Bps}) into the three arrays; the
 * count, 0 when absent or when any class is implausible (from_bytes not
 * ascending from 0, α or B out of range). */
static int load_classes(const cJSON *c, const char *key, double *from, double *alpha,
                        double *bw)
{
    const cJSON *e;
    int n = 0, ok = 1;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, key)) {
        double f = sb_predict_num_path(e, (const char *[]){"from_bytes"}, 1);
        double a = sb_predict_num_path(e, (const char *[]){"alpha_s"}, 1);
        double b = sb_predict_num_path(e, (const char *[]){"bandwidth_Bps"}, 1);
        if (n >= SB_LINK_MAX_SIZES || !(a >= 0 && a <= MAX_ALPHA_S) ||
            !(b > 0 && b <= MAX_BANDWIDTH_BPS) || !(n == 0 ? f == 0 : f > from[n - 1]))
            ok = 0;
        if (!ok) break;
        from[n] = f;
        alpha[n] = a;
        bw[n++] = b;
    }
    return ok ? n : 0;
}

/* A link's sized classes and its exchange classes into l. */
static void load_sized(const cJSON *c, struct sb_link *l)
{
    l->n_sizes = load_classes(c, "sizes", l->size_bytes, l->size_alpha_s, l->size_bandwidth_Bps);
    l->n_exchange_sizes = load_classes(c, "exchange_sizes", l->exchange_bytes,
                                       l->exchange_alpha_s, l->exchange_bandwidth_Bps);
}

void sb_predict_load_links(const cJSON *model, struct run *r)
{
    r->probe_cross_host =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "probe_cross_host"));
    double g = sb_predict_num_path(model, (const char *[]){"gamma_s_per_byte"}, 1);
    r->gamma_s_per_byte = g > 0 && g < 1e-6 ? g : 0.0;
    const char *k_a[] = {"links", "intra", "alpha_s"}, *k_b[] = {"links", "intra", "bandwidth_Bps"};
    double a = sb_predict_num_path(model, k_a, 3), b = sb_predict_num_path(model, k_b, 3);
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(model, "links");
    r->intra_probed = a >= 0 && a <= MAX_ALPHA_S && b > 0 && b <= MAX_BANDWIDTH_BPS;
    memset(&r->intra, 0, sizeof r->intra);
    if (r->intra_probed) {
        r->intra = (struct sb_link){.alpha_s = a, .bandwidth_Bps = b,
                                    .gamma_s_per_byte = r->gamma_s_per_byte};
        load_sized(cJSON_GetObjectItemCaseSensitive(links, "intra"), &r->intra);
    }
    memset(&r->inter_sized, 0, sizeof r->inter_sized);
    r->inter_sized.gamma_s_per_byte = r->gamma_s_per_byte;
    load_sized(cJSON_GetObjectItemCaseSensitive(links, "inter"), &r->inter_sized);
}

/* The share of a core the run's compute had (report 1.16): the sum over
 * noise_by_rank of compute_cpu_s over the sum of compute_wall_s, or NaN
 * when a rank lacks them or the sums are not positive. */
static double core_share_of(const cJSON *noise)
{
    double cpu = 0.0, wall = 0.0;
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, noise) {
        double c = sb_predict_num_path(e, (const char *[]){"compute_cpu_s"}, 1);
        double w = sb_predict_num_path(e, (const char *[]){"compute_wall_s"}, 1);
        if (!(c >= 0 && w > 0 && isfinite(c) && isfinite(w))) return NAN;
        cpu += c, wall += w, n++;
    }
    return n > 0 && cpu > 0 ? cpu / wall : NAN;
}

/* How busy the measured run kept its machine's cores (report 1.15's
 * noise_by_rank[].cpu_s and environment.wait_policy): the sum of its
 * ranks' CPU seconds over cores x train_s, when every rank ran on the one
 * machine (compute_threads_on_machine, its ranks there x config.blas_threads,
 * over blas_threads >= the ranks); NaN otherwise. Near 1,
 * the run's step was its ranks' CPU demand over the cores, communication
 * and waits included, which the layout model does not price (docs/
 * layouts.md, "At 1 Gbit/s the cluster's cores are the bottleneck"). */
static double cores_busy_of(const cJSON *doc)
{
    const cJSON *noise = cJSON_GetObjectItemCaseSensitive(doc, "noise_by_rank");
    double train_s = sb_predict_num_path(doc, (const char *[]){"train_s"}, 1);
    double cores = sb_predict_num_path(doc, (const char *[]){"environment", "wait_policy",
                                                             "cores"}, 3);
    double threads = sb_predict_num_path(
        doc, (const char *[]){"environment", "wait_policy", "compute_threads_on_machine"}, 3);
    double blas = sb_predict_num_path(doc, (const char *[]){"config", "blas_threads"}, 2);
    int n = cJSON_GetArraySize(noise);
    if (!(blas >= 1)) blas = 1; /* a report without it: one thread a rank */
    if (!(n > 0 && train_s > 0 && cores >= 1 && threads / blas >= n)) return NAN;
    double cpu = 0.0;
    const cJSON *e;
    cJSON_ArrayForEach(e, noise) {
        double c = sb_predict_num_path(e, (const char *[]){"cpu_s"}, 1);
        if (!(c >= 0 && isfinite(c))) return NAN;
        cpu += c;
    }
    return cpu / (cores * train_s);
}

/* The fixed part of a pass (report 1.16's compute_probe; `pass` "forward"
 * or "backward"), as a fraction of the pass at the larger probed batch b2:
 * the line through (b1, T1), (b2, T2), T the CPU times (a pass's time on a
 * core of its own; the wall times where those are absent), gives
 * T(b) = t0 + b t1; the fraction is t0 / T2. 0 (every second per sample)
 * when the probe is absent, b1 = b2, or the line does not have t0 > 0 and
 * t1 > 0 (a pass that shrank with the batch: noise, not a fit). */
static double fixed_fraction_of(const cJSON *probe, const char *pass)
{
    char cpu[32], wall[32];
    snprintf(cpu, sizeof cpu, "%s_cpu_ms", pass);
    snprintf(wall, sizeof wall, "%s_ms", pass);
    const cJSON *batch = cJSON_GetObjectItemCaseSensitive(probe, "batch");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(probe, cpu);
    if (cJSON_GetArraySize(t) != 2) t = cJSON_GetObjectItemCaseSensitive(probe, wall);
    if (cJSON_GetArraySize(batch) != 2 || cJSON_GetArraySize(t) != 2) return 0.0;
    double b1 = cJSON_GetNumberValue(cJSON_GetArrayItem(batch, 0));
    double b2 = cJSON_GetNumberValue(cJSON_GetArrayItem(batch, 1));
    double t1 = cJSON_GetNumberValue(cJSON_GetArrayItem(t, 0));
    double t2 = cJSON_GetNumberValue(cJSON_GetArrayItem(t, 1));
    if (!(b1 >= 1 && b2 > b1 && t1 > 0 && t2 > t1 && isfinite(t2))) return 0.0;
    double slope = (t2 - t1) / (b2 - b1), t0 = t1 - b1 * slope;
    return t0 > 0 ? t0 / t2 : 0.0;
}

void sb_predict_load_layout_inputs(const cJSON *doc, struct run *r)
{
    r->data_ms = sb_predict_phase_ms(doc, "data") + sb_predict_phase_ms(doc, "h2d");
    r->forward_ms = sb_predict_phase_ms(doc, "forward");
    r->optimizer_ms = sb_predict_phase_ms(doc, "optimizer");
    double z = sb_predict_num_path(doc, (const char *[]){"layout", "zero_stage"}, 2);
    if (!isfinite(z)) z = sb_predict_num_path(doc, (const char *[]){"strategy_details", "zero_stage"}, 2);
    r->zero_stage = isfinite(z) ? (int)z : 0;
    r->core_share = core_share_of(cJSON_GetObjectItemCaseSensitive(doc, "noise_by_rank"));
    r->cores_busy = cores_busy_of(doc);
    const cJSON *cp = cJSON_GetObjectItemCaseSensitive(doc, "compute_probe");
    r->fixed_fraction[0] = fixed_fraction_of(cp, "forward");
    r->fixed_fraction[1] = fixed_fraction_of(cp, "backward");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "comm"), "model");
    sb_predict_load_links(model, r);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "model"), "layers"), *e;
    r->n_layers = 0;
    cJSON_ArrayForEach(e, layers) {
        if (r->n_layers >= SB_PREDICT_LAYERS_MAX) break;
        struct sb_layer_summary *y = &r->layers[r->n_layers];
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        snprintf(y->name, sizeof y->name, "%s", name ? name : "?");
        const char *k[] = {"params", "split_params", "in_floats", "out_floats", "split_width",
                           "flops"};
        double v[6];
        for (int i = 0; i < 6; i++) v[i] = sb_predict_num_path(e, &k[i], 1);
        y->params = v[0], y->split_params = v[1], y->in_floats = v[2], y->out_floats = v[3];
        y->split_width = isfinite(v[4]) ? (int)v[4] : 0, y->flops = v[5];
        y->tp_column = count_of(cJSON_GetObjectItemCaseSensitive(e, "tp_column"));
        y->tp_row = count_of(cJSON_GetObjectItemCaseSensitive(e, "tp_row"));
        for (int i = 0; i < 6; i++)
            if (i != 4 && !(v[i] >= 0 && isfinite(v[i]))) y->params = NAN;
        if (!(y->split_params <= y->params)) { /* a corrupt entry: build the table instead */
            r->n_layers = 0;
            return;
        }
        r->n_layers++;
    }
}

struct ranked {
    struct sb_layout l;
    struct sb_layout_prediction p;
};

/* Where a link class came from, for the header and the JSON. */
struct link_source {
    int have;
    const char *source; /* "probe", "given" */
};

/* --links-from PATH: the link classes that report probed (with their
 * sized classes and γ) replace those of the measured report; a class it
 * did not probe stays, γ set to its γ. Errors: SB_ERR_INPUT naming the
 * file (unreadable, or no probed link). */
static sb_status links_from(const char *path, struct sb_link_classes *l,
                            struct link_source src[2])
{
    cJSON *doc = NULL;
    SB_TRY(sb_json_read_file(path, &doc));
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "comm"), "model");
    struct run *t = calloc(1, sizeof *t);
    sb_status st = t ? SB_OK : sb_error(SB_ERR_NOMEM, "predict: out of memory");
    if (!st) {
        sb_predict_load_links(model, t);
        double a = sb_predict_num_path(model, (const char *[]){"alpha_s"}, 1);
        double b = sb_predict_num_path(model, (const char *[]){"bandwidth_Bps"}, 1);
        int probed = a >= 0 && a <= MAX_ALPHA_S && b > 0 && b <= MAX_BANDWIDTH_BPS;
        if (!probed && !t->intra_probed)
            st = sb_error(SB_ERR_INPUT, "predict: --links-from %s: the run probed no link "
                          "(comm.model)", path);
        if (!st && probed && t->probe_cross_host) {
            l->inter = t->inter_sized;
            l->inter.alpha_s = a;
            l->inter.bandwidth_Bps = b;
            src[1] = (struct link_source){1, "links-from"};
        }
        if (!st && t->intra_probed) {
            l->intra = t->intra;
            src[0] = (struct link_source){1, "links-from"};
        }
        l->intra.gamma_s_per_byte = l->inter.gamma_s_per_byte = t->gamma_s_per_byte;
    }
    free(t);
    cJSON_Delete(doc);
    return st;
}

/* The two link classes: each from its flags, else the report's probe
 * (comm.model.links, or the single probed link of its class). Errors:
 * SB_ERR_INPUT naming the flag a needed class lacks (inter where H > 1,
 * intra where R > 1). */
static sb_status links_of(const struct opts *o, const struct run *r, struct sb_link_classes *l,
                          struct link_source src[2])
{
    memset(l, 0, sizeof *l);
    memset(src, 0, 2 * sizeof src[0]);
    int probed = r->link.bandwidth_Bps > 0 && r->link.alpha_s >= 0;
    /* inter: the probed link when it crossed hosts */
    if (probed && r->probe_cross_host) {
        l->inter = r->inter_sized; /* its sized classes and γ (none before 1.14) */
        l->inter.alpha_s = r->link.alpha_s;
        l->inter.bandwidth_Bps = r->link.bandwidth_Bps;
        src[1] = (struct link_source){1, "probe"};
    }
    if (r->intra_probed) {
        l->intra = r->intra;
        src[0] = (struct link_source){1, "probe"};
    } else if (probed && !r->probe_cross_host) {
        l->intra = (struct sb_link){.alpha_s = r->link.alpha_s,
                                    .bandwidth_Bps = r->link.bandwidth_Bps,
                                    .gamma_s_per_byte = r->gamma_s_per_byte};
        src[0] = (struct link_source){1, "probe"};
    }
    if (o->links_from) SB_TRY(links_from(o->links_from, l, src));
    /* a given link is one class (no sizes); its γ stays the probed one */
    if (o->bandwidth_Bps > 0) l->inter.bandwidth_Bps = o->bandwidth_Bps;
    if (o->latency_s >= 0) l->inter.alpha_s = o->latency_s;
    if (o->bandwidth_Bps > 0 || o->latency_s >= 0) {
        src[1] = (struct link_source){l->inter.bandwidth_Bps > 0, "given"};
        l->inter.n_sizes = l->inter.n_exchange_sizes = 0;
    }
    if (o->intra_bandwidth_Bps > 0) l->intra.bandwidth_Bps = o->intra_bandwidth_Bps;
    if (o->intra_latency_s >= 0) l->intra.alpha_s = o->intra_latency_s;
    if (o->intra_bandwidth_Bps > 0 || o->intra_latency_s >= 0) {
        src[0] = (struct link_source){l->intra.bandwidth_Bps > 0, "given"};
        l->intra.n_sizes = l->intra.n_exchange_sizes = 0;
    }
    if (o->hosts > 1 && !src[1].have)
        return sb_error(SB_ERR_INPUT, "predict: %s: no cross-host link (the run did not probe "
                        "one); pass --bandwidth and --latency", o->report);
    if (o->ranks_per_host > 1 && !src[0].have)
        return sb_error(SB_ERR_INPUT, "predict: %s: no within-host link (the run did not "
                        "probe one); pass --intra-bandwidth and --intra-latency", o->report);
    return SB_OK;
}

/* The model's inputs from the measured run: per-sample phases of its
 * replica's batch, the optimizer per parameter it updated (its zero shard),
 * its activations per sample; for the mlp, whose configuration the report
 * holds whole (config.hidden), the workload and that configuration in *cfg
 * (a pipeline stage's buffers by its part_size). */
static void inputs_of(const struct opts *o, const struct run *r, struct sb_layout_inputs *in,
                      struct sb_train_opts *cfg)
{
    double b = r->batch, psi = r->bytes / 4.0;
    double updated = r->zero_stage > 0 ? psi / r->replicas : psi;
    memset(in, 0, sizeof *in);
    in->layers = r->layers;
    in->n_layers = r->n_layers;
    in->global_batch = o->global_batch > 0 ? o->global_batch : r->batch * r->replicas;
    in->data_s_per_sample = isfinite(r->data_ms) ? 1e-3 * r->data_ms / b : 0.0;
    in->forward_s_per_sample = 1e-3 * r->forward_ms / b;
    in->backward_s_per_sample = 1e-3 * r->backward_ms / b;
    in->probe_batch = r->batch;
    in->forward_fixed_fraction = r->fixed_fraction[0];
    in->backward_fixed_fraction = r->fixed_fraction[1];
    in->optimizer_s_per_param = isfinite(r->optimizer_ms) ? 1e-3 * r->optimizer_ms / updated : 0;
    in->activation_bytes_per_sample = r->activation_bytes / b;
    in->ranks_per_host = o->ranks_per_host;
    in->shared_cores = o->shared_cores;
    in->probe_ranks = r->replicas;
    in->probe_core_share = r->core_share > 0 ? r->core_share : 0.0;
    in->optimizer = r->optimizer;
    in->overlap = r->overlap;
    in->bucket_bytes = r->n_buckets ? r->buckets : NULL;
    in->n_buckets = r->n_buckets;
    in->dp_sync[0] = sb_strategy_find("ddp");
    in->dp_sync[1] = sb_strategy_find("zero");
    /* The workload gets the report's model config back (its hidden widths,
     * transformer shape, precision and evaluation batch), so that memory per
     * rank is the ledger's from its size ops (layout_memory.h); a report
     * without them keeps the scaled estimate of its activations. */
    const struct sb_workload_ops *w = sb_workload_find(r->workload);
    if (w && w->size && r->n_hidden > 0 && r->n_hidden <= SB_MAX_HIDDEN && r->eval_batch > 0) {
        sb_train_opts_defaults(cfg);
        snprintf(cfg->cfg.workload, sizeof cfg->cfg.workload, "%s", r->workload);
        cfg->cfg.n_hidden = r->n_hidden;
        for (int i = 0; i < r->n_hidden; i++) cfg->cfg.hidden[i] = r->hidden[i];
        if (r->vit.depth > 0) cfg->cfg.vit = r->vit;
        cfg->cfg.precision = r->precision;
        cfg->cfg.optimizer = r->optimizer;
        cfg->cfg.eval_batch = r->eval_batch;
        in->workload = w;
        in->model_cfg = &cfg->cfg;
        in->sequence_parallel = r->sequence_parallel;
    }
}

/* Every layout of world ranks that sb_layout_check takes, predicted, into
 * out (at most cap); *considered counts the candidates. Returns the count. */
static int enumerate(const struct sb_layout_inputs *in, int world, struct ranked *out, int cap,
                     int *considered)
{
    int n = 0;
    *considered = 0;
    for (int dp = 1; dp <= world; dp++)
        for (int tp = 1; dp * tp <= world; tp++) {
            if (world % (dp * tp)) continue;
            int pp = world / (dp * tp);
            int n_m = pp > 1 ? (int)(sizeof MICROBATCHES / sizeof MICROBATCHES[0]) : 1;
            int n_s = pp > 1 ? (int)(sizeof SCHEDULES / sizeof SCHEDULES[0]) : 1;
            int n_z = dp > 1 ? 4 : 1, n_o = dp > 1 && pp > 1 ? SB_RANK_ORDER_COUNT : 1;
            for (int mi = 0; mi < n_m; mi++)
                for (int si = 0; si < n_s; si++)
                    for (int z = 0; z < n_z; z++)
                        for (int ord = 0; ord < n_o; ord++) {
                            struct sb_layout l = {
                                dp, tp, pp, MICROBATCHES[mi], SCHEDULES[si],
                                SCHEDULES[si] == SB_PP_INTERLEAVED ? 2 : 1, z,
                                (enum sb_rank_order)ord};
                            ++*considered;
                            struct sb_layout_prediction p;
                            if (sb_layout_predict(&l, in, world, &p) != SB_OK) continue;
                            if (n < cap) out[n++] = (struct ranked){l, p};
                        }
        }
    return n;
}

static int by_step(const void *a, const void *b)
{
    double x = ((const struct ranked *)a)->p.step_s, y = ((const struct ranked *)b)->p.step_s;
    return x < y ? -1 : x > y;
}

static const char *link_word(int cross) { return cross ? "inter" : "intra"; }

static void print_table(const struct opts *o, const struct run *r,
                        const struct sb_layout_inputs *in, const struct link_source src[2],
                        const struct ranked *rows, int n, int considered, int left_out)
{
    int world = o->hosts * o->ranks_per_host;
    printf("# stratbench predict --layouts: %s (%s, %d replica%s measured, batch %d per "
           "replica), %d host%s x %d rank%s, global batch %d\n", o->report, r->strategy,
           r->replicas, r->replicas == 1 ? "" : "s", r->batch, o->hosts,
           o->hosts == 1 ? "" : "s", o->ranks_per_host, o->ranks_per_host == 1 ? "" : "s",
           in->global_batch);
    if (o->n_reports > 1) {
        printf("#   the median of %d runs' compute a step (forward + backward):", o->n_reports);
        for (int i = 0; i < o->n_reports; i++)
            printf("%s %.2f%s", i ? "," : "", o->reports_compute_ms[i],
                   o->reports[i] == o->report ? " (this one)" : "");
        printf(" ms\n");
    }
    const struct sb_link *ls[2] = {&in->links.intra, &in->links.inter};
    const char *names[2] = {"intra-host", "cross-host"};
    for (int k = 0; k < 2; k++)
        if (src[k].have)
        {
            printf("# %s link: latency %.2f us, bandwidth %.4g GB/s = %.4g Gbit/s, gamma "
                   "%.3g ns/kB (%s)\n", names[k], 1e6 * ls[k]->alpha_s,
                   1e-9 * ls[k]->bandwidth_Bps, 8e-9 * ls[k]->bandwidth_Bps,
                   1e12 * ls[k]->gamma_s_per_byte, src[k].source);
            for (int c = 0; c < ls[k]->n_sizes && c < SB_LINK_MAX_SIZES; c++)
                printf("#   from %.0f kB: latency %.2f us, bandwidth %.4g GB/s\n",
                       1e-3 * ls[k]->size_bytes[c], 1e6 * ls[k]->size_alpha_s[c],
                       1e-9 * ls[k]->size_bandwidth_Bps[c]);
            for (int c = 0; c < ls[k]->n_exchange_sizes && c < SB_LINK_MAX_SIZES; c++)
                printf("#   exchanges (the rings' steps) from %.0f kB: latency %.2f us, "
                       "bandwidth %.4g GB/s each way\n", 1e-3 * ls[k]->exchange_bytes[c],
                       1e6 * ls[k]->exchange_alpha_s[c], 1e-9 * ls[k]->exchange_bandwidth_Bps[c]);
        }
    printf("# compute per sample: forward %.4g ms, backward %.4g ms (measured); %d layers\n",
           in->forward_s_per_sample * 1e3, in->backward_s_per_sample * 1e3, in->n_layers);
    printf("# model (docs/layouts.md): step = data + m (t_f + t_b) + bubble + dp exposed + "
           "optimizer; t_f, t_b: the stage's compute / tp + tp all-reduces + pp messages\n");
    if (r->cores_busy >= CORES_BUSY_NOTE)
        printf("# note: the measured run kept its machine's cores %.0f %% busy (its ranks' CPU "
               "time): its step was CPU demand, communication and waits included, which this "
               "model prices as taking no CPU; expect layouts that communicate or wait more to "
               "run slower than listed (docs/layouts.md)\n", 100 * r->cores_busy);
    printf("# %d of %d candidate layouts of %d ranks fit the model", n + left_out, considered,
           world);
    if (o->device_memory_bytes > 0)
        printf("; %d left out: memory per rank > --device-memory %.4g GB", left_out,
               1e-9 * o->device_memory_bytes);
    printf("\n#\n");
    printf("# %4s  %-38s  %10s  %10s  %7s  %16s  %16s  %16s  %10s\n", "rank", "layout", "step",
           "samples", "bubble", "tp", "pp", "dp exposed", "memory");
    printf("# %4s  %-38s  %10s  %10s  %7s  %16s  %16s  %16s  %10s\n", "", "", "ms", "1/s", "%",
           "ms (link)", "ms (link)", "ms (link)", "MB/rank");
    int top = o->top < 0 ? TOP_DEFAULT : o->top;
    for (int i = 0; i < n && (top == 0 || i < top); i++) {
        const struct ranked *w = &rows[i];
        char name[96], tp[32], pp[32], dp[32];
        sb_layout_name(&w->l, name, sizeof name);
        snprintf(tp, sizeof tp, "%.3f (%s)", 1e3 * w->p.tp_comm_s,
                 w->l.tp > 1 ? link_word(w->p.tp_cross) : "-");
        snprintf(pp, sizeof pp, "%.3f (%s)", 1e3 * w->p.pp_comm_s,
                 w->l.pp > 1 ? link_word(w->p.pp_cross) : "-");
        snprintf(dp, sizeof dp, "%.3f (%s)", 1e3 * w->p.dp_exposed_s,
                 w->l.dp > 1 ? link_word(w->p.dp_cross) : "-");
        printf("  %4d  %-38s  %10.3f  %10.1f  %7.2f  %16s  %16s  %16s  %10.2f\n", i + 1, name,
               1e3 * w->p.step_s, in->global_batch / w->p.step_s, 100 * w->p.bubble_share, tp,
               pp, dp, 1e-6 * w->p.memory_bytes);
    }
    if (top > 0 && n > top) printf("# ... %d more (--top 0 or --json for all)\n", n - top);
}

/* One axis's communication in the JSON. */
static int add_axis(cJSON *comm, const char *key, int size, double ms, double bytes, int cross,
                    double exposed_ms)
{
    cJSON *a = cJSON_AddObjectToObject(comm, key);
    return a && cJSON_AddNumberToObject(a, "size", size) &&
           cJSON_AddNumberToObject(a, "comm_ms", ms) &&
           (isnan(exposed_ms) || cJSON_AddNumberToObject(a, "exposed_ms", exposed_ms)) &&
           cJSON_AddNumberToObject(a, "bytes_per_rank", bytes) &&
           (size > 1 ? cJSON_AddStringToObject(a, "link", link_word(cross)) != NULL
                     : cJSON_AddNullToObject(a, "link") != NULL);
}

/* One array of a link's classes under key (as the report's, 1.18). */
static int add_classes(cJSON *o, const char *key, int n, const double *from,
                       const double *alpha, const double *bw)
{
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    int ok = arr != NULL;
    for (int k = 0; ok && k < n && k < SB_LINK_MAX_SIZES; k++) {
        cJSON *c = cJSON_CreateObject();
        ok = c && cJSON_AddItemToArray(arr, c) &&
             cJSON_AddNumberToObject(c, "from_bytes", from[k]) &&
             cJSON_AddNumberToObject(c, "alpha_s", alpha[k]) &&
             cJSON_AddNumberToObject(c, "bandwidth_Bps", bw[k]);
    }
    return ok;
}

static int add_link(cJSON *links, const char *key, const struct sb_link *l,
                    const struct link_source *src)
{
    if (!src->have) return cJSON_AddNullToObject(links, key) != NULL;
    cJSON *o = cJSON_AddObjectToObject(links, key);
    return o && cJSON_AddNumberToObject(o, "alpha_s", l->alpha_s) &&
           cJSON_AddNumberToObject(o, "bandwidth_Bps", l->bandwidth_Bps) &&
           cJSON_AddNumberToObject(o, "gamma_s_per_byte", l->gamma_s_per_byte) &&
           add_classes(o, "sizes", l->n_sizes, l->size_bytes, l->size_alpha_s,
                       l->size_bandwidth_Bps) &&
           add_classes(o, "exchange_sizes", l->n_exchange_sizes, l->exchange_bytes,
                       l->exchange_alpha_s, l->exchange_bandwidth_Bps) &&
           cJSON_AddStringToObject(o, "source", src->source);
}

/* memory.ledger: the predicted ledger entry by category, keyed as the
 * report's memory.by_rank (null for the scaled estimate). */
static int add_ledger(cJSON *mem, const struct sb_memory_entry *e)
{
    if (!(sb_model_state_bytes(&e->held) > 0))
        return cJSON_AddNullToObject(mem, "ledger") != NULL;
    cJSON *o = cJSON_AddObjectToObject(mem, "ledger");
    return o && cJSON_AddNumberToObject(o, "parameter_bytes", e->held.param_bytes) &&
           cJSON_AddNumberToObject(o, "gradient_bytes", e->held.grad_bytes) &&
           cJSON_AddNumberToObject(o, "optimizer_state_bytes", e->held.optimizer_bytes) &&
           cJSON_AddNumberToObject(o, "comm_buffer_bytes", e->comm_bytes) &&
           cJSON_AddNumberToObject(o, "activation_bytes", e->activation_bytes) &&
           cJSON_AddNumberToObject(o, "model_state_bytes", sb_model_state_bytes(&e->held)) &&
           cJSON_AddNumberToObject(o, "emulation_bytes", e->emulation_bytes) &&
           cJSON_AddNumberToObject(o, "total_bytes", sb_memory_entry_total_bytes(e));
}

static int add_row(cJSON *arr, int rank, const struct ranked *w, int global_batch, int fits)
{
    cJSON *e = cJSON_CreateObject(), *comm = NULL, *mem = NULL;
    if (!e || !cJSON_AddItemToArray(arr, e)) {
        cJSON_Delete(e);
        return 0;
    }
    char name[96];
    sb_layout_name(&w->l, name, sizeof name);
    const struct sb_layout_prediction *p = &w->p;
    return cJSON_AddNumberToObject(e, "rank", rank) && cJSON_AddStringToObject(e, "name", name) &&
           cJSON_AddNumberToObject(e, "dp", w->l.dp) && cJSON_AddNumberToObject(e, "tp", w->l.tp) &&
           cJSON_AddNumberToObject(e, "pp", w->l.pp) &&
           cJSON_AddNumberToObject(e, "microbatches", w->l.microbatches) &&
           (w->l.pp > 1 ? cJSON_AddStringToObject(e, "schedule", sb_pp_kind_name(w->l.schedule)) != NULL
                        : cJSON_AddNullToObject(e, "schedule") != NULL) &&
           cJSON_AddNumberToObject(e, "chunks", w->l.chunks) &&
           cJSON_AddNumberToObject(e, "zero_stage", w->l.zero_stage) &&
           cJSON_AddStringToObject(e, "rank_order", sb_rank_order_name(w->l.order)) &&
           cJSON_AddNumberToObject(e, "step_ms", 1e3 * p->step_s) &&
           cJSON_AddNumberToObject(e, "samples_per_s", global_batch / p->step_s) &&
           cJSON_AddNumberToObject(e, "data_ms", 1e3 * p->data_s) &&
           cJSON_AddNumberToObject(e, "compute_ms", 1e3 * p->compute_s) &&
           cJSON_AddNumberToObject(e, "bubble_ms", 1e3 * p->bubble_s) &&
           cJSON_AddNumberToObject(e, "bubble_share", p->bubble_share) &&
           (p->ranks_computing > 0
                ? cJSON_AddNumberToObject(e, "ranks_computing", p->ranks_computing) != NULL
                : cJSON_AddNullToObject(e, "ranks_computing") != NULL) &&
           (p->cores_s > 0 ? cJSON_AddNumberToObject(e, "cores_ms", 1e3 * p->cores_s) != NULL
                           : cJSON_AddNullToObject(e, "cores_ms") != NULL) &&
           cJSON_AddNumberToObject(e, "optimizer_ms", 1e3 * p->optimizer_s) &&
           (comm = cJSON_AddObjectToObject(e, "comm")) &&
           add_axis(comm, "tp", w->l.tp, 1e3 * p->tp_comm_s, p->tp_bytes, p->tp_cross, NAN) &&
           add_axis(comm, "pp", w->l.pp, 1e3 * p->pp_comm_s, p->pp_bytes, p->pp_cross, NAN) &&
           add_axis(comm, "dp", w->l.dp, 1e3 * p->dp_comm_s, p->dp_bytes, p->dp_cross,
                    1e3 * p->dp_exposed_s) &&
           (mem = cJSON_AddObjectToObject(e, "memory")) &&
           cJSON_AddNumberToObject(mem, "model_state_bytes", p->model_state_bytes) &&
           cJSON_AddNumberToObject(mem, "activation_bytes", p->activation_bytes) &&
           cJSON_AddNumberToObject(mem, "memory_bytes", p->memory_bytes) &&
           add_ledger(mem, &p->ledger) &&
           (fits < 0 ? cJSON_AddNullToObject(e, "fits") != NULL
                     : cJSON_AddBoolToObject(e, "fits", fits) != NULL);
}

/* "reports": every run of the probe given and its compute a step, or null
 * when one was given. */
static int add_reports(cJSON *doc, const struct opts *o)
{
    if (o->n_reports < 2) return cJSON_AddNullToObject(doc, "reports") != NULL;
    cJSON *arr = cJSON_AddArrayToObject(doc, "reports");
    for (int i = 0; arr && i < o->n_reports; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            return 0;
        }
        if (!(cJSON_AddStringToObject(e, "report", o->reports[i]) &&
              cJSON_AddNumberToObject(e, "compute_ms", o->reports_compute_ms[i]) &&
              cJSON_AddBoolToObject(e, "predicted_from", o->reports[i] == o->report)))
            return 0;
    }
    return arr != NULL;
}

static cJSON *to_json(const struct opts *o, const struct run *r, const struct sb_layout_inputs *in,
                      const struct link_source src[2], const struct ranked *rows, int n,
                      int considered, int left_out)
{
    cJSON *doc = cJSON_CreateObject(), *links = NULL, *measured = NULL, *arr = NULL;
    int ok = doc && cJSON_AddStringToObject(doc, "schema_version", LAYOUTS_SCHEMA_VERSION) &&
             cJSON_AddStringToObject(doc, "kind", "layouts") &&
             cJSON_AddStringToObject(doc, "report", o->report) && add_reports(doc, o) &&
             cJSON_AddNumberToObject(doc, "hosts", o->hosts) &&
             cJSON_AddNumberToObject(doc, "ranks_per_host", o->ranks_per_host) &&
             cJSON_AddNumberToObject(doc, "world_size", o->hosts * o->ranks_per_host) &&
             cJSON_AddNumberToObject(doc, "global_batch", in->global_batch) &&
             (measured = cJSON_AddObjectToObject(doc, "measured")) &&
             cJSON_AddStringToObject(measured, "strategy", r->strategy) &&
             cJSON_AddNumberToObject(measured, "replicas", r->replicas) &&
             cJSON_AddNumberToObject(measured, "batch", r->batch) &&
             cJSON_AddNumberToObject(measured, "forward_ms", r->forward_ms) &&
             cJSON_AddNumberToObject(measured, "backward_ms", r->backward_ms) &&
             cJSON_AddNumberToObject(measured, "layers", r->n_layers) &&
             (r->core_share > 0
                  ? cJSON_AddNumberToObject(measured, "core_share", r->core_share) != NULL
                  : cJSON_AddNullToObject(measured, "core_share") != NULL) &&
             (r->cores_busy >= 0
                  ? cJSON_AddNumberToObject(measured, "cores_busy", r->cores_busy) != NULL
                  : cJSON_AddNullToObject(measured, "cores_busy") != NULL) &&
             cJSON_AddNumberToObject(measured, "forward_fixed_fraction", r->fixed_fraction[0]) &&
             cJSON_AddNumberToObject(measured, "backward_fixed_fraction", r->fixed_fraction[1]) &&
             (links = cJSON_AddObjectToObject(doc, "links")) &&
             add_link(links, "intra", &in->links.intra, &src[0]) &&
             add_link(links, "inter", &in->links.inter, &src[1]) &&
             (o->device_memory_bytes > 0
                  ? cJSON_AddNumberToObject(doc, "device_memory_bytes", o->device_memory_bytes) != NULL
                  : cJSON_AddNullToObject(doc, "device_memory_bytes") != NULL) &&
             (o->shared_cores > 0
                  ? cJSON_AddNumberToObject(doc, "shared_cores", o->shared_cores) != NULL
                  : cJSON_AddNullToObject(doc, "shared_cores") != NULL) &&
             cJSON_AddNumberToObject(doc, "considered", considered) &&
             cJSON_AddNumberToObject(doc, "left_out_memory", left_out) &&
             (arr = cJSON_AddArrayToObject(doc, "layouts"));
    for (int i = 0; ok && i < n; i++)
        ok = add_row(arr, i + 1, &rows[i], in->global_batch, o->device_memory_bytes > 0 ? 1 : -1);
    if (!ok) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

int sb_predict_layouts_main(const struct opts *o, struct run *r)
{
    struct sb_layout_inputs in;
    struct sb_train_opts model_cfg;
    struct link_source src[2];
    sb_status st = SB_OK;
    if (r->n_layers == 0) st = sb_predict_build_layers(r);
    if (!st && !(r->forward_ms > 0 && r->backward_ms > 0))
        st = sb_error(SB_ERR_INPUT, "predict: %s: --layouts needs the measured forward and "
                      "backward phases (phases_ms)", o->report);
    if (!st) {
        inputs_of(o, r, &in, &model_cfg);
        st = links_of(o, r, &in.links, src);
    }
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return sb_status_exit_code(st);
    }
    int world = o->hosts * o->ranks_per_host, cap = 1 << 16, considered = 0;
    struct ranked *rows = malloc((size_t)cap * sizeof *rows);
    if (!rows) {
        fprintf(stderr, "stratbench: predict: out of memory\n");
        return 1;
    }
    int n = enumerate(&in, world, rows, cap, &considered), kept = 0;
    for (int i = 0; i < n; i++) /* --device-memory: only what fits is ranked */
        if (!(o->device_memory_bytes > 0) || rows[i].p.memory_bytes <= o->device_memory_bytes)
            rows[kept++] = rows[i];
    int left_out = n - kept;
    qsort(rows, (size_t)kept, sizeof rows[0], by_step);
    cJSON *doc = to_json(o, r, &in, src, rows, kept, considered, left_out);
    if (!doc) {
        free(rows);
        fprintf(stderr, "stratbench: predict: out of memory\n");
        return 1;
    }
    if (o->out) st = sb_json_write_file_atomic(o->out, doc);
    if (!st) {
        if (o->json) {
            char *text = cJSON_Print(doc);
            if (text) printf("%s\n", text);
            cJSON_free(text);
        } else {
            print_table(o, r, &in, src, rows, kept, considered, left_out);
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
