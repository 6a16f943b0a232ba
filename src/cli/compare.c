/* `stratbench compare`; see compare.h and docs/sweep-compare.md. */
#include "cli/compare.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/compare_internal.h"
#include "cli/stats_tests.h"
#include "cli/suggest.h"
#include "cli/sweep.h"
#include "cli/sweep_stats.h"
#include "core/config.h"
#include "report/json_util.h"

const char *const METRIC_NAME[M_COUNT] = {"samples_per_s", "epoch_s", "step_ms", "step_p95_ms"};
const char *const METRIC_UNIT[M_COUNT] = {"samples/s", "s", "ms", "ms"};
const char *const ON_NOISY_NAME[ON_NOISY_COUNT] = {"rerun", "fail", "warn"};

/* What defines the work a run did: two runs are comparable only when these
 * agree (compare refuses otherwise, naming the field, unless --force).
 * steps_total stands for the data set (its size times the epochs, or the
 * step limit). Each is read from the run report; "config.x" is x in config. */
static const char *const WORK_FIELD[N_WORK] = {
    "config.workload", "config.hidden",       "config.replicas",
    "config.batch",    "config.global_batch", "config.epochs",
    "config.max_steps", "config.warmup_steps", "steps_total"};

/* Largest ratio between two medians, or a run report's own rate and its
 * samples and seconds, that compare accepts as a measurement: beyond it a
 * file is corrupt or edited (train_s 1e308), never noise. */
#define ABSURD_RATIO 1000.0
/* Longest training a report may claim: a year. */
#define MAX_TRAIN_S (365.0 * 86400)

static const char *str_at(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

static double num_at(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The gradient method of a sweep point or a report's config (both carry
 * grad_compression, powersgd_rank and local_sgd; absent: none), named by
 * sb_method_name: "" for plain, else " bf16", " powersgd-r2", " local-sgd-16". */
static void method_label(const cJSON *cfg, char *out, size_t size)
{
    const char *comp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "grad_compression"));
    double rank = num_at(cfg, "powersgd_rank"), local = num_at(cfg, "local_sgd");
    char name[SB_METHOD_NAME_MAX];
    sb_method_name(comp, rank >= 1 && rank <= INT_MAX ? (int)rank : 0,
                   local >= 1 && local <= INT_MAX ? (int)local : 0, name, sizeof name);
    if (strcmp(name, "none") == 0)
        out[0] = '\0';
    else
        snprintf(out, size, " %s", name);
}

/* Fills key and label of `e` from a sweep point or a report's config. */
static void entry_key(struct entry *e, const cJSON *cfg, const char *scaling)
{
    char *hidden = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cfg, "hidden"));
    char method[64];
    method_label(cfg, method, sizeof method);
    snprintf(e->scaling, sizeof e->scaling, "%s", scaling);
    snprintf(e->key, sizeof e->key, "%s|%s|%g|%g|%s|%s|%s", str_at(cfg, "strategy"),
             str_at(cfg, "workload"), num_at(cfg, "replicas"), num_at(cfg, "global_batch"),
             hidden ? hidden : "null", str_at(cfg, "device"), method);
    snprintf(e->label, sizeof e->label, "%s%s n=%g %s (global batch %g)", str_at(cfg, "strategy"),
             method, num_at(cfg, "replicas"), scaling, num_at(cfg, "global_batch"));
    cJSON_free(hidden);
}

/* How many steps a run report measured (step_ms.n); 0 when absent. */
static double measured_steps(const cJSON *rep)
{
    double n = num_at(cJSON_GetObjectItemCaseSensitive(rep, "step_ms"), "n");
    return isfinite(n) ? n : 0;
}

/* The value at dotted path `f` ("config.x" or "x") of `rep` as compact
 * JSON text into buf ("absent" when missing). */
static void work_value(const cJSON *rep, const char *f, char *buf, size_t size)
{
    const cJSON *o = rep;
    const char *dot = strchr(f, '.');
    if (dot) {
        char head[32];
        snprintf(head, sizeof head, "%.*s", (int)(dot - f), f);
        o = cJSON_GetObjectItemCaseSensitive(rep, head);
        f = dot + 1;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f);
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, size, "%s", t ? t : "absent");
    cJSON_free(t);
}

