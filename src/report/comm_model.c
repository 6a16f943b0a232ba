/* comm.model of the report; see comm_model.h. */
#include "report/comm_model.h"

#include <math.h>
#include <string.h>

#include "comm/allreduce_algo.h"
#include "comm/cost_model.h"
#include "core/stats.h"
#include "report/json_util.h"

/* Median of rank 0's measured `phase`, ms (0 without measured steps). */
static double phase_median_ms(const struct sb_run_record *rec, enum sb_phase phase)
{
    struct sb_summary s;
    if (!rec->phase_ms[phase] || rec->n_measured == 0 ||
        sb_summarize(rec->phase_ms[phase], rec->n_measured, &s) != SB_OK)
        return 0.0;
    return s.median;
}

/* A strategy's own flag as written to the report's config (details.config,
 * e.g. central's "servers", ddp's "overlap"), or `def`. */
static double config_value(const struct sb_run_record *rec, const char *key, double def)
{
    for (int i = 0; i < rec->details.n_config && i < SB_DETAILS_MAX; i++)
        if (strcmp(rec->details.config[i].key, key) == 0) return rec->details.config[i].value;
    return def;
}

/* ddp's bucket sizes from strategy_details (bucket_bytes, when all are
 * listed), else one bucket of the whole buffer. Returns the count. */
static int ddp_buckets(const struct sb_run_record *rec, double bytes, double *out, int cap)
{
    const struct sb_strategy_details *d = &rec->details;
    int listed = -1, count = -1;
    for (int i = 0; i < d->n && i < SB_DETAILS_MAX; i++) {
        if (strcmp(d->item[i].key, "bucket_count") == 0 && d->item[i].count > 0)
            count = (int)d->item[i].values[0];
        if (strcmp(d->item[i].key, "bucket_bytes") == 0) listed = i;
    }
    if (listed >= 0 && d->item[listed].count == count && count <= cap && count > 0) {
        for (int b = 0; b < count; b++) out[b] = d->item[listed].values[b];
        return count;
    }
    out[0] = bytes;
    return 1;
}

/* One all-reduce of `bytes` on p ranks by --allreduce `flag`: its time,
 * and its formula's name. */
static double allreduce_s(const struct sb_link *l, const char *flag, int p, double bytes,
                          const char **name)
{
    enum sb_allreduce_algo a = SB_ALLREDUCE_AUTO;
    if (flag[0]) sb_allreduce_algo_parse(flag, &a);
    if (a == SB_ALLREDUCE_AUTO) a = sb_allreduce_choose((size_t)bytes, p);
    if (a == SB_ALLREDUCE_LIBRARY) {
        *name = "binomial";
        return sb_cost_binomial_allreduce_s(l, p, bytes);
    }
    if (a == SB_ALLREDUCE_RECURSIVE_DOUBLING) {
        *name = "recursive-doubling";
        return sb_cost_recursive_doubling_s(l, p, bytes);
    }
    *name = "ring";
    return sb_cost_ring_allreduce_s(l, p, bytes);
}

static const char *formula_text(const char *name)
{
    if (strcmp(name, "ring") == 0) return "2(n-1)(alpha + M/(n B))";
    if (strcmp(name, "recursive-doubling") == 0)
        return "lg(n')(alpha + M/B), + 2(alpha + M/B) when n is not a power of two n'";
    if (strcmp(name, "binomial") == 0) return "2 ceil(lg n)(alpha + M/B)";
    if (strcmp(name, "central") == 0) return "2(alpha + max(M/B, n M/(k B)))";
    return "2(alpha + (n-1) M/B)"; /* central-servers0 */
}

void sb_report_add_comm_model(cJSON *comm, const struct sb_run_record *rec, int *fail)
{
    const struct sb_config *c = rec->cfg;
    int ddp = strcmp(c->strategy, "ddp") == 0, central = strcmp(c->strategy, "central") == 0;
    if (!rec->link.done || !(ddp || central)) {
        if (!cJSON_AddNullToObject(comm, "model")) *fail = 1;
        return;
    }
    struct sb_link l = {rec->link.alpha_s, rec->link.bandwidth_Bps, 0.0};
    int servers = (int)config_value(rec, "servers", 0.0);
    int overlap = config_value(rec, "overlap", 1.0) != 0.0;
    double M = (double)rec->n_params * sizeof(float);
    const char *name = "ring";
    double predicted_s = 0.0, exposed_s = NAN;
    if (ddp) {
        double bytes[SB_DETAIL_VALUES_MAX], times[SB_DETAIL_VALUES_MAX];
        int nb = ddp_buckets(rec, M, bytes, SB_DETAIL_VALUES_MAX), largest = 0;
        for (int b = 0; b < nb; b++) {
            const char *bn = NULL;
            times[b] = allreduce_s(&l, c->allreduce, c->replicas, bytes[b], &bn);
            predicted_s += times[b];
            if (bytes[b] > bytes[largest] || b == 0) largest = b;
            if (b == largest) name = bn;
        }
        double backward_s = overlap ? 1e-3 * phase_median_ms(rec, SB_PHASE_BACKWARD) : 0.0;
        exposed_s = sb_cost_ddp_exposed_s(bytes, times, nb, backward_s);
    } else {
        name = servers > 0 ? "central" : "central-servers0";
        predicted_s = sb_cost_central_s(&l, c->replicas, servers, M);
    }
    cJSON *o = sb_json_add_obj(comm, "model", fail);
    if (!o) return;
    sb_json_add_num(o, "alpha_s", l.alpha_s, fail);
    sb_json_add_num(o, "bandwidth_Bps", l.bandwidth_Bps, fail);
    sb_json_add_num(o, "beta_s_per_byte", 1.0 / l.bandwidth_Bps, fail);
    sb_json_add_num(o, "probe_peers", rec->link.peers, fail);
    if (!cJSON_AddBoolToObject(o, "probe_cross_host", rec->link.cross_host)) *fail = 1;
    sb_json_add_num(o, "probe_seconds", rec->link.seconds, fail);
    sb_json_add_str(o, "formula_name", name, fail);
    sb_json_add_str(o, "formula", formula_text(name), fail);
    sb_json_add_num(o, "ranks", c->replicas, fail);
    sb_json_add_num(o, "servers", servers, fail);
    sb_json_add_num(o, "bytes", M, fail);
    double measured_ms = rec->phases_by_rank[SB_PHASE_COMM].ranks > 0
                             ? rec->phases_by_rank[SB_PHASE_COMM].min : NAN;
    sb_json_add_num(o, "predicted_comm_ms", 1e3 * predicted_s, fail);
    sb_json_add_num(o, "measured_comm_ms", measured_ms, fail);
    sb_json_add_num(o, "predicted_over_measured",
                    measured_ms > 0 ? 1e3 * predicted_s / measured_ms : NAN, fail);
    sb_json_add_num(o, "predicted_exposed_ms", 1e3 * exposed_s, fail);
    sb_json_add_num(o, "measured_exposed_ms",
                    ddp && rec->phases_by_rank[SB_PHASE_COMM_EXPOSED].ranks > 0
                        ? rec->phases_by_rank[SB_PHASE_COMM_EXPOSED].min : NAN, fail);
}
