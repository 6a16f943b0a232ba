/* The report's layout and layer table; see layout_report.h. */
#include "report/layout_report.h"

#include "report/json_util.h"

void sb_report_add_layout(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    struct sb_report_layout dflt = {rec->cfg ? rec->cfg->replicas : 1, 1, 1, 1, 1, 0, NULL,
                                     "tp-dp-pp"};
    const struct sb_report_layout *l = rec->layout.dp > 0 ? &rec->layout : &dflt;
    cJSON *o = sb_json_add_obj(root, "layout", fail);
    if (!o) return;
    sb_json_add_num(o, "dp", l->dp, fail);
    sb_json_add_num(o, "tp", l->tp, fail);
    sb_json_add_num(o, "pp", l->pp, fail);
    sb_json_add_num(o, "microbatches", l->microbatches, fail);
    sb_json_add_str_or_null(o, "schedule", l->schedule, fail);
    sb_json_add_num(o, "chunks", l->chunks, fail);
    sb_json_add_num(o, "zero_stage", l->zero_stage, fail);
    sb_json_add_str(o, "rank_order", l->rank_order ? l->rank_order : "tp-dp-pp", fail);
}

void sb_report_add_layers(cJSON *model, const struct sb_run_record *rec, int *fail)
{
    if (rec->n_layers < 1 || !rec->layers) {
        if (!cJSON_AddNullToObject(model, "layers")) *fail = 1;
        return;
    }
    cJSON *arr = sb_json_add_arr(model, "layers", fail);
    for (int i = 0; arr && i < rec->n_layers; i++) {
        const struct sb_layer_summary *y = &rec->layers[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            *fail = 1;
            return;
        }
        sb_json_add_str(e, "name", y->name, fail);
        sb_json_add_num(e, "params", y->params, fail);
        sb_json_add_num(e, "split_params", y->split_params, fail);
        sb_json_add_num(e, "in_floats", y->in_floats, fail);
        sb_json_add_num(e, "out_floats", y->out_floats, fail);
        sb_json_add_num(e, "tp_column", y->tp_column, fail);
        sb_json_add_num(e, "tp_row", y->tp_row, fail);
        sb_json_add_num(e, "split_width", y->split_width, fail);
        sb_json_add_num(e, "flops", y->flops, fail);
    }
}
