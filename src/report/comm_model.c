/* comm.model of the report; see comm_model.h. */
#include "report/comm_model.h"

#include <math.h>

#include "report/json_util.h"

/* One array of a link's classes under key, each {from_bytes, alpha_s,
 * bandwidth_Bps}: n of them from the three arrays. */
static void add_classes(cJSON *c, const char *key, int n, const double *from,
                        const double *alpha, const double *bw, int *fail)
{
    cJSON *arr = cJSON_AddArrayToObject(c, key);
    if (!arr) {
        *fail = 1;
        return;
    }
    for (int k = 0; k < n && k < SB_LINK_MAX_SIZES; k++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            *fail = 1;
            return;
        }
        sb_json_add_num(o, "from_bytes", from[k], fail);
        sb_json_add_num(o, "alpha_s", alpha[k], fail);
        sb_json_add_num(o, "bandwidth_Bps", bw[k], fail);
    }
}

/* comm.model.links.*.sizes (1.14): the sized classes of a probed link
 * (job/probe.h), each {from_bytes, alpha_s, bandwidth_Bps}; the class holds
 * messages from from_bytes up to the next class's; (1.18) exchange_sizes:
 * its exchange classes, alike. Also the reduction's γ (the machine's, the
 * same for both classes). */
static void add_sized(cJSON *c, const struct sb_link *l, double gamma, int *fail)
{
    sb_json_add_num(c, "gamma_s_per_byte", gamma, fail);
    add_classes(c, "sizes", l->n_sizes, l->size_bytes, l->size_alpha_s, l->size_bandwidth_Bps,
                fail);
    add_classes(c, "exchange_sizes", l->n_exchange_sizes, l->exchange_bytes,
                l->exchange_alpha_s, l->exchange_bandwidth_Bps, fail);
}

/* comm.model.links (1.12): the two link classes the probe measured, each
 * {alpha_s, bandwidth_Bps, gamma_s_per_byte, sizes} or null
 * (docs/layouts.md). */
static void add_links(cJSON *model, const struct sb_link_probe *p, int *fail)
{
    cJSON *links = sb_json_add_obj(model, "links", fail), *c;
    if (!links) return;
    if (p->intra_done && (c = sb_json_add_obj(links, "intra", fail))) {
        sb_json_add_num(c, "alpha_s", p->intra_alpha_s, fail);
        sb_json_add_num(c, "bandwidth_Bps", p->intra_bandwidth_Bps, fail);
        add_sized(c, p->cross_host ? &p->intra_sized : &p->sized, p->gamma_s_per_byte, fail);
    } else if (!p->intra_done && !cJSON_AddNullToObject(links, "intra")) {
        *fail = 1;
    }
    if (p->cross_host && (c = sb_json_add_obj(links, "inter", fail))) {
        sb_json_add_num(c, "alpha_s", p->alpha_s, fail);
        sb_json_add_num(c, "bandwidth_Bps", p->bandwidth_Bps, fail);
        add_sized(c, &p->sized, p->gamma_s_per_byte, fail);
    } else if (!p->cross_host && !cJSON_AddNullToObject(links, "inter")) {
        *fail = 1;
    }
}

void sb_report_add_comm_model(cJSON *comm, const struct sb_run_record *rec, int *fail)
{
    const struct sb_config *c = rec->cfg;
    const struct sb_comm_model_row *m = &rec->comm_model;
    if (!rec->link.done || !rec->has_comm_model) {
        if (!cJSON_AddNullToObject(comm, "model")) *fail = 1;
        return;
    }
    cJSON *o = sb_json_add_obj(comm, "model", fail);
    if (!o) return;
    sb_json_add_num(o, "alpha_s", rec->link.alpha_s, fail);
    sb_json_add_num(o, "bandwidth_Bps", rec->link.bandwidth_Bps, fail);
    sb_json_add_num(o, "beta_s_per_byte", 1.0 / rec->link.bandwidth_Bps, fail);
    sb_json_add_num(o, "probe_peers", rec->link.peers, fail);
    if (!cJSON_AddBoolToObject(o, "probe_cross_host", rec->link.cross_host)) *fail = 1;
    sb_json_add_num(o, "probe_s", rec->link.seconds, fail);
    sb_json_add_num(o, "probe_sized_s", rec->link.sized_seconds, fail);
    sb_json_add_num(o, "gamma_s_per_byte", rec->link.gamma_s_per_byte, fail);
    add_links(o, &rec->link, fail);
    sb_json_add_str(o, "formula_name", m->formula_name, fail);
    sb_json_add_str(o, "formula", m->formula, fail);
    sb_json_add_num(o, "ranks", c->replicas, fail);
    sb_json_add_num(o, "servers", m->servers, fail);
    sb_json_add_num(o, "bytes",
                    m->wire_bytes > 0 ? m->wire_bytes : (double)rec->n_params * sizeof(float),
                    fail);
    double measured_ms = rec->phases_by_rank[SB_PHASE_COMM].ranks > 0
                             ? rec->phases_by_rank[SB_PHASE_COMM].min : NAN;
    sb_json_add_num(o, "predicted_comm_ms", 1e3 * m->comm_s, fail);
    sb_json_add_num(o, "measured_comm_ms", measured_ms, fail);
    sb_json_add_num(o, "predicted_over_measured",
                    measured_ms > 0 ? 1e3 * m->comm_s / measured_ms : NAN, fail);
    sb_json_add_num(o, "predicted_exposed_ms", 1e3 * m->exposed_s, fail);
    sb_json_add_num(o, "measured_exposed_ms",
                    !isnan(m->exposed_s) && rec->phases_by_rank[SB_PHASE_COMM_EXPOSED].ranks > 0
                        ? rec->phases_by_rank[SB_PHASE_COMM_EXPOSED].min : NAN, fail);
}
