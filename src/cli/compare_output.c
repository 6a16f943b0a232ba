/* `stratbench compare`'s outputs: the text or markdown table, --format json
 * (reports/compare.schema.json) and --format github; see compare_internal.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/compare_internal.h"
#include "core/status.h"
#include "harness/run_warnings.h"
#include "report/json_util.h"

static const char *const VERDICT[] = {"noise", "REGRESSION", "improvement"};

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

/* --format github: the benchmark-action list, one {name, unit, value} per
 * point (the new side's median). */
static sb_status print_github(const struct opts *o, const struct result *r, int nr)
{
    int fail = 0;
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; i < nr; i++) {
        cJSON *x = cJSON_CreateObject();
        sb_json_add_str(x, "name", r[i].n->label, &fail);
        sb_json_add_str(x, "unit", METRIC_UNIT[o->metric], &fail);
        sb_json_add_num(x, "value", r[i].new_med, &fail);
        sb_json_append(list, x, &fail);
    }
    return print_json(list, fail || !list);
}

/* One point of --format json. */
static cJSON *json_point(const struct result *r, int *fail)
{
    cJSON *x = cJSON_CreateObject();
    sb_json_add_str(x, "name", r->n->label, fail);
    sb_json_add_num(x, "base_median", r->base_med, fail);
    sb_json_add_num(x, "new_median", r->new_med, fail);
    sb_json_add_num(x, "base_step_ms_median", r->base_step[0], fail);
    sb_json_add_num(x, "base_step_ms_p95", r->base_step[1], fail);
    sb_json_add_num(x, "new_step_ms_median", r->new_step[0], fail);
    sb_json_add_num(x, "new_step_ms_p95", r->new_step[1], fail);
    sb_json_add_num(x, "change", isfinite(r->change) ? r->change : 0, fail);
    sb_json_add_num(x, "p_value", r->p, fail); /* null when NaN: no rank test */
    sb_json_add_str(x, "test", isnan(r->p) ? "threshold-only" : "mann-whitney-u", fail);
    sb_json_add_num(x, "base_repeats", r->b->n, fail);
    sb_json_add_num(x, "new_repeats", r->n->n, fail);
    sb_json_add_str(x, "verdict", r->verdict == REGRESSION ? "regression" : VERDICT[r->verdict],
                    fail);
    sb_json_add_item(x, "noisy", cJSON_CreateBool(r->noisy), fail);
    static const char *const side[2] = {"base", "new"};
    for (int s = 0; s < 2; s++) {
        char k[48];
        snprintf(k, sizeof k, "%s_noisy_repeats", side[s]);
        sb_json_add_num(x, k, r->noise[s].noisy_repeats, fail);
        snprintf(k, sizeof k, "%s_stall_fraction_max", side[s]);
        sb_json_add_num(x, k, r->noise[s].stall_fraction, fail);
        snprintf(k, sizeof k, "%s_nivcsw_per_s_max", side[s]);
        sb_json_add_num(x, k, r->noise[s].nivcsw_per_s, fail);
    }
    return x;
}

/* --format json: the verdict document (reports/compare.schema.json). */
static sb_status print_verdict_json(const struct opts *o, const struct result *r, int nr,
                                    const struct side *b, const struct side *n, int regressions,
                                    int noisy)
{
    int fail = 0;
    cJSON *doc = cJSON_CreateObject(), *pts;
    sb_json_add_str(doc, "schema_version", COMPARE_SCHEMA_VERSION, &fail);
    sb_json_add_str(doc, "kind", "stratbench-compare", &fail);
    sb_json_add_str(doc, "base", b->path, &fail);
    sb_json_add_str(doc, "new", n->path, &fail);
    sb_json_add_str(doc, "metric", METRIC_NAME[o->metric], &fail);
    sb_json_add_str(doc, "unit", METRIC_UNIT[o->metric], &fail);
    sb_json_add_item(doc, "larger_is_better", cJSON_CreateBool(o->larger_better), &fail);
    sb_json_add_num(doc, "alpha", o->alpha, &fail);
    sb_json_add_num(doc, "threshold", o->threshold, &fail);
    sb_json_add_num(doc, "regressions", regressions, &fail);
    sb_json_add_num(doc, "noisy_regressions", noisy, &fail);
    sb_json_add_str(doc, "on_noisy", ON_NOISY_NAME[o->on_noisy], &fail);
    pts = sb_json_add_arr(doc, "points", &fail);
    for (int i = 0; i < nr; i++) sb_json_append(pts, json_point(&r[i], &fail), &fail);
    return print_json(doc, fail || !doc);
}

/* The text table (default, '#' before every non-data line) or --format
 * markdown, with the notes and the count of regressions. */
