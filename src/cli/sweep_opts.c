/* `stratbench sweep`'s flags; see sweep_opts.h. */
#include "cli/sweep_opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/suggest.h"
#include "cli/sweep_stats.h"
#include "core/config.h"
#include "strategies/strategy.h"

/* Train flags the sweep sets itself: refused after `--` (a `--batch` there
 * would silently override the sweep's while scaling.json records its own;
 * a `--report` would make every run "FAILED (no report)"). */
static const char *const OWNED_FLAGS[] = {"strategy",  "replicas", "batch",
                                          "epochs",    "report",   "max-steps",
                                          "data",      "grad-compression", "local-sgd"};
/* Train outputs that would name one file for every run of the sweep: each
 * run would replace the last one's (or one of the sweep's own files). */
static const char *const PER_RUN_OUTPUTS[] = {"trace", "save-params", "mllog"};

/* The flags of `table` (n names) that args[0..n_args) give after `--`, also
 * abbreviated (`--epoch`, as getopt_long takes it) or as --flag=value, into
 * found (", "-separated). */
static void find_flags(char **args, int n_args, const char *const *table, size_t n,
                       char *found, size_t size)
{
    found[0] = 0;
    for (int i = 0; i < n_args; i++) {
        const char *a = args[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) continue;
        size_t len = strcspn(a + 2, "=");
        for (size_t k = 0; k < n; k++)
            if (len >= 2 && strncmp(table[k], a + 2, len) == 0) {
                size_t used = strlen(found);
                snprintf(found + used, size - used, "%s--%s", used ? ", " : "", table[k]);
                break;
            }
    }
}

void sb_sweep_usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench sweep [flags] [-- extra train flags]\n"
            "  --strategies LIST   all         strategies (single runs at n=1); all = every\n"
            "                      registered one: %s\n"
            "  --replicas LIST     1,2,4       replica counts\n"
            "  --precisions LIST   fp32        numerics: fp32, bf16, fp16 (train --precision);\n"
            "                      every point and the single baseline run in each, and the\n"
            "                      page draws step time against time to accuracy per precision\n"
            "  --layouts LIST      none        instead of --strategies and --replicas: layouts\n"
            "                      separated by ';', each dpN,tpN,ppN,mN,vN,zN, a schedule and a\n"
            "                      rank order, e.g. \"dp4;dp4,z1;dp2,tp2\" (docs/layouts.md); one\n"
            "                      point per layout, the page draws step time against memory\n"
            "                      per rank\n"
            "  --grad-compression LIST  none   methods: none, fp16, bf16, powersgd, powersgd:R\n"
            "                      (rank R); strategies that take it run each\n"
            "  --local-sgd LIST    0           local SGD periods H (0 = every step); each H > 0\n"
            "                      is one more method (plain gradients)\n"
            "  --scaling LIST      strong,weak strong: fixed global batch; weak: fixed per-replica\n"
            "  --global-batch G    256         strong scaling: per-replica batch = G / n\n"
            "  --batch B           64          weak scaling: per-replica batch\n"
            "  --repeats R         5           runs per point (4+ per side lets compare's rank test reach 0.05)\n"
            "  --rerun-noisy K     0           run a repeat again, up to K times, while its report\n"
            "                                  says \"noisy run\" (compare --on-noisy rerun)\n"
            "  --epochs E          1           epochs per run\n"
            "  --max-steps N       none        step limit per run\n"
            "  --data DIR          $STRATBENCH_DATA  MNIST folder\n"
            "  --out DIR           runs/sweep-<UTC time>  where reports and scaling.json go\n"
            "  --resume            continue the interrupted sweep in --out DIR (same flags):\n"
            "                      its finished runs are kept, the rest are run\n"
            "  single runs at n=1 in every sweep: it is the baseline of speedup and efficiency.\n"
            "  Ctrl-C (SIGINT) or SIGTERM stops the running child, writes scaling.json of the\n"
            "  finished runs marked \"partial\" and exits 130 (143 for SIGTERM).\n"
            "  After --, train flags for every run; those the sweep sets (--strategy, --replicas,\n"
            "  --batch, --epochs, --report, --max-steps, --data, --grad-compression,\n"
            "  --local-sgd) are refused, as are --trace, --save-params and --mllog (one file\n"
            "  for every run); the baseline single runs without the other strategies' own\n"
            "  flags (--bucket-mb, --servers, ...).\n"
            "  A strategy that does not take a method runs plain; a point train would refuse\n"
            "  (e.g. zero with powersgd) is skipped with its reason.\n",
            sb_strategy_names_joined(","));
}

static sb_status parse_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return sb_error(SB_ERR_USAGE, "--%s: '%s' is not an integer in %ld..%ld", flag, s, lo, hi);
    *out = v;
    return SB_OK;
}

