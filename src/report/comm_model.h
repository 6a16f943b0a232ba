/* The report's comm.model: the α–β prediction of the run's communication
 * time per step (src/comm/cost_model.h) from the probed link, beside the
 * measured time. */
#ifndef SB_COMM_MODEL_REPORT_H
#define SB_COMM_MODEL_REPORT_H

#include <cjson/cJSON.h>

#include "report/report.h"

/* Adds "model" to the comm object: null when the links were not probed
 * (one process, --no-probe-links); else {alpha_s, bandwidth_Bps,
 * beta_s_per_byte, probe_peers, probe_cross_host, probe_s,
 * formula_name, formula, ranks, servers, bytes, predicted_comm_ms,
 * measured_comm_ms, predicted_over_measured, predicted_exposed_ms,
 * measured_exposed_ms} (reports/README.md); null also when the strategy
 * has no model (rec->has_comm_model = 0). The prediction is the
 * strategy's own (its comm_model op, run by the harness into
 * rec->comm_model); this writes it beside the measured times: the
 * smallest per-rank median of the comm phase (the rank that waits least
 * for others), and of comm_exposed where the prediction has an exposed
 * time. Sets *fail when cJSON cannot allocate. */
void sb_report_add_comm_model(cJSON *comm, const struct sb_run_record *rec, int *fail);

#endif
