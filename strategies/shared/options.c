/* The strategies' own flags, their checks and their report values; see
 * strategy.h. Generic over the registry: nothing here names a strategy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/mnist.h"
#include "strategies/strategy.h"

static void *field(struct sb_config *cfg, const struct sb_strategy_option *o)
{
    return cfg->strategy_opts + o->offset;
}

double sb_strategy_option_get(const struct sb_config *cfg, const struct sb_strategy_option *o)
{
    const unsigned char *p = cfg->strategy_opts + o->offset;
    if (o->kind == SB_OPTION_NUMBER) return *(const double *)(const void *)p;
    return *(const int *)(const void *)p;
}

static void option_set(struct sb_config *cfg, const struct sb_strategy_option *o, double v)
{
    if (o->kind == SB_OPTION_NUMBER) *(double *)field(cfg, o) = v;
    else *(int *)field(cfg, o) = (int)v;
}

void sb_strategy_options_defaults(const struct sb_strategy_ops *ops, struct sb_config *cfg)
{
    memset(cfg->strategy_opts, 0, sizeof cfg->strategy_opts);
    for (const struct sb_strategy_option *o = ops->options; o && o->flag; o++)
        option_set(cfg, o, o->def);
}

static const struct sb_strategy_option *find_option(const struct sb_strategy_ops *ops,
                                                    const char *flag)
{
    for (const struct sb_strategy_option *o = ops->options; o && o->flag; o++)
        if (strcmp(o->flag, flag) == 0) return o;
    return NULL;
}

/* "a, b" of the strategies that take --flag; returns how many do. */
static int takers(const char *flag, char *out, size_t len)
{
    size_t n = 0;
    int count = 0;
    out[0] = '\0';
    for (int i = 0; i < sb_strategy_count() && n < len; i++)
        if (find_option(sb_strategy_at(i), flag)) {
            n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "",
                                  sb_strategy_at(i)->name);
            count++;
        }
    return count;
}

sb_status sb_strategy_option_parse(const struct sb_strategy_ops *ops, struct sb_config *cfg,
                                   const char *flag, const char *arg)
{
    const struct sb_strategy_option *o = find_option(ops, flag);
    if (!o) {
        char who[256];
        int n = takers(flag, who, sizeof who);
        return sb_error(SB_ERR_USAGE, "--%s: only strateg%s %s take%s this flag, not %s", flag,
                        n == 1 ? "y" : "ies", who, n == 1 ? "s" : "", ops->name);
    }
    if (o->kind == SB_OPTION_SWITCH) {
        option_set(cfg, o, o->set);
        return SB_OK;
    }
    if (o->kind == SB_OPTION_CHOICE) {
        char names[256];
        size_t len = 0;
        names[0] = '\0';
        for (int i = 0; o->choices[i]; i++) {
            if (arg && strcmp(arg, o->choices[i]) == 0) {
                option_set(cfg, o, i);
                return SB_OK;
            }
            len += (size_t)snprintf(names + len, len < sizeof names ? sizeof names - len : 0,
                                    "%s%s", i ? " | " : "", o->choices[i]);
        }
        return sb_error(SB_ERR_USAGE, "--%s: expected %s, got '%s'", flag, names,
                        arg ? arg : "");
    }
    char *end = NULL;
    double v = arg ? strtod(arg, &end) : NAN;
    int integral = o->kind != SB_OPTION_INT || (v == floor(v));
    if (!arg || end == arg || *end != '\0' || !isfinite(v) || v < o->lo || v > o->hi ||
        !integral) {
        if (o->kind == SB_OPTION_INT)
            return sb_error(SB_ERR_USAGE, "--%s: expected an integer in %g..%g, got '%s'",
                            flag, o->lo, o->hi, arg ? arg : "");
        return sb_error(SB_ERR_USAGE, "--%s: expected a number in [%g, %g], got '%s'", flag,
                        o->lo, o->hi, arg ? arg : "");
    }
    option_set(cfg, o, v);
    return SB_OK;
}