/* Splits the comma-separated `arg` into items; an empty item ("single,",
 * "1,,2") or one given twice is an error naming the flag. */
static sb_status parse_list(const char *flag, const char *arg, char items[][32], int *n)
{
    char buf[512];
    if (strlen(arg) >= sizeof buf)
        return sb_error(SB_ERR_USAGE, "--%s: list longer than %zu bytes", flag, sizeof buf - 1);
    strcpy(buf, arg);
    *n = 0;
    for (char *rest = buf, *tok; (tok = strsep(&rest, ",")) != NULL;) {
        if (!*tok) return sb_error(SB_ERR_USAGE, "--%s: empty item in '%s'", flag, arg);
        if (*n == SB_SWEEP_MAX_LIST || strlen(tok) >= 32)
            return sb_error(SB_ERR_USAGE, "--%s: too many or too long items in '%s'", flag, arg);
        for (int i = 0; i < *n; i++)
            if (strcmp(items[i], tok) == 0)
                return sb_error(SB_ERR_USAGE, "--%s: '%s' appears twice in '%s'", flag, tok, arg);
        strcpy(items[(*n)++], tok);
    }
    return SB_OK;
}

/* Refuses train flags after `--` that the sweep sets itself (OWNED_FLAGS)
 * and outputs every run would write to one file (PER_RUN_OUTPUTS), also
 * abbreviated or as --flag=value. Errors: SB_ERR_USAGE naming every such
 * flag. */
static sb_status check_extra(const struct sweep_opts *o)
{
    char found[256];
    find_flags(o->extra, o->n_extra, PER_RUN_OUTPUTS,
               sizeof PER_RUN_OUTPUTS / sizeof PER_RUN_OUTPUTS[0], found, sizeof found);
    if (found[0])
        return sb_error(SB_ERR_USAGE, "sweep: %s after -- would name one file for every run "
                        "(each would replace the last); the sweep keeps each run's report in "
                        "--out", found);
    find_flags(o->extra, o->n_extra, OWNED_FLAGS, sizeof OWNED_FLAGS / sizeof OWNED_FLAGS[0],
               found, sizeof found);
    if (found[0])
        return sb_error(SB_ERR_USAGE, "sweep: %s after -- %s set by the sweep itself (use the "
                        "sweep's own flags: --strategies, --replicas, --batch/--global-batch, "
                        "--epochs, --max-steps, --data, --out, --grad-compression, --local-sgd)",
                        found,
                        strchr(found, ',') ? "are" : "is");
    return SB_OK;
}

/* --strategies LIST: names the registry knows. */
static sb_status parse_strategies(struct sweep_opts *o, const char *arg)
{
    SB_TRY(parse_list("strategies", arg, o->strategies, &o->n_strategies));
    for (int i = 0; i < o->n_strategies; i++)
        if (!sb_strategy_find(o->strategies[i]))
            return sb_error(SB_ERR_USAGE, "--strategies: unknown strategy '%s' (expected %s)",
                            o->strategies[i], sb_strategy_names());
    return SB_OK;
}

/* An integer list (--replicas, --local-sgd) of values in lo..hi. */
static sb_status parse_int_list(const char *flag, const char *arg, long lo, long hi, int *out,
                                int *n)
{
    char items[SB_SWEEP_MAX_LIST][32];
    SB_TRY(parse_list(flag, arg, items, n));
    for (int i = 0; i < *n; i++) {
        long v = 0;
        SB_TRY(parse_int(flag, items[i], lo, hi, &v));
        out[i] = (int)v;
        for (int k = 0; k < i; k++)
            if (out[k] == out[i])
                return sb_error(SB_ERR_USAGE, "--%s: %d appears twice in '%s'", flag, out[i], arg);
    }
    return SB_OK;
}

/* --grad-compression LIST: none, fp16, bf16, powersgd or powersgd:R. */
static sb_status parse_compressions(struct sweep_opts *o, const char *arg)
{
    SB_TRY(parse_list("grad-compression", arg, o->compressions, &o->n_compressions));
    static const char *const known[] = {"none", "fp16", "bf16", "powersgd"};
    for (int i = 0; i < o->n_compressions; i++) {
        const char *m = o->compressions[i];
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) ok |= !strcmp(m, known[k]);
        long r = 0;
        if (!ok && strncmp(m, "powersgd:", 9) == 0) {
            SB_TRY(parse_int("grad-compression", m + 9, 1, 1024, &r));
            ok = 1;
        }
        if (!ok)
            return sb_error(SB_ERR_USAGE, "--grad-compression: '%s' is not none, fp16, bf16, "
                            "powersgd or powersgd:R", m);
    }
    return SB_OK;
}

