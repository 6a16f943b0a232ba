/* The report's memory ledger; see memory_report.h. */
#include "report/memory_report.h"

#include <math.h>

#include "report/json_util.h"

/* How the formula counts (docs/zero.md). */
static const char ACCOUNTING[] =
    "model state per rank (Rajbhandari et al., SC 2020, sections 3.1 and 5): parameters bP, "
    "gradients bP, optimizer state 4sP, with b = 4 bytes a value under fp32 and 2 under "
    "bf16/fp16, s = 1 for SGD momentum, 2 for Adam, plus 1 for the fp32 master weights under "
    "bf16/fp16 (K = 4s: 12 for mixed-precision Adam), each divided by the number of ranks "
    "that share it where the strategy shards it (docs/zero.md, docs/precision.md); "
    "emulation_bytes: what storing 16-bit values in float buffers adds";

void sb_report_add_memory(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    cJSON *mem = sb_json_add_obj(root, "memory", fail);
    if (!mem) return;
    if (!cJSON_AddStringToObject(mem, "accounting", ACCOUNTING)) *fail = 1;
    cJSON *arr = sb_json_add_arr(mem, "by_rank", fail);
    for (int i = 0; arr && rec->memory && i < rec->n_memory; i++) {
        const struct sb_memory_entry *e = &rec->memory[i];
        cJSON *o = cJSON_CreateObject();
        double model = sb_model_state_bytes(&e->held);
        sb_json_add_num(o, "rank", e->rank, fail);
        if (!cJSON_AddStringToObject(o, "role", e->role)) *fail = 1;
        sb_json_add_num(o, "replica", e->replica < 0 ? NAN : e->replica, fail);
        sb_json_add_num(o, "parameter_bytes", e->held.param_bytes, fail);
        sb_json_add_num(o, "gradient_bytes", e->held.grad_bytes, fail);
        sb_json_add_num(o, "optimizer_state_bytes", e->held.optimizer_bytes, fail);
        sb_json_add_num(o, "comm_buffer_bytes", e->comm_bytes, fail);
        sb_json_add_num(o, "activation_bytes", e->activation_bytes, fail);
        sb_json_add_num(o, "model_state_bytes", model, fail);
        sb_json_add_num(o, "emulation_bytes", e->emulation_bytes, fail);
        sb_json_add_num(o, "total_bytes",
                        model + e->emulation_bytes + e->comm_bytes + e->activation_bytes, fail);
        sb_json_add_num(o, "formula_parameter_bytes", e->formula.param_bytes, fail);
        sb_json_add_num(o, "formula_gradient_bytes", e->formula.grad_bytes, fail);
        sb_json_add_num(o, "formula_optimizer_state_bytes", e->formula.optimizer_bytes, fail);
        sb_json_add_num(o, "formula_model_state_bytes", sb_model_state_bytes(&e->formula), fail);
        sb_json_add_num(o, "peak_rss_bytes", e->peak_rss_bytes < 0 ? NAN : e->peak_rss_bytes,
                        fail);
        sb_json_add_num(o, "peak_device_memory_bytes",
                        e->peak_device_bytes < 0 ? NAN : e->peak_device_bytes, fail);
        sb_json_append(arr, o, fail);
    }
}