int sb_strategy_option_foreign(const struct sb_strategy_ops *ops, const char *arg,
                               int *value_follows)
{
    *value_follows = 0;
    if (strncmp(arg, "--", 2) != 0) return 0;
    char flag[64];
    size_t len = strcspn(arg + 2, "=");
    if (len == 0 || len >= sizeof flag) return 0;
    memcpy(flag, arg + 2, len);
    flag[len] = '\0';
    if (find_option(ops, flag)) return 0;
    for (int i = 0; i < sb_strategy_count(); i++) {
        const struct sb_strategy_option *o = find_option(sb_strategy_at(i), flag);
        if (o) {
            *value_follows = o->kind != SB_OPTION_SWITCH && !arg[2 + len];
            return 1;
        }
    }
    return 0;
}

sb_status sb_strategy_check(const struct sb_strategy_ops *ops, const struct sb_config *cfg)
{
    if (ops->max_replicas > 0 && cfg->replicas > ops->max_replicas)
        return sb_error(SB_ERR_USAGE, "--replicas: strategy %s has at most %d replica%s, got %d",
                        ops->name, ops->max_replicas, ops->max_replicas == 1 ? "" : "s",
                        cfg->replicas);
    long global = (long)cfg->replicas * cfg->batch;
    if (global > SB_MNIST_TRAIN_IMAGES)
        return sb_error(SB_ERR_USAGE, "--batch: global batch %d x %d = %ld exceeds the %d "
                        "training images", cfg->replicas, cfg->batch, global,
                        SB_MNIST_TRAIN_IMAGES);
    return ops->validate ? ops->validate(cfg) : SB_OK;
}

sb_status sb_strategy_fit_world(const struct sb_strategy_ops *ops, struct sb_config *cfg,
                                int world_size, int replicas_given)
{
    if (!replicas_given) cfg->replicas = sb_strategy_replicas_of_world(ops, cfg, world_size);
    int need = sb_strategy_world_size(ops, cfg);
    if (cfg->replicas < 1 || need != world_size)
        return sb_error(SB_ERR_USAGE, "--replicas: strategy %s with %d replica%s needs %d "
                        "processes, but the MPI world has %d",
                        ops->name, cfg->replicas, cfg->replicas == 1 ? "" : "s", need,
                        world_size);
    return sb_strategy_check(ops, cfg);
}

void sb_strategy_report_values(const struct sb_strategy_ops *ops, const struct sb_config *cfg,
                               struct sb_strategy_details *d)
{
    for (const struct sb_strategy_option *o = ops->options; o && o->flag; o++)
        if (o->report_key)
            sb_details_set_value(d, 0, o->report_key, sb_strategy_option_get(cfg, o),
                                 o->report_bool);
    for (int i = 0; i < sb_strategy_count(); i++) {
        const struct sb_strategy_ops *other = sb_strategy_at(i);
        for (const struct sb_strategy_option *o = other->options; o && o->flag; o++)
            if (o->report_key) sb_details_set_value(d, 0, o->report_key, o->def, o->report_bool);
        for (const char *const *k = other->comm_keys; k && *k; k++)
            sb_details_set_value(d, 1, *k, NAN, 0);
    }
}

void sb_strategy_options_usage(FILE *out)
{
    for (int i = 0; i < sb_strategy_count(); i++)
        for (const struct sb_strategy_option *o = sb_strategy_at(i)->options; o && o->flag;
             o++) {
            int seen = 0; /* listed already by an earlier strategy */
            for (int j = 0; j < i && !seen; j++)
                seen = find_option(sb_strategy_at(j), o->flag) != NULL;
            if (seen) continue;
            char who[256], head[64], def[32] = "";
            takers(o->flag, who, sizeof who);
            snprintf(head, sizeof head, "--%s%s%s", o->flag, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
            if (o->kind == SB_OPTION_CHOICE)
                snprintf(def, sizeof def, "%s", o->choices[(int)o->def]);
            else if (o->kind != SB_OPTION_SWITCH)
                snprintf(def, sizeof def, "%g", o->def);
            fprintf(out, "  %-22s %-10s %s: %s\n", head, def, who, o->help);
        }
}
