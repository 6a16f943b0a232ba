/* `stratbench compare`; see compare.h and docs/sweep-compare.md. */
#include "cli/compare.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/stats_tests.h"
#include "cli/suggest.h"
#include "cli/sweep.h"
#include "cli/sweep_stats.h"
#include "report/json_util.h"

#define MAX_REPEATS 1024

/* What compare judges. The default is what a user feels: the wall time of
 * an epoch of training; the step-time statistics hide a few long
 * preemptions (a CPU hog) that the wall time shows. */
enum metric { M_EPOCH_S, M_SAMPLES_PER_S, M_STEP_MS, M_STEP_P95_MS, M_COUNT };
static const char *const METRIC_NAME[M_COUNT] = {"epoch_s", "samples_per_s", "step_ms",
                                                 "step_p95_ms"};
static const char *const METRIC_UNIT[M_COUNT] = {"s", "samples/s", "ms", "ms"};

struct opts {
    double alpha, threshold; /* threshold as a fraction (0.05 = 5%) */
    enum metric metric;
    int larger_better;       /* samples_per_s */
    const char *format;      /* text | markdown | json | github */
    int force, help;
    const char *base, *new_;
};

/* One comparable configuration: its values per repeat. */
struct entry {
    char key[512];   /* strategy|workload|replicas|global_batch|hidden|device */
    char scaling[16];/* strong, weak, or "run" for a single run report (matches either) */
    char label[160]; /* "mirrored n=2 weak (global batch 128)" */
    double v[MAX_REPEATS];
    double step_med[MAX_REPEATS], step_p95[MAX_REPEATS]; /* the tail, shown beside v */
    int n;
    int per_repeat;  /* 1: one value per repeat (sweep); 0: one run's step median */
};

struct side {
    char path[4096]; /* the JSON file read */
    cJSON *doc;
    struct entry *e;
    int n;
};

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

/* Fills key and label of `e` from a sweep point or a report's config. */
static void entry_key(struct entry *e, const cJSON *cfg, const char *scaling)
{
    char *hidden = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cfg, "hidden"));
    snprintf(e->scaling, sizeof e->scaling, "%s", scaling);
    snprintf(e->key, sizeof e->key, "%s|%s|%g|%g|%s|%s", str_at(cfg, "strategy"),
             str_at(cfg, "workload"), num_at(cfg, "replicas"), num_at(cfg, "global_batch"),
             hidden ? hidden : "null", str_at(cfg, "device"));
    snprintf(e->label, sizeof e->label, "%s n=%g %s (global batch %g)", str_at(cfg, "strategy"),
             num_at(cfg, "replicas"), scaling, num_at(cfg, "global_batch"));
    cJSON_free(hidden);
}

/* How many steps a run report measured (step_ms.n); 0 when absent. */
static double measured_steps(const cJSON *rep)
{
    double n = num_at(cJSON_GetObjectItemCaseSensitive(rep, "step_ms"), "n");
    return isfinite(n) ? n : 0;
}

/* Adds one run report's metric (as sweep reads it: sb_sweep_values_from)
 * and its step median and p95 to e. Errors: SB_ERR_INPUT naming `path`
 * when the report lacks the metric. */
static sb_status add_report(struct entry *e, const cJSON *rep, enum metric m, const char *path)
{
    struct sb_sweep_values rv;
    sb_sweep_values_from(rep, &rv);
    const double by_metric[M_COUNT] = {rv.epoch_s, rv.samples_per_s, rv.step_ms, rv.step_p95_ms};
    double v = by_metric[m];
    if (measured_steps(rep) < 1)
        return sb_error(SB_ERR_INPUT, "%s: measured no step (step_ms.n is 0): nothing to compare",
                        path);
    if (!isfinite(v) || v <= 0)
        return sb_error(SB_ERR_INPUT, "%s: no finite %s (train_seconds, epochs, step_ms)", path,
                        METRIC_NAME[m]);
    if (e->n == MAX_REPEATS) return SB_OK;
    e->step_med[e->n] = rv.step_ms;
    e->step_p95[e->n] = rv.step_p95_ms;
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

enum verdict { NOISE, REGRESSION, IMPROVEMENT };
static const char *const VERDICT[] = {"noise", "REGRESSION", "improvement"};

struct result {
    const struct entry *b, *n;
    double base_med, new_med, change; /* change: (new - base)/base */
    double base_step[2], new_step[2]; /* medians over repeats of step_ms median, p95 */
    double p;                         /* NaN when no rank test was possible */
    int low_power;                    /* repeats too few for p to reach alpha */
    enum verdict verdict;
};

/* The verdict on one matched point: the median moved by more than the
 * threshold in the worse (better) direction AND, with repeats on both sides,
 * the two-sided Mann-Whitney p-value is below alpha. */
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
    if (!isfinite(worse)) significant = 0;
    r->verdict = !significant ? NOISE : worse > o->threshold ? REGRESSION
               : worse < -o->threshold ? IMPROVEMENT : NOISE;
    return SB_OK;
}

