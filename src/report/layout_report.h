/* The report's `layout` (the run's dp x tp x pp layout, as `stratbench
 * predict --layouts` names layouts: docs/layouts.md) and model.layers (the
 * whole model's layer table, the layout model's input). */
#ifndef SB_LAYOUT_REPORT_H
#define SB_LAYOUT_REPORT_H

#include <cjson/cJSON.h>

#include "report/report.h"

/* Adds "layout" to root: {dp, tp, pp, microbatches, schedule, chunks,
 * zero_stage, rank_order} from rec->layout (reports/README.md); a record
 * whose layout is not filled (dp 0) is data-parallel: dp = cfg->replicas,
 * tp = pp = 1, stage 0. Sets *fail
 * when cJSON cannot allocate. */
void sb_report_add_layout(cJSON *root, const struct sb_run_record *rec, int *fail);

/* Adds "layers" to the model object: one entry per layer of rec->layers
 * ({name, params, split_params, in_floats, out_floats, tp_column, tp_row,
 * split_width, flops}), null when rec->n_layers is 0 (a rank holding a
 * part). Sets *fail when cJSON cannot allocate. */
void sb_report_add_layers(cJSON *model, const struct sb_run_record *rec, int *fail);

#endif
