/* The points of a sweep's matrix (strategies x replicas x scaling x
 * methods, or its layouts, plus the single n=1 baseline), each checked
 * with train's own flag parser before any run, and the command line of a
 * point's child `stratbench train`. */
#include "cli/sweep_plan.h"

#include <stdio.h>
#include <string.h>

#include "cli/train_opts.h"
#include "strategies/strategy.h"

/* The method of `pt`, NULL for plain gradients (no flags). */
const struct sweep_method *sb_sweep_method_of(const struct sweep_opts *o,
                                              const struct sb_sweep_point *pt)
{
    return pt->method >= 0 ? &o->methods[pt->method] : NULL;
}

/* Whether the flags after `--` give --trace already. */
static int extra_traces(const struct sweep_opts *o)
{
    for (int i = 0; i < o->n_extra && i < 256; i++)
        if (!strcmp(o->extra[i], "--trace") || !strncmp(o->extra[i], "--trace=", 8)) return 1;
    return 0;
}

/* `self train` with the point's strategy, replicas, batch, epochs, report
 * `path`, the sweep's --max-steps and --data, the flags after `--` (for the
 * baseline the sweep adds, without the other strategies' own flags), then
 * the point's method (last, so that it is the one train takes). A pipeline
 * point also gets --trace <path less .json>.trace.json (unless the flags
 * after `--` trace), from which the page (reports/plot.py) draws its
 * measured schedule as a Gantt chart. */
void sb_sweep_point_argv(const struct sweep_opts *o, const char *self,
                         const struct sb_sweep_point *pt, const char *path, struct child_args *ca)
{
    snprintf(ca->n, sizeof ca->n, "%d", pt->replicas);
    snprintf(ca->b, sizeof ca->b, "%d", pt->batch);
    snprintf(ca->e, sizeof ca->e, "%d", o->epochs);
    snprintf(ca->m, sizeof ca->m, "%ld", o->max_steps);
    snprintf(ca->p, sizeof ca->p, "%s", o->precisions[pt->precision]);
    char **argv = ca->argv;
    int a = 0;
    argv[a++] = (char *)self, argv[a++] = "train";
    argv[a++] = "--strategy", argv[a++] = (char *)pt->strategy;
    argv[a++] = "--replicas", argv[a++] = ca->n, argv[a++] = "--batch", argv[a++] = ca->b;
    argv[a++] = "--epochs", argv[a++] = ca->e, argv[a++] = "--report", argv[a++] = (char *)path;
    if (o->max_steps) argv[a++] = "--max-steps", argv[a++] = ca->m;
    if (o->data) argv[a++] = "--data", argv[a++] = (char *)o->data;
    if (o->precisions_given) argv[a++] = "--precision", argv[a++] = ca->p;
    if (!strcmp(pt->strategy, "pipeline") && !extra_traces(o)) {
        size_t len = strlen(path);
        if (len >= 5 && !strcmp(path + len - 5, ".json")) len -= 5;
        snprintf(ca->trace, sizeof ca->trace, "%.*s.trace.json", (int)len, path);
        argv[a++] = "--trace", argv[a++] = ca->trace;
    }
    struct sweep_layout_flags *lf = &ca->layout;
    if (pt->layout >= 0) { /* the layout's own flags (sweep_layouts.c) after the sweep's */
        sb_sweep_layout_flags(&o->layouts[pt->layout], lf);
        for (int i = 0; i < lf->n; i++) argv[a++] = lf->words[i];
    }
    const struct sb_strategy_ops *ops = sb_strategy_find(pt->strategy);
    for (int i = 0; i < o->n_extra && i < 256; i++) {
        int value_follows;
        if (pt->implicit && ops && sb_strategy_option_foreign(ops, o->extra[i], &value_follows)) {
            i += value_follows; /* a flag of the strategies under test, not the baseline's */
            continue;
        }
        argv[a++] = o->extra[i];
    }
    const struct sweep_method *m = sb_sweep_method_of(o, pt);
    if (m) {
        argv[a++] = "--grad-compression", argv[a++] = (char *)m->compression;
        argv[a++] = "--local-sgd", argv[a++] = (char *)m->local;
        if (m->rank[0]) argv[a++] = "--powersgd-rank", argv[a++] = (char *)m->rank;
    }
    argv[a] = NULL;
}

/* Whether train's flag check passes `pt`'s command line. */
static int train_takes(const struct sweep_opts *o, const char *self,
                       const struct sb_sweep_point *pt)
{
    struct child_args ca;
    sb_sweep_point_argv(o, self, pt, "scaling-check.json", &ca);
    char *argv[64 + 256];
    int argc = 0;
    for (char **a = ca.argv + 1; *a; a++) argv[argc++] = *a; /* getopt may permute it */
    argv[argc] = NULL;
    struct sb_train_opts t;
    return sb_train_opts_parse(&t, argc, argv) == SB_OK;
}

/* Whether to run `pt`: not when train refuses its method although it
 * takes the point without it (e.g. zero refuses powersgd), which is
 * printed with train's reason; any other refusal is the run's to report,
 * as a failed point. */