/* A run report's timing fields are measurements, not anything a float can
 * hold: train_s (train_seconds before schema 1.8) finite, positive and at most a year, and its
 * samples_per_s the samples trained over train_s within 1 % (when the
 * report has both). Errors: SB_ERR_INPUT naming `path` and the field. */
static sb_status check_plausible(const cJSON *rep, const char *path)
{
    double t = num_at(rep, "train_s"), n = num_at(rep, "samples_trained"),
           r = num_at(rep, "samples_per_s");
    if (isnan(t)) t = num_at(rep, "train_seconds"); /* reports before 1.8 */
    if (!(isfinite(t) && t > 0 && t <= MAX_TRAIN_S))
        return sb_error(SB_ERR_INPUT, "%s: train_s %g is not a plausible training time "
                        "(finite, above 0, at most a year): the report is corrupt or edited",
                        path, t);
    if (isfinite(n) && isfinite(r) && n > 0 && !(fabs(r * t / n - 1) < 0.01))
        return sb_error(SB_ERR_INPUT, "%s: samples_per_s %g disagrees with samples_trained / "
                        "train_s = %g: the report is corrupt or edited", path, r, n / t);
    return SB_OK;
}

/* Adds one run report's metric (as sweep reads it: sb_sweep_values_from)
 * and its step median and p95 to e; the first report's work fields
 * (WORK_FIELD) become e's, and every later one must match them. Errors:
 * SB_ERR_INPUT naming `path` when the report lacks the metric, its timing
 * is implausible (check_plausible) or its work differs from the first. */
static sb_status add_report(struct entry *e, const cJSON *rep, enum metric m, const char *path)
{
    struct sb_sweep_values rv;
    sb_sweep_values_from(rep, &rv);
    const double by_metric[M_COUNT] = {rv.samples_per_s, rv.epoch_s, rv.step_ms, rv.step_p95_ms};
    double v = by_metric[m];
    if (measured_steps(rep) < 1)
        return sb_error(SB_ERR_INPUT, "%s: measured no step (step_ms.n is 0): nothing to compare",
                        path);
    SB_TRY(check_plausible(rep, path));
    const char *diverged = /* harness/divergence.h; null when the run learned */
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rep, "diverged"));
    if (diverged) return sb_error(SB_ERR_INPUT, "%s: %s", path, diverged);
    if (!isfinite(v) || v <= 0)
        return sb_error(SB_ERR_INPUT, "%s: no finite %s (train_s, epochs, step_ms)", path,
                        METRIC_NAME[m]);
    for (int k = 0; k < N_WORK; k++) {
        char w[96];
        work_value(rep, WORK_FIELD[k], w, sizeof w);
        if (!e->has_work) snprintf(e->work[k], sizeof e->work[k], "%s", w);
        else if (strcmp(e->work[k], w) != 0)
            return sb_error(SB_ERR_INPUT, "%s: %s is %s, but %s in the point's first run: the "
                            "repeats did different work", path, WORK_FIELD[k], w, e->work[k]);
    }
    e->has_work = 1;
    if (e->n == MAX_REPEATS) return SB_OK;
    e->step_med[e->n] = rv.step_ms;
    e->step_p95[e->n] = rv.step_p95_ms;
    sb_report_noise_read(rep, &e->noise[e->n]);
    e->v[e->n++] = v;
    return SB_OK;
}

static sb_status check_major(const struct side *s)
{
    const char *v = str_at(s->doc, "schema_version");
    if (strncmp(v, "1.", 2) != 0)
        return sb_error(SB_ERR_INPUT, "%s: schema_version '%s' is not a 1.x this build reads",
                        s->path, v);
    return SB_OK;
}

