/* Gradient buckets for ddp: which contiguous ranges of the flat gradient
 * buffer are all-reduced together, and in which order.
 *
 * As in PyTorch DistributedDataParallel (torch/nn/parallel/distributed.py,
 * bucket_cap_mb; Li et al., "PyTorch Distributed", VLDB 2020), buckets are
 * filled in reverse layer order, because backward makes the last layer's
 * gradients ready first: bucket 0 holds the end of the buffer and is the
 * first to be all-reduced. A layer is never split across buckets. */
#ifndef SB_BUCKETS_H
#define SB_BUCKETS_H

#include <stddef.h>

#include "comm/cost_model.h"
#include "core/status.h"
#include "workloads/workload.h"

/* One bucket: grads[offset, offset + count) (floats), layers
 * [first_layer, first_layer + n_layers) of the plan's layer numbering
 * (layer 0 = the first in buffer order). */
struct sb_bucket {
    size_t offset;
    size_t count;
    int first_layer;
    int n_layers;
};

struct sb_bucket_plan {
    int n;                      /* number of buckets */
    struct sb_bucket *buckets;  /* (n) in launch order: buckets[0] ends at n_params */
    int n_layers;               /* layers of the layer table */
    size_t n_floats;            /* floats covered: the whole buffer */
};

/* Plans buckets of at most cap_mb MiB (1 MiB = 2^20 bytes, 4 bytes per
 * float) over a model's layer table (struct sb_model's layers: in buffer
 * order, contiguous from offset 0), the ranges backward reports ready
 * together. Walking layers from the last, a bucket closes when adding the
 * next layer would take it over the cap; a layer larger than the cap is a
 * bucket of its own. (PyTorch instead closes a bucket once it reaches the
 * cap, and caps its first bucket at 1 MiB.) Errors: SB_ERR_USAGE if
 * cap_mb <= 0 (names --bucket-mb), SB_ERR_INTERNAL for a table that is
 * empty, out of order or has gaps, SB_ERR_NOMEM. Free with
 * sb_bucket_plan_free. */
sb_status sb_bucket_plan_create(const struct sb_layer_desc *layers, int n_layers,
                                double cap_mb, struct sb_bucket_plan *out);

/* The bucket cap a pipeline's dp sync uses (and zero's and ddp's --bucket-mb
 * default, PyTorch DDP's bucket_cap_mb): 25 MiB. */
#define SB_BUCKET_MB_DEFAULT 25.0

/* A cap below any layer's size: a bucket per layer (zero stage 3's units,
 * sb_strategy_model_layers). MiB. */
#define SB_BUCKET_CAP_PER_LAYER_MB 1e-9

/* Communication time of one step's buckets (docs/ddp.md): the busy time
 * *total_s = the length of the union of the n requests' [start_s, done_s]
 * intervals (overlapping all-reduces count once); *exposed_s = the part of
 * that union after backward ended at t_backward_end_s (the step waited for
 * it); *hidden_s = total - exposed, the part overlapped with backward.
 * Requests must be in launch order (start_s not decreasing). Seconds. */
struct sb_comm_request;
void sb_bucket_comm_times(const struct sb_comm_request *req, int n, double t_backward_end_s,
                          double *total_s, double *exposed_s, double *hidden_s);

/* The α–β model of buckets (ddp's comm_model op). Overlap bound: the part of the all-reduce time a step cannot hide
 * behind backward. Buckets (bytes[0..n_buckets), launch order) become ready
 * as backward proceeds, bucket i when the gradients up to and including it
 * are computed, assumed at a rate proportional to bytes over backward_s; the
 * all-reduces run one after another, bucket i taking comm_s[i]. Returns the
 * time after backward's end until the last bucket is done (>= 0):
 *   ready_i = backward_s * (b_0 + ... + b_i) / M,
 *   done_i  = max(ready_i, done_{i-1}) + comm_s[i],
 *   exposed = max(0, done_last - backward_s).
 * With overlap off every bucket is ready at backward_s (pass backward_s = 0
 * to get the sum of comm_s). */
double sb_bucket_exposed_s(const double *bytes, const double *comm_s, int n_buckets,
                             double backward_s);

/* Gradient buckets all-reduced as they become ready (ddp, and any strategy
 * of buckets): what sb_bucket_allreduce_cost predicts. */
struct sb_bucket_cost {
    double comm_s;    /* sum of the buckets' all-reduce times */
    double exposed_s; /* sb_bucket_exposed_s of them */
    enum sb_allreduce_algo largest; /* the algorithm of the largest bucket (the first one of
                                     * the largest size) */
    int by_algo[SB_ALLREDUCE_NALGOS]; /* buckets per algorithm */
};

/* bytes[0..n) (launch order) each all-reduced over p ranks by `algo`
 * (AUTO: sb_allreduce_choose per bucket, the flat rule; not HIERARCHICAL),
 * scheduled as sb_bucket_exposed_s schedules them, overlapping a backward
 * pass of backward_s (0: no overlap, every bucket ready at once);
 * times[0..n) receives each bucket's time (scratch the caller provides).
 * A ring bucket that becomes ready while a ring bucket before it is still
 * in flight joins it: its reduce-scatter and all-gather are one unit more
 * of those in flight (sb_cost_reduce_scatter_s: α once for its start), so
 * it takes 2α + 2(p-1)M_b/(pB), not 2(p-1)(α + M_b/(pB)) (the same at
 * p = 2; docs/cost-model.md, "Units in flight together"). Other algorithms'
 * buckets, and rings behind them alone, pay in full. */
void sb_bucket_allreduce_cost(const struct sb_link *l, enum sb_allreduce_algo algo, int p,
                                const double *bytes, int n, double backward_s, double *times,
                                struct sb_bucket_cost *out);

/* Frees the plan's buckets and zeroes it; safe on a zeroed plan. */
void sb_bucket_plan_free(struct sb_bucket_plan *plan);

#endif