/* Prints doc as JSON and a newline, then frees doc. `fail`: building doc
 * ran out of memory (nothing is printed). Errors: SB_ERR_NOMEM. */
static sb_status print_json(cJSON *doc, int fail)
{
    char *t = fail ? NULL : cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!t) return sb_error(SB_ERR_NOMEM, "compare: out of memory building the JSON output");
    printf("%s\n", t);
    cJSON_free(t);
    return SB_OK;
}

/* Prints the verdicts in o->format. Errors: SB_ERR_NOMEM (json, github). */
static sb_status print_results(const struct opts *o, const struct result *r, int nr,
                          const struct side *b, const struct side *n)
{
    const char *unit = METRIC_UNIT[o->metric];
    const char *metric = METRIC_NAME[o->metric];
    const char *better = o->larger_better ? "larger is better" : "smaller is better";
    int any_no_test = 0, any_low_power = 0, regressions = 0;
    for (int i = 0; i < nr; i++) {
        any_no_test |= isnan(r[i].p);
        any_low_power |= r[i].low_power;
        regressions += r[i].verdict == REGRESSION;
    }
    if (strcmp(o->format, "github") == 0) {
        int fail = 0;
        cJSON *list = cJSON_CreateArray();
        for (int i = 0; i < nr; i++) {
            cJSON *x = cJSON_CreateObject();
            sb_json_add_str(x, "name", r[i].n->label, &fail);
            sb_json_add_str(x, "unit", unit, &fail);
            sb_json_add_num(x, "value", r[i].new_med, &fail);
            sb_json_append(list, x, &fail);
        }
        return print_json(list, fail || !list);
    }
    if (strcmp(o->format, "json") == 0) {
        int fail = 0;
        cJSON *doc = cJSON_CreateObject(), *pts;
        sb_json_add_str(doc, "base", b->path, &fail);
        sb_json_add_str(doc, "new", n->path, &fail);
        sb_json_add_str(doc, "metric", metric, &fail);
        sb_json_add_num(doc, "alpha", o->alpha, &fail);
        sb_json_add_num(doc, "threshold", o->threshold, &fail);
        sb_json_add_num(doc, "regressions", regressions, &fail);
        pts = sb_json_add_arr(doc, "points", &fail);
        for (int i = 0; i < nr; i++) {
            cJSON *x = cJSON_CreateObject();
            sb_json_add_str(x, "name", r[i].n->label, &fail);
            sb_json_add_num(x, "base_median", r[i].base_med, &fail);
            sb_json_add_num(x, "new_median", r[i].new_med, &fail);
            sb_json_add_num(x, "base_step_ms_median", r[i].base_step[0], &fail);
            sb_json_add_num(x, "base_step_ms_p95", r[i].base_step[1], &fail);
            sb_json_add_num(x, "new_step_ms_median", r[i].new_step[0], &fail);
            sb_json_add_num(x, "new_step_ms_p95", r[i].new_step[1], &fail);
            sb_json_add_num(x, "change", isfinite(r[i].change) ? r[i].change : 0, &fail);
            sb_json_add_num(x, "p_value", r[i].p, &fail); /* null when NaN: no rank test */
            sb_json_add_str(x, "test", isnan(r[i].p) ? "threshold-only" : "mann-whitney-u", &fail);
            sb_json_add_num(x, "base_repeats", r[i].b->n, &fail);
            sb_json_add_num(x, "new_repeats", r[i].n->n, &fail);
            sb_json_add_str(x, "verdict", r[i].verdict == REGRESSION ? "regression"
                                          : VERDICT[r[i].verdict], &fail);
            sb_json_append(pts, x, &fail);
        }
        return print_json(doc, fail || !doc);
    }
    int md = strcmp(o->format, "markdown") == 0;
    if (md)
        printf("### stratbench compare: %s (%s, %s)\n\n| point | base | new | change | p | verdict "
               "| step ms p50/p95 base | new |\n"
               "|---|---:|---:|---:|---:|---|---:|---:|\n", metric, unit, better);
    else
        printf("# compare %s (%s), %s: two-sided Mann-Whitney U at alpha %g and |change| > %g%%\n"
               "# %-44s %12s %12s %8s %8s  %-11s %17s %17s\n", metric, better, unit, o->alpha,
               o->threshold * 100, "point", "base", "new", "change", "p", "verdict",
               "step p50/p95 base", "new (ms)");
    for (int i = 0; i < nr; i++) {
        char p[32], tb[48], tn[48];
        if (isnan(r[i].p)) snprintf(p, sizeof p, "-");
        else snprintf(p, sizeof p, "%.3g", r[i].p);
        snprintf(tb, sizeof tb, "%.3g/%.3g", r[i].base_step[0], r[i].base_step[1]);
        snprintf(tn, sizeof tn, "%.3g/%.3g", r[i].new_step[0], r[i].new_step[1]);
        printf(md ? "| %s | %.4g | %.4g | %+.1f%% | %s | %s | %s | %s |\n"
                  : "  %-44s %12.4g %12.4g %+7.1f%% %8s  %-11s %17s %17s\n",
               r[i].n->label, r[i].base_med, r[i].new_med, 100 * r[i].change, p,
               VERDICT[r[i].verdict], tb, tn);
    }
    const char *pre = md ? "\n" : "# ";
    if (any_no_test)
        printf("%snote: a side has one run report (per-step summaries only): no repeat-level test "
               "was possible, the threshold alone decided\n", pre);
    if (any_low_power)
        printf("%snote: too few repeats for the rank test to reach alpha %g (4+ per side needed "
               "at 0.05): such points are never called regressions\n", pre, o->alpha);
    printf("%s%d regression%s in %d matched point%s\n", pre, regressions, regressions == 1 ? "" : "s",
           nr, nr == 1 ? "" : "s");
    return SB_OK;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench compare [flags] BASE NEW\n"
            "  BASE, NEW: a run report, a sweep's scaling.json, or a sweep directory\n"
            "  --metric M       epoch_s     epoch_s (wall time of an epoch of training, smaller is\n"
            "                               better), samples_per_s (samples trained / wall s,\n"
            "                               larger is better), step_ms or step_p95_ms (the median\n"
            "                               or p95 of the step time; blind to a few long stalls)\n"
            "  --alpha A        0.05        significance level of the two-sided Mann-Whitney U test\n"
            "  --threshold T    5%%          minimum change of the median to call a regression\n"
            "  --format F       text        text, markdown, json or github (customSmallerIsBetter)\n"
            "  --force                      compare even if the environments differ\n"
            "exit status: 0 no regression, 1 regression, 2 bad input\n");
}