/* Loads a run report, a scaling.json, or DIR/scaling.json into `s`. */
static sb_status load_side(const char *arg, enum metric metric, struct side *s)
{
    struct stat sbuf;
    if (stat(arg, &sbuf) == 0 && S_ISDIR(sbuf.st_mode))
        snprintf(s->path, sizeof s->path, "%s/scaling.json", arg);
    else
        snprintf(s->path, sizeof s->path, "%s", arg);
    SB_TRY(sb_json_read_file(s->path, &s->doc));
    SB_TRY(check_major(s));
    s->partial = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s->doc, "partial"));
    const cJSON *points = cJSON_GetObjectItemCaseSensitive(s->doc, "points");
    if (cJSON_IsArray(points)) {
        int np = cJSON_GetArraySize(points);
        s->e = calloc((size_t)(np ? np : 1), sizeof *s->e);
        if (!s->e) return sb_error(SB_ERR_NOMEM, "%s: out of memory", s->path);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", s->path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else strcpy(dir, ".");
        const cJSON *pt;
        cJSON_ArrayForEach(pt, points) {
            struct entry *e = &s->e[s->n++];
            entry_key(e, pt, str_at(pt, "scaling"));
            e->per_repeat = 1;
            e->path = s->path;
            const cJSON *run;
            cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(pt, "runs")) {
                if (strcmp(str_at(run, "status"), "ok") != 0 || e->n == MAX_REPEATS) continue;
                const char *name = str_at(run, "report");
                if (strchr(name, '/') || strcmp(name, "?") == 0 || strcmp(name, "..") == 0)
                    return sb_error(SB_ERR_INPUT, "%s: point %s: run report '%s' is not a file "
                                    "name beside scaling.json", s->path, e->label, name);
                char rpath[8300];
                snprintf(rpath, sizeof rpath, "%s/%s", dir, name);
                cJSON *rep;
                SB_TRY(sb_json_read_file(rpath, &rep));
                sb_status st = add_report(e, rep, metric, rpath);
                cJSON_Delete(rep);
                SB_TRY(st);
            }
        }
        return SB_OK;
    }
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(s->doc, "config");
    if (!cJSON_IsObject(cfg) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(s->doc, "step_ms")))
        return sb_error(SB_ERR_INPUT, "%s: neither a run report nor a scaling.json "
                        "(no 'points', no 'config' and 'step_ms')", s->path);
    s->e = calloc(1, sizeof *s->e);
    if (!s->e) return sb_error(SB_ERR_NOMEM, "%s: out of memory", s->path);
    s->n = 1;
    entry_key(&s->e[0], cfg, "run");
    s->e[0].path = s->path;
    return add_report(&s->e[0], s->doc, metric, s->path);
}

/* One configuration appears once per side: a sweep with duplicate points
 * (`--strategies single,single` before sweeps refused it) cannot be matched
 * one to one. Errors: SB_ERR_INPUT naming the file and the point. */
static sb_status check_unique(const struct side *s)
{
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(s->e[i].key, s->e[j].key) && !strcmp(s->e[i].scaling, s->e[j].scaling))
                return sb_error(SB_ERR_INPUT, "%s: point %s appears more than once (points %d "
                                "and %d); each configuration must appear once", s->path,
                                s->e[i].label, j + 1, i + 1);
    return SB_OK;
}

/* Environment fields that must agree: the named ones and any GPU field. */
static int env_key_matters(const char *k)
{
    static const char *const named[] = {"hosts", "cpu_model", "mpi", "blas", "compiler"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcmp(k, named[i]) == 0) return 1;
    return strstr(k, "gpu") || strstr(k, "cuda") || strstr(k, "nccl") || strstr(k, "driver");
}

static int json_equal_text(const cJSON *a, const cJSON *b)
{
    char *x = a ? cJSON_PrintUnformatted(a) : NULL, *y = b ? cJSON_PrintUnformatted(b) : NULL;
    int eq = (!x && !y) || (x && y && strcmp(x, y) == 0);
    cJSON_free(x);
    cJSON_free(y);
    return eq;
}

static sb_status check_environment(const struct side *b, const struct side *n)
{
    const cJSON *eb = cJSON_GetObjectItemCaseSensitive(b->doc, "environment");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(n->doc, "environment");
    const cJSON *sides[2] = {eb, en}, *k;
    for (int s = 0; s < 2; s++)
        cJSON_ArrayForEach(k, sides[s]) {
            if (!env_key_matters(k->string)) continue;
            const cJSON *vb = cJSON_GetObjectItemCaseSensitive(eb, k->string);
            const cJSON *vn = cJSON_GetObjectItemCaseSensitive(en, k->string);
            if (!json_equal_text(vb, vn)) {
                char *tb = vb ? cJSON_PrintUnformatted(vb) : NULL;
                char *tn = vn ? cJSON_PrintUnformatted(vn) : NULL;
                sb_status st = sb_error(SB_ERR_INPUT, "environments differ: %s is %s in BASE but %s "
                                        "in NEW (use --force to compare anyway)", k->string,
                                        tb ? tb : "absent", tn ? tn : "absent");
                cJSON_free(tb);
                cJSON_free(tn);
                return st;
            }
        }
    return SB_OK;
}

