/* The statistics half of `stratbench sweep`: per-point medians, bootstrap
 * intervals, speedup and efficiency, and the JSON file helpers; see
 * sweep_stats.h and docs/sweep-compare.md. */
#include "cli/sweep_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/stats_tests.h"
#include "cli/sweep.h"
#include "core/atomic_file.h"
#include "report/json_util.h"

#define BOOT_RESAMPLES 2000
#define BOOT_SEED 20261121u

const char *const sb_sweep_phases[SB_SWEEP_N_PHASES] = {
    "data", "forward", "backward", "comm", "comm_exposed", "optimizer", "wait"};

const char *const sb_sweep_scaling_name[2] = {"strong", "weak"};

sb_status sb_json_read_file(const char *path, cJSON **out)
{
    *out = NULL;
    /* Non-blocking open, then fstat: a FIFO with no writer is refused at once
     * instead of hanging, a device (/dev/zero) before any read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return sb_error(SB_ERR_INPUT, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int err = errno;
        int is_dir = err == 0 && S_ISDIR(st.st_mode);
        close(fd);
        if (err) return sb_error(SB_ERR_INPUT, "%s: %s", path, strerror(err));
        return sb_error(SB_ERR_INPUT, "%s: %s, not a regular file (JSON is read only from "
                        "regular files)", path, is_dir ? "a directory" : "a FIFO, device or socket");
    }
    if (st.st_size > SB_JSON_MAX_BYTES) {
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: %lld bytes, more than the %d MiB a report or "
                        "scaling.json may take", path, (long long)st.st_size,
                        SB_JSON_MAX_BYTES >> 20);
    }
    /* Read at most the limit + 1 byte: a file growing while read is still bounded. */
    size_t cap = (size_t)st.st_size + 2, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return sb_error(SB_ERR_NOMEM, "%s: out of memory", path);
    }
    int err = 0;
    for (;;) {
        if (len + 1 == cap) {
            size_t bigger_cap = cap * 2 > (size_t)SB_JSON_MAX_BYTES + 2 ? (size_t)SB_JSON_MAX_BYTES + 2
                                                                      : cap * 2;
            if (bigger_cap <= cap) break; /* at the limit: the size check below fails */
            char *bigger = realloc(buf, bigger_cap);
            if (!bigger) {
                free(buf);
                close(fd);
                return sb_error(SB_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = bigger, cap = bigger_cap;
        }
        ssize_t got = read(fd, buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) err = errno;
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fd); /* read-only: nothing to lose on close */
    if (err) {
        free(buf);
        return sb_error(SB_ERR_INPUT, "%s: read error: %s", path, strerror(err));
    }
    if (len > SB_JSON_MAX_BYTES) {
        free(buf);
        return sb_error(SB_ERR_INPUT, "%s: more than the %d MiB a report or scaling.json may "
                        "take", path, SB_JSON_MAX_BYTES >> 20);
    }
    buf[len] = 0;
    /* One JSON value and nothing after it but white space: trailing text (a
     * second document, a truncated append) or a NUL byte is not a report. */
    *out = memchr(buf, 0, len) ? NULL : cJSON_ParseWithLengthOpts(buf, len + 1, NULL, 1);
    free(buf);
    if (!*out) return sb_error(SB_ERR_INPUT, "%s: not valid JSON", path);
    return SB_OK;
}

sb_status sb_json_write_file_atomic(const char *path, const cJSON *doc)
{
    char *text = cJSON_Print(doc);
    if (!text) return sb_error(SB_ERR_NOMEM, "%s: out of memory", path);
    sb_status st = sb_write_text_atomic("scaling", path, text);
    cJSON_free(text);
    return st;
}

/* obj.a (.b when b is not NULL) as a number, or NaN. */
static double num_at(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void sb_sweep_values_from(const cJSON *rep, struct sb_sweep_values *rv)
{
    rv->step_ms = num_at(rep, "step_ms", "median");
    rv->step_p95_ms = num_at(rep, "step_ms", "p95");
    double train_s = num_at(rep, "train_s", NULL);
    if (isnan(train_s)) train_s = num_at(rep, "train_seconds", NULL); /* reports before 1.8 */
    double steps = num_at(rep, "steps_total", NULL);
    rv->samples_per_s = num_at(rep, "samples_per_s", NULL);
    if (isnan(rv->samples_per_s)) /* reports before 1.5 */
        rv->samples_per_s = train_s > 0 ? steps * num_at(rep, "config", "global_batch") / train_s
                                        : NAN;
    rv->wall_step_ms = steps > 0 ? 1000.0 * train_s / steps : NAN;
    int n_epochs = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rep, "epochs"));
    rv->epoch_s = n_epochs > 0 ? train_s / n_epochs : NAN;
    rv->tta_s = num_at(rep, "time_to_accuracy_s", NULL);
    rv->accuracy = num_at(rep, "final_test_accuracy", NULL);
    const cJSON *by_rank = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(rep, "memory"), "by_rank"), *e;
    rv->memory_per_rank_bytes = NAN;
    cJSON_ArrayForEach(e, by_rank) {
        double t = num_at(e, "total_bytes", NULL);
        if (isfinite(t) && !(t <= rv->memory_per_rank_bytes)) rv->memory_per_rank_bytes = t;
    }
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(rep, "phases_ms");
    for (size_t i = 0; i < SB_SWEEP_N_PHASES; i++)
        rv->phase_ms[i] =
            num_at(cJSON_GetObjectItemCaseSensitive(ph, sb_sweep_phases[i]), "mean", NULL);
}

