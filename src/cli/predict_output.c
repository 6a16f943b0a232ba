/* `stratbench predict`'s outputs: the table and the JSON document; see
 * predict_rows.h. */
#include "cli/predict_rows.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* Prints the prediction as a fixed-width table with a units row, `#` before
 * every non-data line (docs/cost-model.md). */
void sb_predict_print_table(const struct run *r, const struct opts *o, const struct row *rows,
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
cJSON *sb_predict_to_json(const struct run *r, const struct opts *o, const struct row *rows, int n)
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