/* Matched points must have done the same work (WORK_FIELD): a 150-step
 * run against a 300-step one, or another warm-up, batch or data set, is not
 * a regression. Errors: SB_ERR_INPUT naming the field, both values and the
 * point. */
static sb_status check_work(const struct entry *b, const struct entry *n)
{
    if (!b->has_work || !n->has_work) return SB_OK;
    for (int k = 0; k < N_WORK; k++)
        if (strcmp(b->work[k], n->work[k]) != 0)
            return sb_error(SB_ERR_INPUT, "the work differs: %s is %s in BASE (%s) but %s in NEW "
                            "(%s), point %s; runs of different work are not comparable (use "
                            "--force to compare anyway)", WORK_FIELD[k], b->work[k], b->path,
                            n->work[k], n->path, n->label);
    return SB_OK;
}

/* The verdict on one matched point: the median moved by more than the
 * threshold in the worse (better) direction AND, with repeats on both sides,
 * the two-sided Mann-Whitney p-value is below alpha. The verdict is noisy
 * when a repeat of either side was (compare_noise.h). */
static sb_status decide(const struct opts *o, const struct entry *b, const struct entry *n,
                        struct result *r)
{
    *r = (struct result){.b = b, .n = n, .p = NAN};
    SB_TRY(sb_median(b->v, (size_t)b->n, &r->base_med));
    SB_TRY(sb_median(n->v, (size_t)n->n, &r->new_med));
    SB_TRY(sb_median(b->step_med, (size_t)b->n, &r->base_step[0]));
    SB_TRY(sb_median(b->step_p95, (size_t)b->n, &r->base_step[1]));
    SB_TRY(sb_median(n->step_med, (size_t)n->n, &r->new_step[0]));
    SB_TRY(sb_median(n->step_p95, (size_t)n->n, &r->new_step[1]));
    r->change = (r->new_med - r->base_med) / r->base_med;
    double worse = o->larger_better ? -r->change : r->change;
    int significant = 1;
    if (b->per_repeat && n->per_repeat && b->n > 0 && n->n > 0) {
        struct sb_mwu_result m;
        SB_TRY(sb_mann_whitney(b->v, (size_t)b->n, n->v, (size_t)n->n, &m));
        r->p = m.p_two_sided;
        r->low_power = m.min_p >= o->alpha;
        significant = r->p < o->alpha;
    }
    double ratio = r->new_med / r->base_med;
    if (!isfinite(r->change) || !(ratio < ABSURD_RATIO && ratio > 1 / ABSURD_RATIO))
        return sb_error(SB_ERR_INPUT, "point %s: %s moved from %g (BASE %s) to %g (NEW %s), a "
                        "factor of %g: not a plausible change, a corrupt or edited report",
                        n->label, METRIC_NAME[o->metric], r->base_med, b->path, r->new_med,
                        n->path, ratio);
    r->verdict = !significant ? NOISE : worse > o->threshold ? REGRESSION
               : worse < -o->threshold ? IMPROVEMENT : NOISE;
    /* Either side measured while other work took the CPUs: whatever the
     * verdict, it may describe the machine rather than the build. */
    sb_compare_side_noise(b, &r->noise[0]);
    sb_compare_side_noise(n, &r->noise[1]);
    r->noisy = r->noise[0].noisy_repeats > 0 || r->noise[1].noisy_repeats > 0;
    return SB_OK;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench compare [flags] BASE NEW\n"
            "  BASE, NEW: a run report, a sweep's scaling.json, or a sweep directory\n"
            "  --metric M       samples_per_s  samples_per_s (samples trained / wall s of training,\n"
            "                               larger is better; the same for any run length),\n"
            "                               epoch_s (wall time of an epoch, smaller is better),\n"
            "                               step_ms or step_p95_ms (the median or p95 of the step\n"
            "                               time; blind to a few long stalls)\n"
            "  --alpha A        0.05        significance level of the two-sided Mann-Whitney U test\n"
            "  --threshold T    5%%          minimum change of the median to call a regression\n"
            "  --format F       text        text, markdown, json or github (github-action-benchmark)\n"
            "  --on-noisy P     rerun       what a regression with a noisy side (a repeat whose\n"
            "                               report says \"noisy run\": other work took the CPUs)\n"
            "                               does: rerun (exit 3: rerun the noisy repeats, e.g.\n"
            "                               sweep --rerun-noisy, and compare again), fail (exit 1,\n"
            "                               as a quiet regression) or warn (exit 0, a note)\n"
            "  --force                      compare even if the environments or the work (steps,\n"
            "                               epochs, warm-up, batch, data set) differ, or a sweep\n"
            "                               is partial\n"
            "exit status: 0 no regression, 1 regression, 2 bad input or the gate cannot decide\n"
            "(different work, implausible values, too few repeats to reach alpha), 3 only noisy\n"
            "regressions under --on-noisy rerun\n");
}