static void print_table(const struct opts *o, const struct result *r, int nr, int regressions,
                        int noisy, int any_no_test, int any_low_power)
{
    const char *unit = METRIC_UNIT[o->metric], *metric = METRIC_NAME[o->metric];
    const char *better = o->larger_better ? "larger is better" : "smaller is better";
    int md = strcmp(o->format, "markdown") == 0;
    if (md)
        printf("### stratbench compare: %s (%s, %s)\n\n| point | base | new | change | p | verdict "
               "| step ms p50/p95 base | new | noisy repeats base, new (worst stall, cs/s) |\n"
               "|---|---:|---:|---:|---:|---|---:|---:|---|\n", metric, unit, better);
    else
        printf("# compare %s (%s), %s: two-sided Mann-Whitney U at alpha %g and |change| > %g%%\n"
               "# %-44s %12s %12s %8s %8s  %-18s %17s %17s  %s\n", metric, better, unit, o->alpha,
               o->threshold * 100, "point", "base", "new", "change", "p", "verdict",
               "step p50/p95 base", "new (ms)", "noisy repeats base, new (worst stall, cs/s)");
    for (int i = 0; i < nr; i++) {
        char p[32], tb[48], tn[48], verdict[32], noise[96];
        if (isnan(r[i].p)) snprintf(p, sizeof p, "-");
        else snprintf(p, sizeof p, "%.3g", r[i].p);
        snprintf(tb, sizeof tb, "%.3g/%.3g", r[i].base_step[0], r[i].base_step[1]);
        snprintf(tn, sizeof tn, "%.3g/%.3g", r[i].new_step[0], r[i].new_step[1]);
        snprintf(verdict, sizeof verdict, "%s%s", VERDICT[r[i].verdict],
                 r[i].noisy ? " (noisy)" : "");
        const struct side_noise *nb = &r[i].noise[0], *nn = &r[i].noise[1];
        snprintf(noise, sizeof noise, "%d/%d, %d/%d (%.0f%%, %.0f/s)", nb->noisy_repeats,
                 r[i].b->n, nn->noisy_repeats, r[i].n->n,
                 100 * (nb->stall_fraction > nn->stall_fraction ? nb->stall_fraction
                                                                : nn->stall_fraction),
                 nb->nivcsw_per_s > nn->nivcsw_per_s ? nb->nivcsw_per_s : nn->nivcsw_per_s);
        printf(md ? "| %s | %.4g | %.4g | %+.1f%% | %s | %s | %s | %s | %s |\n"
                  : "  %-44s %12.4g %12.4g %+7.1f%% %8s  %-18s %17s %17s  %s\n",
               r[i].n->label, r[i].base_med, r[i].new_med, 100 * r[i].change, p, verdict, tb, tn,
               noise);
    }
    const char *pre = md ? "\n" : "# ";
    if (any_no_test)
        printf("%snote: a side has one run report (per-step summaries only): no repeat-level test "
               "was possible, the threshold alone decided\n", pre);
    if (any_low_power)
        printf("%snote: too few repeats for the rank test to reach alpha %g (4+ per side needed "
               "at 0.05): such points are never called regressions\n", pre, o->alpha);
    int any_noisy = 0;
    for (int i = 0; i < nr; i++) any_noisy |= r[i].noisy;
    if (any_noisy)
        printf("%snote: (noisy): a repeat of that side says \"noisy run\" (more than %.0f%% of its "
               "step time in stalled steps, or more than %.0f involuntary context switches per "
               "second: other work took the CPUs), so the verdict may describe the machine, not "
               "the build\n", pre, 100 * SB_WARN_STALL_FRACTION, SB_WARN_NIVCSW_PER_S);
    printf("%s%d regression%s in %d matched point%s", pre, regressions, regressions == 1 ? "" : "s",
           nr, nr == 1 ? "" : "s");
    if (noisy)
        printf(" (%d with a noisy side; --on-noisy %s: %s)", noisy, ON_NOISY_NAME[o->on_noisy],
               o->on_noisy == ON_NOISY_RERUN ? "exit 3, rerun the noisy repeats (stratbench sweep "
                                               "--rerun-noisy) and compare again"
               : o->on_noisy == ON_NOISY_FAIL ? "they fail the gate"
                                              : "warned only, they do not fail the gate");
    printf("\n");
}

sb_status sb_compare_print(const struct opts *o, const struct result *r, int nr,
                               const struct side *b, const struct side *n)
{
    int any_no_test = 0, any_low_power = 0, quiet, noisy;
    for (int i = 0; i < nr; i++) {
        any_no_test |= isnan(r[i].p);
        any_low_power |= r[i].low_power;
    }
    sb_compare_count(r, nr, &quiet, &noisy);
    if (strcmp(o->format, "github") == 0) return print_github(o, r, nr);
    if (strcmp(o->format, "json") == 0)
        return print_verdict_json(o, r, nr, b, n, quiet + noisy, noisy);
    print_table(o, r, nr, quiet + noisy, noisy, any_no_test, any_low_power);
    return SB_OK;
}

