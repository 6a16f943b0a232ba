/* Gradient bucket planning for ddp; see buckets.h. */
#include "strategies/shared/buckets.h"

#include "comm/comm.h"
#include "strategies/strategy.h"

#include <stdlib.h>
#include <string.h>

void sb_bucket_plan_free(struct sb_bucket_plan *plan)
{
    free(plan->buckets);
    memset(plan, 0, sizeof *plan);
}

sb_status sb_bucket_plan_create(const struct sb_layer_desc *layers, int n_layers,
                                double cap_mb, struct sb_bucket_plan *out)
{
    memset(out, 0, sizeof *out);
    if (!(cap_mb > 0.0))
        return sb_error(SB_ERR_USAGE, "--bucket-mb: %g is not a positive size in MiB", cap_mb);
    if (n_layers <= 0) return sb_error(SB_ERR_INTERNAL, "buckets: empty layer table");
    size_t end = 0;
    for (int l = 0; l < n_layers; l++) {
        if (layers[l].offset != end)
            return sb_error(SB_ERR_INTERNAL, "buckets: layer %s at offset %zu, expected %zu",
                            layers[l].name, layers[l].offset, end);
        end += layers[l].count;
    }
    /* At most one bucket per layer. */
    struct sb_bucket *b = malloc((size_t)n_layers * sizeof *b);
    if (!b) return sb_error(SB_ERR_NOMEM, "buckets: out of memory");
    double cap_bytes = cap_mb * 1048576.0;
    int n = 0;
    for (int l = n_layers - 1; l >= 0; l--) {
        size_t off = layers[l].offset, count = layers[l].count;
        struct sb_bucket *cur = n > 0 ? &b[n - 1] : NULL;
        if (cur && (double)(cur->count + count) * sizeof(float) <= cap_bytes) {
            cur->offset = off; /* grow towards the start of the buffer */
            cur->count += count;
            cur->first_layer = l;
            cur->n_layers++;
        } else {
            b[n++] = (struct sb_bucket){off, count, l, 1};
        }
    }
    out->n = n;
    out->buckets = b;
    out->n_layers = n_layers;
    out->n_floats = end;
    return SB_OK;
}

void sb_bucket_comm_times(const struct sb_comm_request *req, int n, double t_backward_end_s,
                          double *total_s, double *exposed_s, double *hidden_s)
{
    double total = 0.0, exposed = 0.0;
    for (int i = 0; i < n;) {
        /* One merged interval: every later request that starts before it ends. */
        double s = req[i].start_s, e = req[i].done_s;
        for (i++; i < n && req[i].start_s <= e; i++)
            if (req[i].done_s > e) e = req[i].done_s;
        total += e - s;
        double from = s > t_backward_end_s ? s : t_backward_end_s;
        if (e > from) exposed += e - from;
    }
    *total_s = total;
    *exposed_s = exposed;
    *hidden_s = total - exposed;
}

/* When a bucket is ready (s): backward has produced ready_bytes of the
 * total at a steady rate over backward_s (sb_bucket_exposed_s). */
static double ready_s(double backward_s, double ready_bytes, double total)
{
    return total > 0 ? backward_s * ready_bytes / total : backward_s;
}

double sb_bucket_exposed_s(const double *bytes, const double *comm_s, int n_buckets,
                             double backward_s)
{
    double total = 0.0;
    for (int i = 0; i < n_buckets; i++) total += bytes[i];
    double ready_bytes = 0.0, done = 0.0;
    for (int i = 0; i < n_buckets; i++) {
        ready_bytes += bytes[i];
        double ready = ready_s(backward_s, ready_bytes, total);
        done = (ready > done ? ready : done) + comm_s[i];
    }
    double exposed = done - backward_s;
    return n_buckets > 0 && exposed > 0 ? exposed : 0.0;
}

void sb_bucket_allreduce_cost(const struct sb_link *l, enum sb_allreduce_algo algo, int p,
                                const double *bytes, int n, double backward_s, double *times,
                                struct sb_bucket_cost *out)
{
    *out = (struct sb_bucket_cost){.largest = SB_ALLREDUCE_RING};
    double total = 0.0, ready_bytes = 0.0, done = 0.0, ring_done = -1.0;
    for (int b = 0; b < n; b++) total += bytes[b];
    int largest = 0;
    const struct sb_link ring = sb_link_exchange(l); /* a ring's steps are exchanges */
    for (int b = 0; b < n; b++) {
        enum sb_allreduce_algo a = algo;
        if (a == SB_ALLREDUCE_AUTO) a = sb_allreduce_choose((size_t)bytes[b], p);
        times[b] = sb_cost_allreduce_s(l, a, p, bytes[b]);
        /* The schedule of sb_bucket_exposed_s: a ring that becomes ready
         * while another ring is in flight joins it, its reduce-scatter and
         * all-gather one unit more of those in flight (cost_model.h): 2α
         * for its start, not 2(p-1)α again. */
        ready_bytes += bytes[b];
        double ready = ready_s(backward_s, ready_bytes, total);
        if (a == SB_ALLREDUCE_RING && ready < ring_done && p > 2)
            times[b] -= 2.0 * (p - 2) * sb_link_at(&ring, bytes[b] / p).alpha_s;
        done = (ready > done ? ready : done) + times[b];
        if (a == SB_ALLREDUCE_RING) ring_done = done;
        out->comm_s += times[b];
        out->by_algo[a]++;
        if (b == 0 || bytes[b] > bytes[largest]) {
            largest = b;
            out->largest = a;
        }
    }
    out->exposed_s = sb_bucket_exposed_s(bytes, times, n, backward_s);
}

sb_status sb_strategy_model_layers(const struct sb_model *m, int *layers)
{
    struct sb_bucket_plan plan = {0};
    *layers = 0;
    SB_TRY(sb_bucket_plan_create(m->layers, m->n_layers, SB_BUCKET_CAP_PER_LAYER_MB, &plan));
    *layers = plan.n; /* a bucket per layer, as zero stage 3 plans its units */
    sb_bucket_plan_free(&plan);
    return SB_OK;
}
