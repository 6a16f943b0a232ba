/* A run report's noise; see compare_noise.h. */
#include "cli/compare_noise.h"

#include <math.h>
#include <string.h>

#include "harness/run_warnings.h"
#include "cli/compare_internal.h"
#include "cli/sweep.h"

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void sb_report_noise_read(const cJSON *rep, struct sb_report_noise *out)
{
    *out = (struct sb_report_noise){0};
    double stall = num(cJSON_GetObjectItemCaseSensitive(rep, "step_ms"), "stall_fraction");
    out->stall_fraction = isfinite(stall) ? stall : 0.0;
    double train_s = num(rep, "train_s");
    if (isnan(train_s)) train_s = num(rep, "train_seconds"); /* reports before 1.8 */
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(rep, "noise_by_rank")) {
        double cs = num(r, "involuntary_context_switches"), steal = num(r, "cpu_steal_fraction");
        if (isfinite(cs) && train_s > 0 && cs / train_s > out->nivcsw_per_s)
            out->nivcsw_per_s = cs / train_s;
        if (isfinite(steal) && steal > out->steal_fraction) out->steal_fraction = steal;
        double rq = num(r, "runqueue_wait_s");
        if (isfinite(rq) && train_s > 0 && rq / train_s > out->runqueue_fraction)
            out->runqueue_fraction = rq / train_s;
    }
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(rep, "warnings"))
        if (cJSON_IsString(w) && strncmp(w->valuestring, "noisy run", 9) == 0) out->noisy = 1;
    if (out->stall_fraction > SB_WARN_STALL_FRACTION || out->nivcsw_per_s > SB_WARN_NIVCSW_PER_S ||
        out->runqueue_fraction > SB_NOISE_RUNQUEUE_FRACTION)
        out->noisy = 1;
}

int sb_report_file_noisy(const char *path)
{
    cJSON *rep = NULL;
    if (sb_json_read_file(path, &rep) != SB_OK) return 0;
    struct sb_report_noise n;
    sb_report_noise_read(rep, &n);
    cJSON_Delete(rep);
    return n.noisy;
}

void sb_compare_side_noise(const struct entry *e, struct side_noise *out)
{
    *out = (struct side_noise){0};
    for (int i = 0; i < e->n; i++) {
        const struct sb_report_noise *x = &e->noise[i];
        out->noisy_repeats += x->noisy;
        if (x->stall_fraction > out->stall_fraction) out->stall_fraction = x->stall_fraction;
        if (x->nivcsw_per_s > out->nivcsw_per_s) out->nivcsw_per_s = x->nivcsw_per_s;
    }
}

void sb_compare_count(const struct result *r, int nr, int *quiet, int *noisy)
{
    *quiet = *noisy = 0;
    for (int i = 0; i < nr; i++)
        if (r[i].verdict == REGRESSION) {
            if (r[i].noisy) ++*noisy;
            else ++*quiet;
        }
}
