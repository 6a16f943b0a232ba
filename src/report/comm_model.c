/* comm.model of the report; see comm_model.h. */
#include "report/comm_model.h"

#include <math.h>

#include "report/json_util.h"

/* comm.model.links (1.12): the two link classes the probe measured, each
 * {alpha_s, bandwidth_Bps} or null (docs/layouts.md). */
static void add_links(cJSON *model, const struct sb_link_probe *p, int *fail)
{
    cJSON *links = sb_json_add_obj(model, "links", fail), *c;
    if (!links) return;
    if (p->intra_done && (c = sb_json_add_obj(links, "intra", fail))) {
        sb_json_add_num(c, "alpha_s", p->intra_alpha_s, fail);
        sb_json_add_num(c, "bandwidth_Bps", p->intra_bandwidth_Bps, fail);
    } else if (!p->intra_done && !cJSON_AddNullToObject(links, "intra")) {
        *fail = 1;
    }
    if (p->cross_host && (c = sb_json_add_obj(links, "inter", fail))) {
        sb_json_add_num(c, "alpha_s", p->alpha_s, fail);
        sb_json_add_num(c, "bandwidth_Bps", p->bandwidth_Bps, fail);
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
    add_links(o, &rec->link, fail);
    sb_json_add_str(o, "formula_name", m->formula_name, fail);
    sb_json_add_str(o, "formula", m->formula, fail);
    sb_json_add_num(o, "ranks", c->replicas, fail);
    sb_json_add_num(o, "servers", m->servers, fail);
    sb_json_add_num(o, "bytes", (double)rec->n_params * sizeof(float), fail);
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
