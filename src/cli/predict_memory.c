/* `stratbench predict --params N`: the model state per rank of ddp and
 * ZeRO stages 1-3 for a model of N parameters, from the strategies' own
 * ledger formulas (model_state_formula) alone; see predict_rows.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/predict_rows.h"
#include "cli/sweep.h"
#include "strategies/strategy.h"

/* The rows: ddp, then zero with --zero-stage 1, 2, 3. */
struct variant {
    const char *strategy;
    const char *stage; /* zero's --zero-stage; NULL: none */
    const char *label;
};
static const struct variant variants[] = {
    {"ddp", NULL, "ddp"},
    {"zero", "1", "zero-1"},
    {"zero", "2", "zero-2"},
    {"zero", "3", "zero-3"},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* *out = the model state of one rank of variant v at `replicas` for o's
 * Ψ, precision and optimizer. Errors: SB_ERR_INTERNAL when the strategy
 * or its stage flag is not registered. */
static sb_status variant_state(const struct opts *o, const struct variant *v, int replicas,
                               struct sb_model_state *out)
{
    const struct sb_strategy_ops *ops = sb_strategy_find(v->strategy);
    if (!ops) return sb_error(SB_ERR_INTERNAL, "predict: no strategy '%s'", v->strategy);
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.replicas = replicas;
    cfg.optimizer = o->optimizer;
    cfg.precision = o->precision;
    sb_strategy_options_defaults(ops, &cfg);
    if (v->stage) SB_TRY(sb_strategy_option_parse(ops, &cfg, "zero-stage", v->stage));
    sb_strategy_model_state_formula(ops, &cfg, o->n_params, 0, out);
    return SB_OK;
}

/* K of the ZeRO paper: optimizer-state bytes per parameter. */
static double paper_k(const struct opts *o)
{
    struct sb_model_state m;
    if (variant_state(o, &variants[0], 1, &m)) return 0.0;
    return m.optimizer_bytes / o->n_params;
}

static cJSON *to_json(const struct opts *o)
{
    cJSON *doc = cJSON_CreateObject(), *rows = doc ? cJSON_AddArrayToObject(doc, "rows") : NULL;
    if (!rows || !cJSON_AddNumberToObject(doc, "params", o->n_params) ||
        !cJSON_AddStringToObject(doc, "precision", sb_precision_name(o->precision)) ||
        !cJSON_AddStringToObject(doc, "optimizer", sb_optimizer_name(o->optimizer)) ||
        !cJSON_AddNumberToObject(doc, "k", paper_k(o))) {
        cJSON_Delete(doc);
        return NULL;
    }
    for (int c = 0; c < o->n_counts; c++)
        for (int i = 0; i < N_VARIANTS; i++) {
            struct sb_model_state m;
            cJSON *e = cJSON_CreateObject();
            if (!e || variant_state(o, &variants[i], o->counts[c], &m) ||
                !cJSON_AddNumberToObject(e, "replicas", o->counts[c]) ||
                !cJSON_AddStringToObject(e, "strategy", variants[i].label) ||
                !cJSON_AddNumberToObject(e, "parameter_bytes", m.param_bytes) ||
                !cJSON_AddNumberToObject(e, "gradient_bytes", m.grad_bytes) ||
                !cJSON_AddNumberToObject(e, "optimizer_state_bytes", m.optimizer_bytes) ||
                !cJSON_AddNumberToObject(e, "model_state_bytes", sb_model_state_bytes(&m)) ||
                !cJSON_AddItemToArray(rows, e)) {
                cJSON_Delete(e);
                cJSON_Delete(doc);
                return NULL;
            }
        }
    return doc;
}

static void print_table(const struct opts *o)
{
    printf("# model state per rank, the ZeRO paper's accounting (Rajbhandari et al., SC 2020,\n"
           "# section 3.1): %.4g parameters, %s values (%g bytes each), %s: K = %g bytes of\n"
           "# optimizer state a parameter; GB = 1e9 bytes\n",
           o->n_params, sb_precision_name(o->precision),
           o->precision == SB_PRECISION_FP32 ? 4.0 : 2.0, sb_optimizer_name(o->optimizer),
           paper_k(o));
    printf("%8s  %-8s %12s %12s %12s %12s\n", "replicas", "strategy", "params_GB", "grads_GB",
           "optimizer_GB", "total_GB");
    for (int c = 0; c < o->n_counts; c++)
        for (int i = 0; i < N_VARIANTS; i++) {
            struct sb_model_state m;
            if (variant_state(o, &variants[i], o->counts[c], &m)) continue;
            printf("%8d  %-8s %12.4g %12.4g %12.4g %12.4g\n", o->counts[c], variants[i].label,
                   1e-9 * m.param_bytes, 1e-9 * m.grad_bytes, 1e-9 * m.optimizer_bytes,
                   1e-9 * sb_model_state_bytes(&m));
        }
}

sb_status sb_predict_parse_params(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < 1 || v > 1e15)
        return sb_error(SB_ERR_USAGE, "predict: --params: expected a parameter count in "
                        "1..1e15 like 7.5e9, got '%s'", text);
    *out = v;
    return SB_OK;
}

int sb_predict_memory(const struct opts *o)
{
    cJSON *doc = to_json(o);
    if (!doc) {
        fprintf(stderr, "stratbench: predict: out of memory\n");
        return 1;
    }
    sb_status st = o->out ? sb_json_write_file_atomic(o->out, doc) : SB_OK;
    if (!st && o->json) {
        char *text = cJSON_Print(doc);
        if (text) printf("%s\n", text);
        cJSON_free(text);
    } else if (!st) {
        print_table(o);
    }
    cJSON_Delete(doc);
    if (st) {
        fprintf(stderr, "stratbench: %s\n", sb_error_message());
        return sb_status_exit_code(st);
    }
    return 0;
}