/* obj.key = {median, ci95_low, ci95_high} of x[0..n) over repeats. */
static void add_median_ci(cJSON *obj, const char *key, const double *x, int n, int *fail)
{
    double med, lo, hi;
    if (sb_median(x, (size_t)n, &med) || sb_bootstrap_median_ci(x, (size_t)n, 0.95,
                                                                 BOOT_RESAMPLES, BOOT_SEED, &lo, &hi))
        med = lo = hi = NAN;
    cJSON *o = sb_json_add_obj(obj, key, fail);
    sb_json_add_num(o, "median", med, fail);
    sb_json_add_num(o, "ci95_low", lo, fail);
    sb_json_add_num(o, "ci95_high", hi, fail);
}

/* dst.workload, .device, .hidden = rep.config's (null where missing). */
static void copy_config(cJSON *dst, const cJSON *rep, int *fail)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(rep, "config");
    const char *keys[] = {"workload", "device", "hidden"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);
        sb_json_add_item(dst, keys[i], v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull(), fail);
    }
}

sb_status sb_sweep_point_summarize(struct sb_sweep_point *pt, cJSON *runs,
                                   const cJSON *first_report)
{
    int fail = 0;
    cJSON *p = pt->json = cJSON_CreateObject();
    sb_json_add_str(p, "strategy", pt->strategy, &fail);
    sb_json_add_num(p, "replicas", pt->replicas, &fail);
    sb_json_add_str(p, "scaling", sb_sweep_scaling_name[pt->scaling], &fail);
    sb_json_add_num(p, "batch", pt->batch, &fail);
    sb_json_add_num(p, "global_batch", (double)pt->batch * pt->replicas, &fail);
    copy_config(p, first_report, &fail);
    sb_json_add_item(p, "runs", runs, &fail); /* owns runs from here, even on failure */
    sb_json_add_num(p, "runs_ok", pt->n_ok, &fail);

    int n = pt->n_ok;
    double v[SB_SWEEP_MAX_REPEATS], med;
    const size_t offs[] = {offsetof(struct sb_sweep_values, samples_per_s),
                           offsetof(struct sb_sweep_values, step_ms),
                           offsetof(struct sb_sweep_values, step_p95_ms),
                           offsetof(struct sb_sweep_values, epoch_s)};
    const char *names[] = {"samples_per_s", "step_ms", "step_p95_ms", "epoch_s"};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < n; i++) v[i] = *(const double *)((const char *)&pt->ok[i] + offs[k]);
        add_median_ci(p, names[k], v, n, &fail);
    }
    int reached = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(pt->ok[i].tta_s)) v[reached++] = pt->ok[i].tta_s;
    SB_TRY(sb_median(v, (size_t)reached, &med));
    sb_json_add_num(p, "time_to_accuracy_s", n > 0 && reached == n ? med : NAN, &fail);
    for (int i = 0; i < n; i++) v[i] = pt->ok[i].accuracy;
    SB_TRY(sb_median(v, (size_t)n, &med));
    sb_json_add_num(p, "final_test_accuracy", med, &fail);
    int have = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(pt->ok[i].memory_per_rank_bytes)) v[have++] = pt->ok[i].memory_per_rank_bytes;
    SB_TRY(sb_median(v, (size_t)have, &med));
    sb_json_add_num(p, "memory_per_rank_bytes", have == n && n > 0 ? med : NAN, &fail);
    cJSON *ph = sb_json_add_obj(p, "phases_ms", &fail);
    for (size_t k = 0; k < SB_SWEEP_N_PHASES; k++) {
        for (int i = 0; i < n; i++) v[i] = pt->ok[i].phase_ms[k];
        SB_TRY(sb_median(v, (size_t)n, &med));
        sb_json_add_num(ph, sb_sweep_phases[k], med, &fail);
    }
    if (fail)
        return sb_error(SB_ERR_NOMEM, "sweep: out of memory building the %s n=%d point of "
                        "scaling.json", pt->strategy, pt->replicas);
    return SB_OK;
}

void sb_scaling_from_ratio(double r, int n, int scaling, double *speedup, double *efficiency)
{
    *speedup = scaling == 0 ? r : (double)n * r;
    *efficiency = *speedup / (double)n;
}

sb_status sb_sweep_add_speedup(struct sb_sweep_point *pt, const struct sb_sweep_point *base)
{
    int fail = 0;
    double r = NAN, lo = NAN, hi = NAN, m1, mn;
    if (base && base->n_ok && pt->n_ok && !sb_median(base->t, (size_t)base->n_ok, &m1) &&
        !sb_median(pt->t, (size_t)pt->n_ok, &mn)) {
        r = m1 / mn;
        if (pt == base) lo = hi = 1; /* the baseline against itself: exactly 1 */
        else if (sb_bootstrap_ratio_ci(base->t, (size_t)base->n_ok, pt->t, (size_t)pt->n_ok, 0.95,
                                       BOOT_RESAMPLES, BOOT_SEED, &lo, &hi))
            lo = hi = NAN;
    }
    /* The scaling is linear in r, so it maps the interval bounds too. */
    double v[3][2];
    const double rs[3] = {r, lo, hi};
    for (int i = 0; i < 3; i++) sb_scaling_from_ratio(rs[i], pt->replicas, pt->scaling, &v[i][0], &v[i][1]);
    const char *keys[] = {"speedup", "efficiency"};
    for (int k = 0; k < 2; k++) {
        cJSON *o = sb_json_add_obj(pt->json, keys[k], &fail);
        sb_json_add_num(o, "value", v[0][k], &fail);
        sb_json_add_num(o, "ci95_low", v[1][k], &fail);
        sb_json_add_num(o, "ci95_high", v[2][k], &fail);
    }
    if (fail)
        return sb_error(SB_ERR_NOMEM, "sweep: out of memory adding the speedup of the %s n=%d "
                        "point to scaling.json", pt->strategy, pt->replicas);
    return SB_OK;
}
