/* The link calibrated from two ddp runs; see predict_link.h. */
#include "cli/predict_link.h"

#include <math.h>

#include "strategies/strategy.h"

/* The comm seconds per step ddp's model gives run r on link (alpha, B). */
static double model_comm_s(const struct sb_comm_model_query *proto, const struct sb_link_run *r,
                           double alpha_s, double bandwidth_Bps)
{
    const struct sb_strategy_ops *ddp = sb_strategy_find("ddp");
    struct sb_comm_model_row row[8];
    struct sb_comm_model_query q = *proto;
    q.link = (struct sb_link){.alpha_s = alpha_s, .bandwidth_Bps = bandwidth_Bps};
    q.replicas = r->replicas;
    q.bucket_bytes = r->buckets;
    q.n_buckets = r->n_buckets;
    q.bytes = 0.0;
    for (int b = 0; b < r->n_buckets; b++) q.bytes += r->buckets[b];
    if (!ddp || !ddp->comm_model || ddp->comm_model(&q, row, 8) < 1) return NAN;
    return row[0].comm_s;
}

/* Run r's comm = a alpha + b x + c (x = 1/B), read off the model. */
static void coefficients(const struct sb_link_run *r, double *a, double *b, double *c)
{
    const double inf = 1e300;
    struct sb_comm_model_query proto = {.overlap = 0};
    *c = model_comm_s(&proto, r, 0.0, inf);
    *a = model_comm_s(&proto, r, 1.0, inf) - *c;
    *b = model_comm_s(&proto, r, 0.0, 1.0) - *c;
}

sb_status sb_predict_calibrate_link(const struct sb_link_run *one,
                                    const struct sb_link_run *layers, double alpha_floor_s,
                                    struct sb_link *out)
{
    double a1, b1, c1, a2, b2, c2;
    coefficients(one, &a1, &b1, &c1);
    coefficients(layers, &a2, &b2, &c2);
    double y1 = 1e-3 * one->comm_ms - c1, y2 = 1e-3 * layers->comm_ms - c2;
    double det = a1 * b2 - a2 * b1;
    if (!isfinite(det) || fabs(det) < 1e-9 * fabs(a1 * b2))
        return sb_error(SB_ERR_INPUT, "predict: --calibrate %s: its buckets send as many "
                        "messages as %s's (%g); run it with --bucket-mb 0.000001 --no-overlap "
                        "(a bucket per layer)", layers->path, one->path, a1);
    double alpha = (y1 * b2 - y2 * b1) / det;
    double floor_s = alpha_floor_s > 0.0 ? alpha_floor_s : 0.0;
    if (!(alpha >= floor_s)) alpha = floor_s;
    double x = (y1 - a1 * alpha) / b1; /* 1 / B */
    if (!(x > 0.0) || !isfinite(x))
        return sb_error(SB_ERR_INPUT, "predict: --calibrate: %s: its step (%.3f ms beyond "
                        "compute) leaves no time for its bytes at alpha %.3g s: the two runs "
                        "fit no one link (calibrate on a model of megabytes, e.g. --hidden "
                        "1024,1024, whose all-reduce the link dominates)", one->path,
                        one->comm_ms, alpha);
    *out = (struct sb_link){.alpha_s = alpha, .bandwidth_Bps = 1.0 / x};
    return SB_OK;
}