static sb_status parse_opts(struct opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"metric", 1, NULL, 'm'}, {"alpha", 1, NULL, 'a'}, {"threshold", 1, NULL, 't'},
        {"format", 1, NULL, 'f'}, {"force", 0, NULL, 'F'}, {"help", 0, NULL, 'h'},
        {"on-noisy", 1, NULL, 'n'},
        {NULL, 0, NULL, 0}};
    *o = (struct opts){.alpha = 0.05, .threshold = 0.05, .format = "text",
                       .metric = M_SAMPLES_PER_S, .larger_better = 1,
                       .on_noisy = ON_NOISY_RERUN};
    optind = 1;
    opterr = 0;
    char *end;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        switch (c) {
        case 'm':
            o->metric = M_COUNT;
            for (int k = 0; k < M_COUNT; k++)
                if (strcmp(optarg, METRIC_NAME[k]) == 0) o->metric = (enum metric)k;
            if (o->metric == M_COUNT)
                return sb_error(SB_ERR_USAGE, "--metric: '%s' is not epoch_s, samples_per_s, "
                                "step_ms or step_p95_ms", optarg);
            o->larger_better = o->metric == M_SAMPLES_PER_S;
            break;
        case 'a':
            o->alpha = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(o->alpha) ||
                !(o->alpha > 0 && o->alpha < 1))
                return sb_error(SB_ERR_USAGE, "--alpha: '%s' is not a number in (0, 1)", optarg);
            break;
        case 't':
            o->threshold = strtod(optarg, &end) / 100;
            if (end == optarg || (*end && strcmp(end, "%")) || !isfinite(o->threshold) ||
                !(o->threshold >= 0))
                return sb_error(SB_ERR_USAGE, "--threshold: '%s' is not a finite percentage like "
                                "5%%", optarg);
            break;
        case 'f':
            if (strcmp(optarg, "text") && strcmp(optarg, "markdown") && strcmp(optarg, "json") &&
                strcmp(optarg, "github"))
                return sb_error(SB_ERR_USAGE, "--format: '%s' is not text, markdown, json or github", optarg);
            o->format = optarg;
            break;
        case 'F': o->force = 1; break;
        case 'n':
            o->on_noisy = ON_NOISY_COUNT;
            for (int k = 0; k < ON_NOISY_COUNT; k++)
                if (strcmp(optarg, ON_NOISY_NAME[k]) == 0) o->on_noisy = (enum on_noisy)k;
            if (o->on_noisy == ON_NOISY_COUNT)
                return sb_error(SB_ERR_USAGE, "--on-noisy: '%s' is not rerun, fail or warn",
                                optarg);
            break;
        case 'h': o->help = 1; return SB_OK;
        default:
            return sb_cli_bad_flag("compare", argv[optind - 1], longs);
        }
    }
    /* A metric that only falls to 0 cannot drop by 100% or more: such a gate
     * could never fail. */
    if (o->larger_better && o->threshold >= 1.0)
        return sb_error(SB_ERR_USAGE, "--threshold: %g%% with --metric %s: a larger-is-better "
                        "metric cannot fall by 100%% or more, so the gate could never fail",
                        100 * o->threshold, METRIC_NAME[o->metric]);
    if (argc - optind != 2)
        return sb_error(SB_ERR_USAGE, "compare: expected two inputs, BASE and NEW (got %d)",
                        argc - optind);
    o->base = argv[optind];
    o->new_ = argv[optind + 1];
    return SB_OK;
}

