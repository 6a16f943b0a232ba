/* A range of a model's flat buffers, and the bucket plan over it: what the
 * data-parallel synchronisation pieces (dp_sync.h, zero_sync.h) take, so
 * that they work on a whole model or on a part of one (a pipeline stage's
 * layers, a tensor-parallel shard's tensors). */
#ifndef SB_GRAD_RANGE_H
#define SB_GRAD_RANGE_H

#include <stddef.h>

#include "core/status.h"
#include "strategies/shared/buckets.h"
#include "workloads/workload.h"

/* [offset, offset + count) of a model's flat gradient (and parameter)
 * buffer, in floats. */
struct sb_grad_range {
    size_t offset;
    size_t count;
};

/* The whole of model m: [0, m->n_params). */
struct sb_grad_range sb_grad_range_whole(const struct sb_model *m);

/* Buckets of at most cap_mb MiB over the layers of m that lie in `range`
 * (sb_bucket_plan_create's plan of those layers: its rules, its layer
 * numbering from the range's first layer), with bucket offsets in m's
 * buffer; plan->n_floats = range.count. Errors: SB_ERR_USAGE when the
 * range is empty, outside m, or does not start and end on layer
 * boundaries; those of sb_bucket_plan_create; SB_ERR_NOMEM. Free with
 * sb_bucket_plan_free. */
sb_status sb_grad_range_plan(const struct sb_model *m, struct sb_grad_range range, double cap_mb,
                             struct sb_bucket_plan *out);

#endif