/* --precisions LIST: fp32, bf16 and/or fp16 (train's --precision). */
static sb_status parse_precisions(struct sweep_opts *o, const char *arg)
{
    char items[SB_SWEEP_MAX_LIST][32];
    int n;
    SB_TRY(parse_list("precisions", arg, items, &n));
    for (int i = 0; i < n; i++)
        if (strcmp(items[i], "fp32") && strcmp(items[i], "bf16") && strcmp(items[i], "fp16"))
            return sb_error(SB_ERR_USAGE, "--precisions: '%s' is not fp32, bf16 or fp16",
                            items[i]);
    for (int i = 0; i < n; i++) strcpy(o->precisions[i], items[i]); /* checked above */
    o->n_precisions = n; /* at most 3: parse_list refuses an item given twice */
    o->precisions_given = 1;
    return SB_OK;
}

/* The methods: each --grad-compression item with plain steps, then plain
 * gradients with each --local-sgd H > 0 (train takes one of the two). */
static void plan_methods(struct sweep_opts *o)
{
    o->n_methods = 0;
    for (int i = 0; i < o->n_compressions; i++) {
        struct sweep_method *m = &o->methods[o->n_methods++];
        const char *c = o->compressions[i], *colon = strchr(c, ':');
        snprintf(m->compression, sizeof m->compression, "%.*s",
                 colon ? (int)(colon - c) : (int)strlen(c), c);
        snprintf(m->rank, sizeof m->rank, "%s", colon ? colon + 1 : "");
        snprintf(m->local, sizeof m->local, "0");
        /* "powersgd:2" -> "powersgd-r2" (a file name); the rank was checked */
        sb_method_name(m->compression, atoi(m->rank), 0, m->name, sizeof m->name);
    }
    for (int i = 0; i < o->n_local_sgd; i++) {
        if (o->local_sgd[i] == 0) continue;
        struct sweep_method *m = &o->methods[o->n_methods++];
        snprintf(m->compression, sizeof m->compression, "none");
        m->rank[0] = '\0';
        snprintf(m->local, sizeof m->local, "%d", o->local_sgd[i]);
        sb_method_name(m->compression, 0, o->local_sgd[i], m->name, sizeof m->name);
    }
}

/* The defaults the usage text shows: every registered strategy, replicas
 * 1,2,4, both scalings, plain gradients. */
static sb_status set_defaults(struct sweep_opts *o)
{
    memset(o, 0, sizeof *o);
    SB_TRY(parse_strategies(o, sb_strategy_names_joined(",")));
    o->n_replicas = 3;
    o->replicas[0] = 1, o->replicas[1] = 2, o->replicas[2] = 4;
    o->scaling[0] = o->scaling[1] = 1;
    o->repeats = 5, o->epochs = 1, o->batch = 64, o->global_batch = 256;
    SB_TRY(parse_compressions(o, "none"));
    o->n_local_sgd = 1; /* 0: off */
    snprintf(o->precisions[0], sizeof o->precisions[0], "fp32");
    o->n_precisions = 1;
    return SB_OK;
}

/* --scaling LIST: strong and/or weak. */
static sb_status parse_scaling(struct sweep_opts *o, const char *arg)
{
    char items[SB_SWEEP_MAX_LIST][32];
    int n;
    SB_TRY(parse_list("scaling", arg, items, &n));
    o->scaling[0] = o->scaling[1] = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(items[i], "strong") == 0) o->scaling[0] = 1;
        else if (strcmp(items[i], "weak") == 0) o->scaling[1] = 1;
        else return sb_error(SB_ERR_USAGE, "--scaling: '%s' is not strong or weak", items[i]);
    }
    return SB_OK;
}

/* One flag `c` of getopt_long's table with its argument. */
static sb_status parse_flag(struct sweep_opts *o, int c, const char *arg)
{
    long v = 0;
    switch (c) {
    case 's': o->strategies_given = 1; return parse_strategies(o, arg);
    case 'n':
        o->replicas_given = 1;
        return parse_int_list("replicas", arg, 1, 1024, o->replicas, &o->n_replicas);
    case 'P': return parse_precisions(o, arg);
    case 'L': return sb_sweep_layouts_parse(arg, o->layouts, SB_SWEEP_MAX_LIST, &o->n_layouts);
    case 'S': return parse_scaling(o, arg);
    case 'c': return parse_compressions(o, arg);
    case 'l': return parse_int_list("local-sgd", arg, 0, 1000000, o->local_sgd, &o->n_local_sgd);
    case 'G': SB_TRY(parse_int("global-batch", arg, 1, 60000, &v)); o->global_batch = (int)v; break;
    case 'b': SB_TRY(parse_int("batch", arg, 1, 60000, &v)); o->batch = (int)v; break;
    case 'r': SB_TRY(parse_int("repeats", arg, 1, SB_SWEEP_MAX_REPEATS, &v)); o->repeats = (int)v; break;
    case 'e': SB_TRY(parse_int("epochs", arg, 1, 1000, &v)); o->epochs = (int)v; break;
    case 'm': return parse_int("max-steps", arg, 1, 100000000, &o->max_steps);
    case 'd': o->data = arg; break;
    case 'o':
        if (!arg[0]) return sb_error(SB_ERR_USAGE, "--out: expected a directory, got ''");
        if (strlen(arg) >= sizeof o->out)
            return sb_error(SB_ERR_USAGE, "--out: the path is %zu bytes long, more than the "
                            "%zu this build takes (pick a shorter directory)",
                            strlen(arg), sizeof o->out - 1);
        snprintf(o->out, sizeof o->out, "%s", arg);
        o->out_given = 1;
        break;
    case 'R': o->resume = 1; break;
    case 'N': SB_TRY(parse_int("rerun-noisy", arg, 0, 100, &v)); o->rerun_noisy = (int)v; break;
    }
    return SB_OK;
}

