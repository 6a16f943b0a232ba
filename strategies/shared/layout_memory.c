/* Memory per rank of a layout as the run's ledger states it; formulas in
 * layout_memory.h and docs/layouts.md ("predict's memory"). */
#include "strategies/shared/layout_memory.h"

#include <stdlib.h>
#include <string.h>

#include "strategies/shared/buckets.h"
#include "strategies/shared/layout_model.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/pipeline_plan.h"
#include "strategies/shared/precision.h"
#include "strategies/shared/replica.h"

/* What the dp sync of one part (a chunk, or the whole model) holds on dp
 * rank 0: its shard's floats and its two largest units' bytes. */
struct part_sync {
    double shard_floats;
    double big_bytes[2];
};

/* The floats of layer i of the part's tp shard: the workload's part_size of
 * that one layer where it states part sizes, else the report's layer table
 * (split parameters divided by tp). */
static double layer_floats(const struct sb_layout_inputs *in, const struct sb_config *cfg,
                           int i, int tp)
{
    if (in->workload->part_size) {
        struct sb_part one = {i, 1, 0, tp, 1, 0, 0, 0};
        struct sb_model_size z = in->workload->part_size(cfg, 1, &one);
        if (z.n_params > 0) return z.n_params;
    }
    const struct sb_layer_summary *y = &in->layers[i];
    return y->params - y->split_params + y->split_params / tp;
}

/* The dp sync's units over layers [first, first + count) of the tp shard
 * (sb_bucket_plan_create's buckets of cap_mb MiB: the run's own planner)
 * and dp rank 0's shard of them (sb_split_range's first block). Returns 0
 * when the planner refuses the table. */
static int plan_sync(const struct sb_layout_inputs *in, const struct sb_config *cfg, int first,
                     int count, int tp, int dp, double cap_mb, struct part_sync *out)
{
    memset(out, 0, sizeof *out);
    struct sb_layer_desc *t = calloc((size_t)count, sizeof *t);
    if (!t) return 0;
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        t[i].offset = off;
        t[i].count = (size_t)layer_floats(in, cfg, first + i, tp);
        off += t[i].count;
    }
    struct sb_bucket_plan plan;
    sb_status st = sb_bucket_plan_create(t, count, cap_mb, &plan);
    free(t);
    if (st) return 0;
    for (int u = 0; u < plan.n; u++) {
        int f, n;
        sb_split_range((int)plan.buckets[u].count, dp, 0, &f, &n);
        out->shard_floats += n;
        double b = 4.0 * (double)plan.buckets[u].count;
        if (b > out->big_bytes[0]) {
            out->big_bytes[1] = out->big_bytes[0];
            out->big_bytes[0] = b;
        } else if (b > out->big_bytes[1]) {
            out->big_bytes[1] = b;
        }
    }
    sb_bucket_plan_free(&plan);
    return 1;
}

/* Virtual stage v of n_virtual over n layers: its first layer and count
 * (sb_split_range's cut, as the layout model's and the pipeline's). */
static void cut(int n, int n_virtual, int v, int *first, int *count)
{
    sb_split_range(n, n_virtual, v, first, count);
}

int sb_layout_memory(const struct sb_layout *l, const struct sb_layout_inputs *in,
                     const struct sb_pp_schedule *sc, int s, struct sb_memory_entry *out)
{
    memset(out, 0, sizeof *out);
    const struct sb_workload_ops *w = in->workload;
    if (!w || !w->size || !in->model_cfg || l->dp < 1 || l->microbatches < 1) return 0;
    if (l->pp > 1 && (!w->part_size || !sc || !sc->actions || l->chunks > 64)) return 0;
    if (l->pp == 1 && l->tp > 1 && !w->part_size) return 0;
    struct sb_config cfg = *in->model_cfg;
    int batch = in->global_batch / l->dp, mb = batch / l->microbatches;
    cfg.batch = batch;
    cfg.replicas = l->dp;
    cfg.optimizer = in->optimizer;
    /* a replica's batches: the training and evaluation batches' larger
     * (replica.c); a pipeline's parts: one micro-batch */
    int max_batch = batch > cfg.eval_batch ? batch : cfg.eval_batch;
    int slots[64] = {1};
    if (l->pp > 1) sb_pp_chunk_slots(sc, s, slots);
    int n_chunks = l->pp > 1 ? l->chunks : 1, zero = l->dp > 1 ? l->zero_stage : 0;
    double n = 0, act = 0, shard = 0, p2p = 0, big[2] = {0, 0};
    for (int k = 0; k < n_chunks; k++) {
        int v = k * l->pp + s, first = 0, count = in->n_layers;
        if (l->pp > 1) cut(in->n_layers, l->pp * l->chunks, v, &first, &count);
        struct sb_model_size z;
        if (l->pp == 1 && l->tp == 1) {
            z = w->size(&cfg, max_batch); /* the whole model: create's */
        } else {
            struct sb_part part = {first, count, 0, l->tp, slots[k],
                                   l->pp == 1 && l->tp > 1 && in->sequence_parallel,
                                   l->pp > 1 && l->schedule == SB_PP_ZBH1, l->microbatches > 1};
            z = w->part_size(&cfg, l->pp > 1 ? mb : max_batch, &part);
        }
        if (!(z.n_params > 0) || !(z.activation_bytes > 0)) return 0;
        n += z.n_params;
        act += z.activation_bytes;
        if (zero > 0) {
            struct part_sync ps;
            double cap = zero == 3 ? SB_BUCKET_CAP_PER_LAYER_MB : SB_BUCKET_MB_DEFAULT;
            if (!plan_sync(in, &cfg, first, count, l->tp, l->dp, cap, &ps)) return 0;
            shard += ps.shard_floats;
            for (int i = 0; i < 2; i++)
                if (ps.big_bytes[i] > big[1]) {
                    big[1] = ps.big_bytes[i];
                    if (big[1] > big[0]) {
                        double t = big[0];
                        big[0] = big[1];
                        big[1] = t;
                    }
                }
        }
        /* the pipeline's point-to-point buffers (pipeline_chunks.c): the
         * received activations and gradients of (slots + m) micro-batches
         * (none on the first chunk), one output gradient (none on the last) */
        if (l->pp > 1) {
            if (v > 0) p2p += (double)(slots[k] + l->microbatches) * mb *
                              in->layers[first].in_floats;
            if (v < l->pp * l->chunks - 1)
                p2p += (double)mb * in->layers[first + count - 1].out_floats;
        }
    }
    double state = sb_optimizer_state_floats(&cfg);
    out->held.param_bytes = 4.0 * (zero >= 3 ? shard : n);
    out->held.grad_bytes = 4.0 * (zero >= 2 ? shard : n);
    out->held.optimizer_bytes = 4.0 * state * (zero >= 1 ? shard : n);
    out->comm_bytes = 4.0 * p2p + (zero == 1   ? 4.0 * shard
                                   : zero == 2 ? big[0]
                                   : zero == 3 ? 2 * big[0] + big[1]
                                               : 0.0);
    out->activation_bytes = act;
    out->replica = 0;
    out->peak_rss_bytes = out->peak_device_bytes = -1;
    sb_precision_ledger(&cfg, out);
    return 1;
}

