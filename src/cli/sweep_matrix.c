/* doc.matrix of scaling.json (the flags a sweep ran with) and --resume's
 * check that the interrupted sweep's scaling.json was made with the same
 * matrix. */
#include "cli/sweep_plan.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/sweep.h"
#include "report/json_util.h"

/* doc.matrix: the flags the sweep ran with. */
void sb_sweep_add_matrix(cJSON *doc, const struct sweep_opts *o, int *fail)
{
    cJSON *m = sb_json_add_obj(doc, "matrix", fail), *a = sb_json_add_arr(m, "strategies", fail);
    for (int i = 0; i < o->n_strategies; i++)
        sb_json_append(a, cJSON_CreateString(o->strategies[i]), fail);
    sb_json_add_item(m, "replicas", cJSON_CreateIntArray(o->replicas, o->n_replicas), fail);
    a = sb_json_add_arr(m, "precisions", fail);
    for (int i = 0; i < o->n_precisions; i++)
        sb_json_append(a, cJSON_CreateString(o->precisions[i]), fail);
    a = sb_json_add_arr(m, "scaling", fail);
    for (int s = 0; s < 2; s++)
        if (o->scaling[s]) sb_json_append(a, cJSON_CreateString(sb_sweep_scaling_name[s]), fail);
    sb_json_add_num(m, "repeats", o->repeats, fail);
    sb_json_add_num(m, "epochs", o->epochs, fail);
    sb_json_add_num(m, "batch", o->batch, fail);
    sb_json_add_num(m, "global_batch", o->global_batch, fail);
    sb_json_add_item(m, "max_steps", o->max_steps ? cJSON_CreateNumber((double)o->max_steps)
                                                  : cJSON_CreateNull(), fail);
    a = sb_json_add_arr(m, "grad_compression", fail);
    for (int i = 0; i < o->n_compressions; i++)
        sb_json_append(a, cJSON_CreateString(o->compressions[i]), fail);
    sb_json_add_item(m, "local_sgd", cJSON_CreateIntArray(o->local_sgd, o->n_local_sgd), fail);
    a = sb_json_add_arr(m, "layouts", fail);
    for (int i = 0; i < o->n_layouts; i++) {
        char name[96];
        sb_layout_name(&o->layouts[i], name, sizeof name);
        sb_json_append(a, cJSON_CreateString(name), fail);
    }
    a = sb_json_add_arr(m, "extra_args", fail);
    for (int i = 0; i < o->n_extra; i++)
        sb_json_append(a, cJSON_CreateString(o->extra[i]), fail);
}

/* --resume: reads `path` (the interrupted sweep's scaling.json) into
 * o->resume_doc and checks that it was made with the same matrix (the
 * flags, as doc.matrix records them). *complete: 1 when it is not partial
 * (nothing to resume). Errors: SB_ERR_USAGE naming the file and the first
 * field that differs, or what is wrong with the file. */
sb_status sb_sweep_load_resume(struct sweep_opts *o, const char *path, int *complete)
{
    struct stat sbuf;
    if (stat(path, &sbuf) != 0)
        return sb_error(SB_ERR_USAGE, "--resume: %s does not exist: nothing to resume (run the "
                        "sweep without --resume)", path);
    sb_status st = sb_json_read_file(path, &o->resume_doc);
    if (st) { /* the message is copied first: sb_error writes where it lives */
        char why[512];
        snprintf(why, sizeof why, "%s", sb_error_message());
        return sb_error(SB_ERR_USAGE, "--resume: %s", why);
    }
    *complete = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o->resume_doc, "partial"));
    int fail = 0;
    cJSON *now = cJSON_CreateObject();
    sb_sweep_add_matrix(now, o, &fail);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(now, "matrix"), *k;
    const cJSON *had = cJSON_GetObjectItemCaseSensitive(o->resume_doc, "matrix");
    st = fail ? sb_error(SB_ERR_NOMEM, "--resume: out of memory") : SB_OK;
    cJSON_ArrayForEach(k, want) {
        if (st) break;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(had, k->string);
        char *a = cJSON_PrintUnformatted(k), *b = h ? cJSON_PrintUnformatted(h) : NULL;
        if (!a || !b || strcmp(a, b) != 0)
            st = sb_error(SB_ERR_USAGE, "--resume: %s was made with %s %s, not %s: give the "
                          "interrupted sweep's flags", path, k->string, b ? b : "absent",
                          a ? a : "?");
        cJSON_free(a);
        cJSON_free(b);
    }
    cJSON_Delete(now);
    return st;
}