/* Checks that need several flags, and names the default --out (UTC time). */
static sb_status check_opts(struct sweep_opts *o)
{
    SB_TRY(check_extra(o));
    if (o->precisions_given) {
        static const char *const prec[] = {"precision"};
        char found[64];
        find_flags(o->extra, o->n_extra, prec, 1, found, sizeof found);
        if (found[0])
            return sb_error(SB_ERR_USAGE, "sweep: --precision after -- with --precisions: "
                            "name every precision in --precisions");
    }
    if (o->resume && !o->out_given)
        return sb_error(SB_ERR_USAGE, "--resume: name the interrupted sweep's folder with --out DIR");
    if (o->n_layouts && (o->strategies_given || o->replicas_given))
        return sb_error(SB_ERR_USAGE, "--layouts: not with %s (each layout names its strategy "
                        "and ranks)", o->strategies_given ? "--strategies" : "--replicas");
    if (o->scaling[0])
        for (int i = 0; i < o->n_layouts; i++)
            if (o->global_batch % o->layouts[i].dp)
                return sb_error(SB_ERR_USAGE, "--global-batch: %d is not divisible by dp %d of "
                                "--layouts (strong scaling splits it evenly)", o->global_batch,
                                o->layouts[i].dp);
    if (o->scaling[0] && !o->n_layouts)
        for (int i = 0; i < o->n_replicas; i++)
            if (o->global_batch % o->replicas[i])
                return sb_error(SB_ERR_USAGE, "--global-batch: %d is not divisible by %d replicas "
                                "(strong scaling splits it evenly)", o->global_batch, o->replicas[i]);
    plan_methods(o);
    if (o->n_methods == 0)
        return sb_error(SB_ERR_USAGE, "--local-sgd 0 with no --grad-compression: no method to run");
    if (o->out[0]) return SB_OK;
    char t[32];
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || strftime(t, sizeof t, "%Y%m%dT%H%M%SZ", &tm) == 0)
        return sb_error(SB_ERR_IO, "--out: cannot name the default directory, the UTC "
                        "time cannot be read (pass --out DIR)");
    snprintf(o->out, sizeof o->out, "runs/sweep-%s", t);
    return SB_OK;
}

sb_status sb_sweep_opts_parse(struct sweep_opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"strategies", 1, NULL, 's'}, {"replicas", 1, NULL, 'n'}, {"scaling", 1, NULL, 'S'},
        {"global-batch", 1, NULL, 'G'}, {"batch", 1, NULL, 'b'}, {"repeats", 1, NULL, 'r'},
        {"epochs", 1, NULL, 'e'}, {"max-steps", 1, NULL, 'm'}, {"data", 1, NULL, 'd'},
        {"out", 1, NULL, 'o'}, {"resume", 0, NULL, 'R'}, {"help", 0, NULL, 'h'},
        {"grad-compression", 1, NULL, 'c'}, {"local-sgd", 1, NULL, 'l'},
        {"rerun-noisy", 1, NULL, 'N'}, {"layouts", 1, NULL, 'L'},
        {"precisions", 1, NULL, 'P'}, {NULL, 0, NULL, 0}};
    SB_TRY(set_defaults(o));
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "+h", longs, NULL)) != -1;) {
        if (c == 'h') {
            o->help = 1;
            return SB_OK;
        }
        if (!strchr("snScelGbrmdoRNLP", c) || c == 0)
            return sb_cli_bad_flag("sweep", argv[optind - 1], longs);
        SB_TRY(parse_flag(o, c, optarg));
    }
    o->extra = argv + optind;
    o->n_extra = argc - optind;
    if (o->n_extra > 0 && strcmp(argv[optind - 1], "--") != 0)
        return sb_error(SB_ERR_USAGE, "sweep: unexpected argument '%s' (put train flags after --)",
                        argv[optind]);
    return check_opts(o);
}
