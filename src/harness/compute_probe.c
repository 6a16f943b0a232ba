/* The compute probe: forward and backward at two batch sizes; see
 * compute_probe.h. */
#include "harness/compute_probe.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/stats.h"

/* Times SB_COMPUTE_PROBE_REPS forward and backward passes of m on (x, y)
 * of n samples, after `warm` untimed ones; the best of each into out's
 * slot i. */
static sb_status time_passes(struct sb_model *m, const struct sb_workload_ops *wl,
                             const struct sb_backend_ops *be, const float *x, const uint8_t *y,
                             int n, int warm, int i, struct sb_compute_probe *out)
{
    double wall[2][SB_COMPUTE_PROBE_REPS], cpu[2][SB_COMPUTE_PROBE_REPS];
    for (int k = -warm; k < SB_COMPUTE_PROBE_REPS; k++) {
        double loss = 0.0;
        double t0 = sb_now_s(), c0 = sb_thread_cpu_s();
        SB_TRY(wl->forward(m, x, y, n, 1.0f / (float)n, &loss));
        SB_TRY(be->check());
        double t1 = sb_now_s(), c1 = sb_thread_cpu_s();
        SB_TRY(wl->backward(m, NULL, NULL));
        SB_TRY(be->check());
        double t2 = sb_now_s(), c2 = sb_thread_cpu_s();
        if (k < 0) continue; /* a warming pass: caches, scratch, page faults */
        wall[0][k] = 1e3 * (t1 - t0), wall[1][k] = 1e3 * (t2 - t1);
        cpu[0][k] = 1e3 * (c1 - c0), cpu[1][k] = 1e3 * (c2 - c1);
    }
    struct sb_summary s;
    double *dst[4] = {&out->forward_ms[i], &out->backward_ms[i], &out->forward_cpu_ms[i],
                      &out->backward_cpu_ms[i]};
    const double *src[4] = {wall[0], wall[1], cpu[0], cpu[1]};
    for (int j = 0; j < 4; j++) {
        SB_TRY(sb_summarize(src[j], SB_COMPUTE_PROBE_REPS, &s));
        *dst[j] = s.min;
    }
    return SB_OK;
}

sb_status sb_compute_probe_run(const struct sb_config *cfg, const struct sb_backend_ops *be,
                               const struct sb_workload_ops *wl, const struct sb_mnist *data,
                               struct sb_compute_probe *out)
{
    memset(out, 0, sizeof *out);
    if (!be->host_memory)
        return sb_error(SB_ERR_INTERNAL, "compute probe: host memory backends only");
    int b2 = cfg->batch > 0 ? cfg->batch : 1, b1 = b2 / 4 > 0 ? b2 / 4 : 1;
    if (b2 > data->train.n) b2 = data->train.n;
    int pixels = data->train.rows * data->train.cols;
    float *x = malloc((size_t)b2 * pixels * sizeof *x);
    uint8_t *y = malloc((size_t)b2);
    int32_t *idx = malloc((size_t)b2 * sizeof *idx);
    struct sb_model *m = NULL;
    sb_status st = x && y && idx ? SB_OK : sb_error(SB_ERR_NOMEM, "compute probe: out of memory");
    double t0 = sb_now_s();
    if (!st) {
        for (int i = 0; i < b2; i++) idx[i] = i; /* the first training samples */
        sb_mnist_gather(&data->train, idx, b2, x, y);
        st = wl->create(cfg, be, b2, &m);
    }
    /* one warming pass at b2 touches every buffer either size uses */
    if (!st) st = time_passes(m, wl, be, x, y, b2, 1, 1, out);
    if (!st) st = time_passes(m, wl, be, x, y, b1, 0, 0, out);
    if (m) wl->destroy(m);
    free(idx);
    free(y);
    free(x);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    out->batch[0] = b1, out->batch[1] = b2;
    out->seconds = sb_now_s() - t0;
    out->done = 1;
    return SB_OK;
}