static sb_status parse_opts(struct opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"metric", 1, NULL, 'm'}, {"alpha", 1, NULL, 'a'}, {"threshold", 1, NULL, 't'},
        {"format", 1, NULL, 'f'}, {"force", 0, NULL, 'F'}, {"help", 0, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    *o = (struct opts){.alpha = 0.05, .threshold = 0.05, .format = "text"};
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
        case 'h': o->help = 1; return SB_OK;
        default:
            return sb_cli_bad_flag("compare", argv[optind - 1], longs);
        }
    }
    if (argc - optind != 2)
        return sb_error(SB_ERR_USAGE, "compare: expected two inputs, BASE and NEW (got %d)",
                        argc - optind);
    o->base = argv[optind];
    o->new_ = argv[optind + 1];
    return SB_OK;
}

static sb_status compare(const struct opts *o, struct side *b, struct side *n, int *regressions)
{
    SB_TRY(load_side(o->base, o->metric, b));
    SB_TRY(check_unique(b));
    SB_TRY(load_side(o->new_, o->metric, n));
    SB_TRY(check_unique(n));
    if (!o->force) SB_TRY(check_environment(b, n));
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
            else
                st = decide(o, &b->e[i], &n->e[j], &r[nr++]);
        }
    if (!st && nr == 0)
        st = sb_error(SB_ERR_INPUT, "%s and %s have no configuration in common (strategy, workload, "
                      "replicas, scaling, global batch, hidden, device)", b->path, n->path);
    if (!st) st = print_results(o, r, nr, b, n);
    if (!st) {
        for (int i = 0; i < nr; i++) *regressions += r[i].verdict == REGRESSION;
    }
    free(r);
    return st;
}

int sb_compare_main(int argc, char **argv)
{
    struct opts o;
    struct side b = {0}, n = {0};
    int regressions = 0;
    sb_status st = parse_opts(&o, argc, argv);
    if (!st && o.help) {
        usage(stdout);
        return 0;
    }
    if (!st) st = compare(&o, &b, &n, &regressions);
    cJSON_Delete(b.doc);
    cJSON_Delete(n.doc);
    free(b.e);
    free(n.e);
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return 2; /* bad input, whatever the cause: the gate could not decide */
    }
    return regressions ? 1 : 0;
}
