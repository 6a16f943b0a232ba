/* The flight-recorder JSON file; see flight_report.h. */
#include "report/flight_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/atomic_file.h"
#include "report/json_util.h"
#include "report/report.h"

void sb_flight_report_path(const char *report_path, char *out, size_t len)
{
    if (report_path && report_path[0]) {
        snprintf(out, len, "%s.flight.json", report_path);
        return;
    }
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, len, "stratbench-%s-%d.flight.json", stamp, (int)getpid());
}

static const char *reason_name(enum sb_fault_reason r)
{
    switch (r) {
    case SB_FAULT_TIMEOUT: return "timeout";
    case SB_FAULT_FAILURE: return "failure";
    case SB_FAULT_SIGNAL: return "signal";
    }
    return "failure";
}

/* One call, times in seconds since the rank's recorder started (t0) and
 * its age when the rank replied (now). */
static cJSON *call_json(const struct sb_flight_entry *e, double t0, double now, int *fail)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        *fail = 1;
        return NULL;
    }
    sb_json_add_num(o, "seq", (double)e->seq, fail);
    sb_json_add_num(o, "step", (double)e->step, fail);
    sb_json_add_str(o, "kind", sb_flight_kind_name(e->kind), fail);
    if ((e->kind == SB_FLIGHT_ALLREDUCE || e->kind == SB_FLIGHT_REDUCE_SCATTER ||
         e->kind == SB_FLIGHT_ALLGATHER) && e->index >= 0)
        sb_json_add_num(o, "bucket", e->index, fail);
    sb_json_add_num(o, "bytes", (double)e->bytes, fail);
    if (e->peer >= 0) sb_json_add_num(o, "peer", e->peer, fail);
    else if (!cJSON_AddNullToObject(o, "peer")) *fail = 1;
    if (e->kind == SB_FLIGHT_PUSH || e->kind == SB_FLIGHT_PULL || e->kind == SB_FLIGHT_SENDRECV ||
        e->kind == SB_FLIGHT_EXCHANGE)
        sb_json_add_str(o, "direction", e->receive ? "receive" : "send", fail);
    sb_json_add_str(o, "state", sb_flight_state_name(e->state), fail);
    sb_json_add_num(o, "start_s", e->start_s - t0, fail);
    if (e->end_s > 0) {
        sb_json_add_num(o, "end_s", e->end_s - t0, fail);
        sb_json_add_num(o, "duration_ms", 1e3 * (e->end_s - e->start_s), fail);
    } else {
        if (!cJSON_AddNullToObject(o, "end_s")) *fail = 1;
        sb_json_add_num(o, "duration_ms", 1e3 * (now - e->start_s), fail);
    }
    return o;
}

sb_status sb_flight_report_write(const char *path, const struct sb_fault *f,
                                 const char *message)
{
    int fail = 0;
    cJSON *root = cJSON_CreateObject();
    if (!root) return sb_error(SB_ERR_NOMEM, "flight recorder: out of memory");
    char utc[32];
    sb_utc_now(utc);
    sb_json_add_str(root, "schema_version", SB_FLIGHT_SCHEMA_VERSION, &fail);
    sb_json_add_str(root, "utc", utc, &fail);
    sb_json_add_str(root, "reason", reason_name(f->reason), &fail);
    sb_json_add_str(root, "message", message, &fail);
    sb_json_add_num(root, "timeout_s", f->timeout_s, &fail);
    sb_json_add_num(root, "world_size", f->world_size, &fail);
    sb_json_add_num(root, "reporting_rank", f->rank, &fail);
    sb_json_add_num(root, "capacity", SB_FLIGHT_CAPACITY, &fail);
    cJSON *ranks = sb_json_add_arr(root, "ranks", &fail);
    for (int r = 0; ranks && r < f->world_size; r++) {
        const struct sb_fault_rank *fr = &f->ranks[r];
        cJSON *o = cJSON_CreateObject();
        sb_json_append(ranks, o, &fail);
        if (!o) break;
        sb_json_add_num(o, "rank", r, &fail);
        sb_json_add_str(o, "host", fr->host, &fail);
        sb_json_add_num(o, "pid", fr->pid, &fail);
        if (!cJSON_AddBoolToObject(o, "responded", fr->responded)) fail = 1;
        cJSON *calls = sb_json_add_arr(o, "calls", &fail);
        for (int i = 0; calls && fr->responded && i < fr->n_calls && i < SB_FLIGHT_CAPACITY; i++)
            sb_json_append(calls, call_json(&fr->calls[i], fr->epoch_s, fr->now_s, &fail),
                           &fail);
    }
    char *text = fail ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return sb_error(SB_ERR_NOMEM, "flight recorder: out of memory");
    sb_status st = sb_write_text_atomic("flight recorder", path, text);
    cJSON_free(text);
    return st;
}
