/* The sweep's layouts axis; see sweep_layouts.h. */
#include "cli/sweep_layouts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/json_util.h"

/* "dp4" -> 4 when field starts with prefix and a number 1..4096 follows. */
static int field_int(const char *field, const char *prefix, int *out)
{
    size_t len = strlen(prefix);
    if (strncmp(field, prefix, len) != 0 || field[len] < '0' || field[len] > '9') return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(field + len, &end, 10);
    if (errno || *end || v < 0 || v > 4096) return -1;
    *out = (int)v;
    return 1;
}

/* One layout's fields (text, a ','-separated list) into *l. */
static sb_status parse_one(char *text, struct sb_layout *l)
{
    *l = (struct sb_layout){1, 1, 1, 1, SB_PP_KIND_COUNT, 1, 0, SB_RANK_ORDER_TP_DP_PP};
    char *save = NULL;
    int fields = 0;
    for (char *f = strtok_r(text, ",", &save); f; f = strtok_r(NULL, ",", &save), fields++) {
        int *slots[] = {&l->dp, &l->tp, &l->pp, &l->microbatches, &l->chunks, &l->zero_stage};
        const char *prefixes[] = {"dp", "tp", "pp", "m", "v", "z"};
        int matched = 0;
        for (int i = 0; i < 6 && !matched; i++) {
            int r = field_int(f, prefixes[i], slots[i]);
            if (r < 0 || (r > 0 && i != 5 && *slots[i] < 1) || (r > 0 && i == 5 && *slots[i] > 3))
                return sb_error(SB_ERR_USAGE, "--layouts: '%s': %s", f,
                                i == 5 ? "zN takes a zero stage 0..3" : "expected a count 1..4096");
            matched = r > 0;
        }
        enum sb_rank_order order;
        if (matched) continue;
        if (sb_pp_kind_parse(f) != SB_PP_KIND_COUNT) l->schedule = sb_pp_kind_parse(f);
        else if (sb_rank_order_parse(f, &order) == SB_OK) l->order = order;
        else
            return sb_error(SB_ERR_USAGE, "--layouts: unknown field '%s' (expected dpN, tpN, ppN, "
                            "mN, vN, zN, a schedule gpipe|1f1b|interleaved|zb-h1 or a rank order "
                            "tp-dp-pp|tp-pp-dp)", f);
    }
    if (!fields) return sb_error(SB_ERR_USAGE, "--layouts: an empty layout");
    if (l->schedule == SB_PP_KIND_COUNT) l->schedule = l->pp > 1 ? SB_PP_1F1B : SB_PP_GPIPE;
    return SB_OK;
}

sb_status sb_sweep_layouts_parse(const char *list, struct sb_layout *out, int cap, int *n)
{
    char buf[1024];
    if (strlen(list) >= sizeof buf)
        return sb_error(SB_ERR_USAGE, "--layouts: the list is longer than %zu bytes",
                        sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        if (*n == cap) return sb_error(SB_ERR_USAGE, "--layouts: at most %d layouts", cap);
        SB_TRY(parse_one(t, &out[*n]));
        ++*n;
    }
    if (!*n) return sb_error(SB_ERR_USAGE, "--layouts: expected a list like \"dp4;dp4,z1;dp2,tp2\"");
    return SB_OK;
}

/* Appends "--flag" and its value to out. */
static void add(struct sweep_layout_flags *out, const char *flag, const char *value)
{
    if (out->n + 2 > SB_SWEEP_LAYOUT_FLAGS) return;
    snprintf(out->words[out->n++], sizeof out->words[0], "%s", flag);
    snprintf(out->words[out->n++], sizeof out->words[0], "%s", value);
}

static void add_int(struct sweep_layout_flags *out, const char *flag, int v)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", v);
    add(out, flag, buf);
}

void sb_sweep_layout_flags(const struct sb_layout *l, struct sweep_layout_flags *out)
{
    memset(out, 0, sizeof *out);
    add_int(out, "--replicas", l->dp);
    if (l->tp == 1 && l->pp == 1) {
        out->strategy = l->zero_stage > 0 ? "zero" : "ddp";
        if (l->zero_stage > 0) add_int(out, "--zero-stage", l->zero_stage);
        return;
    }
    out->strategy = l->pp > 1 ? "pipeline" : "tensor";
    if (l->tp > 1) add_int(out, "--tp", l->tp);
    if (l->pp > 1) {
        add_int(out, "--stages", l->pp);
        add_int(out, "--microbatches", l->microbatches);
        add(out, "--schedule", sb_pp_kind_name(l->schedule));
        if (l->schedule == SB_PP_INTERLEAVED) add_int(out, "--chunks", l->chunks);
        if (l->order != SB_RANK_ORDER_TP_DP_PP) add(out, "--rank-order", sb_rank_order_name(l->order));
    }
    if (l->zero_stage > 0) add_int(out, "--zero-stage", l->zero_stage);
}

void sb_sweep_layout_json(const struct sb_layout *l, cJSON *point, int *fail)
{
    if (!l) {
        sb_json_add_item(point, "layout", cJSON_CreateNull(), fail);
        return;
    }
    char name[96];
    sb_layout_name(l, name, sizeof name);
    cJSON *j = sb_json_add_obj(point, "layout", fail);
    sb_json_add_str(j, "name", name, fail);
    sb_json_add_num(j, "dp", l->dp, fail);
    sb_json_add_num(j, "tp", l->tp, fail);
    sb_json_add_num(j, "pp", l->pp, fail);
    sb_json_add_num(j, "microbatches", l->microbatches, fail);
    sb_json_add_item(j, "schedule", l->pp > 1 ? cJSON_CreateString(sb_pp_kind_name(l->schedule))
                                              : cJSON_CreateNull(), fail);
    sb_json_add_num(j, "chunks", l->chunks, fail);
    sb_json_add_num(j, "zero_stage", l->zero_stage, fail);
    sb_json_add_str(j, "rank_order", sb_rank_order_name(l->order), fail);
}