static int point_valid(const struct sweep_opts *o, const char *self,
                       const struct sb_sweep_point *pt)
{
    const struct sweep_method *m = sb_sweep_method_of(o, pt);
    if (!m || train_takes(o, self, pt)) return 1;
    char why[256];
    snprintf(why, sizeof why, "%s", sb_error_message());
    struct sb_sweep_point plain = *pt;
    plain.method = -1;
    if (!train_takes(o, self, &plain)) return 1;
    printf("# skipped %s %s n=%d: %s\n", pt->strategy, m->name, pt->replicas, why);
    sb_error(SB_ERR_USAGE, "%s", why); /* for sb_sweep_plan_points' message */
    return 0;
}

/* Adds `pt` for every method its strategy takes (plain only when it takes
 * none), leaving out the points train refuses; first_bad (256 bytes)
 * keeps the first refusal's reason. */
static void add_points(const struct sweep_opts *o, const char *self, struct sb_sweep_point pt,
                       struct sb_sweep_point *pts, int *n_pts, struct progress *pg,
                       char *first_bad)
{
    const struct sb_strategy_ops *ops = sb_strategy_find(pt.strategy);
    int n = ops && ops->grad_sync ? o->n_methods : 1;
    for (int k = 0; k < n; k++) {
        pt.method = ops && ops->grad_sync ? k : -1;
        const struct sweep_method *m = sb_sweep_method_of(o, &pt);
        if (m && !strcmp(m->compression, "none") && !strcmp(m->local, "0")) pt.method = -1;
        if (!point_valid(o, self, &pt)) {
            if (!first_bad[0]) snprintf(first_bad, 256, "%s", sb_error_message());
            continue;
        }
        pts[(*n_pts)++] = pt;
        pg->total += o->repeats;
    }
}

/* Adds layout k's point of scaling s and precision prec (its strategy and flags by
 * sb_sweep_layout_flags, replicas = dp), for every method its strategy
 * takes; a layout train refuses (a strategy that does not exist yet, a
 * layout it cannot run) is skipped with train's reason. */
static void add_layout_point(const struct sweep_opts *o, const char *self, int k, int s,
                             int prec, struct sb_sweep_point *pts, int *n_pts, struct progress *pg,
                             char *first_bad)
{
    const struct sb_layout *l = &o->layouts[k];
    struct sweep_layout_flags f;
    sb_sweep_layout_flags(l, &f);
    struct sb_sweep_point pt = {.strategy = f.strategy, .replicas = l->dp, .scaling = s,
                                .method = -1, .layout = k, .precision = prec,
                                .batch = s == 0 ? o->global_batch / l->dp : o->batch};
    if (!train_takes(o, self, &pt)) {
        char name[96];
        sb_layout_name(l, name, sizeof name);
        printf("# skipped layout %s: %s\n", name, sb_error_message());
        if (!first_bad[0]) snprintf(first_bad, 256, "%s", sb_error_message());
        return;
    }
    add_points(o, self, pt, pts, n_pts, pg, first_bad);
}

/* The matrix's points: per scaling, single n=1 first (the baseline) unless
 * the matrix runs it, then strategies x replicas x methods. Errors:
 * SB_ERR_USAGE (train's reason) when train refuses every point. */
sb_status sb_sweep_plan_points(const struct sweep_opts *o, const char *self,
                               struct sb_sweep_point *pts, int *n_pts, struct progress *pg)
{
    *n_pts = 0;
    char first_bad[256] = "";
    for (int q = 0; q < 2 * o->n_precisions; q++) {
        int s = q % 2, prec = q / 2; /* each precision is a copy of the matrix */
        if (!o->scaling[s]) continue;
        int has_single = 0;
        for (int i = 0; i < o->n_strategies && !o->n_layouts; i++)
            for (int j = 0; j < o->n_replicas; j++)
                has_single |= !strcmp(o->strategies[i], "single") && o->replicas[j] == 1;
        if (!has_single)
            add_points(o, self, (struct sb_sweep_point){.strategy = "single", .replicas = 1,
                                                        .scaling = s, .method = -1, .implicit = 1,
                                                        .layout = -1, .precision = prec,
                                                        .batch = s == 0 ? o->global_batch : o->batch},
                       pts, n_pts, pg, first_bad);
        for (int k = 0; k < o->n_layouts; k++)
            add_layout_point(o, self, k, s, prec, pts, n_pts, pg, first_bad);
        for (int i = 0; i < o->n_strategies && !o->n_layouts; i++)
            for (int j = 0; j < o->n_replicas; j++) {
                int n = o->replicas[j];
                const struct sb_strategy_ops *ops = sb_strategy_find(o->strategies[i]);
                if (ops && ops->max_replicas > 0 && n > ops->max_replicas) continue;
                add_points(o, self, (struct sb_sweep_point){.strategy = o->strategies[i],
                                                            .replicas = n, .scaling = s,
                                                            .layout = -1, .precision = prec,
                                                            .batch = s == 0 ? o->global_batch / n
                                                                            : o->batch},
                           pts, n_pts, pg, first_bad);
            }
    }
    if (*n_pts == 0 && first_bad[0])
        return sb_error(SB_ERR_USAGE, "sweep: train refuses every point: %s", first_bad);
    return SB_OK;
}