/* Compares BASE and NEW and prints the verdicts; *quiet and *noisy count
 * the regressions with both sides quiet and with a noisy side. */
static sb_status compare(const struct opts *o, struct side *b, struct side *n, int *quiet,
                         int *noisy)
{
    SB_TRY(load_side(o->base, o->metric, b));
    SB_TRY(check_unique(b));
    SB_TRY(load_side(o->new_, o->metric, n));
    SB_TRY(check_unique(n));
    if (!o->force) SB_TRY(check_environment(b, n));
    const struct side *partial = b->partial ? b : n->partial ? n : NULL;
    if (partial && !o->force)
        return sb_error(SB_ERR_INPUT, "%s: a partial sweep (interrupted; finish it with `stratbench "
                        "sweep ... --resume`), use --force to compare its finished points",
                        partial->path);
    struct result *r = calloc((size_t)(b->n ? b->n : 1), sizeof *r);
    if (!r) return sb_error(SB_ERR_NOMEM, "compare: out of memory");
    int nr = 0;
    sb_status st = SB_OK;
    for (int i = 0; i < b->n && !st; i++)
        for (int j = 0; j < n->n && !st; j++) {
            /* A run report matches a sweep point of either scaling with the same
             * configuration (the first one found). */
            const struct entry *eb = &b->e[i], *en = &n->e[j];
            int run_side = !strcmp(eb->scaling, "run") || !strcmp(en->scaling, "run");
            int same = !strcmp(eb->key, en->key) && (run_side || !strcmp(eb->scaling, en->scaling));
            /* Each entry is matched at most once (so nr <= b->n, the size of r). */
            int taken = 0;
            for (int k = 0; k < nr; k++) taken |= r[k].b == eb || r[k].n == en;
            if (!same || taken) continue;
            if (eb->n == 0 || en->n == 0)
                st = sb_error(SB_ERR_INPUT, "%s: point %s has no successful run with measured "
                              "steps: the gate cannot decide", eb->n ? n->path : b->path,
                              eb->label);
            else if (!o->force && (st = check_work(eb, en)) != SB_OK)
                break;
            else
                st = decide(o, &b->e[i], &n->e[j], &r[nr++]);
        }
    if (!st && nr == 0)
        st = sb_error(SB_ERR_INPUT, "%s and %s have no configuration in common (strategy, workload, "
                      "replicas, scaling, global batch, hidden, device)", b->path, n->path);
    /* With too few repeats on every point, the gate can say nothing: exit 2,
     * not a silent pass. */
    int can_decide = 0, low = 0;
    for (int i = 0; i < nr; i++) {
        can_decide |= !r[i].low_power;
        low = r[i].low_power ? i : low;
    }
    if (!st && nr > 0 && !can_decide)
        st = sb_error(SB_ERR_INPUT, "compare: no point can reach alpha %g with these repeats (%d in "
                      "BASE, %d in NEW: the smallest possible p is above alpha), so the gate can "
                      "never fail; run the sweeps with --repeats 5 (or 4+ per side)", o->alpha,
                      r[low].b->n, r[low].n->n);
    if (!st) st = sb_compare_print(o, r, nr, b, n);
    if (!st) sb_compare_count(r, nr, quiet, noisy);
    free(r);
    return st;
}

int sb_compare_main(int argc, char **argv)
{
    struct opts o;
    struct side b = {0}, n = {0};
    int quiet = 0, noisy = 0;
    sb_status st = parse_opts(&o, argc, argv);
    if (!st && o.help) {
        usage(stdout);
        return 0;
    }
    if (!st) st = compare(&o, &b, &n, &quiet, &noisy);
    cJSON_Delete(b.doc);
    cJSON_Delete(n.doc);
    free(b.e);
    free(n.e);
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return 2; /* bad input, whatever the cause: the gate could not decide */
    }
    if (quiet) return 1;
    if (!noisy) return 0;
    return o.on_noisy == ON_NOISY_FAIL ? 1 : o.on_noisy == ON_NOISY_RERUN ? 3 : 0;
}
