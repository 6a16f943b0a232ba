/* The bucket plan over a range of a model's buffers (grad_range.h). */
#include "strategies/shared/grad_range.h"

#include <stdlib.h>
#include <string.h>

struct sb_grad_range sb_grad_range_whole(const struct sb_model *m)
{
    return (struct sb_grad_range){0, m->n_params};
}

sb_status sb_grad_range_plan(const struct sb_model *m, struct sb_grad_range range, double cap_mb,
                             struct sb_bucket_plan *out)
{
    memset(out, 0, sizeof *out);
    size_t end = range.offset + range.count;
    if (range.count == 0 || end > m->n_params || end < range.offset)
        return sb_error(SB_ERR_USAGE, "gradient range [%zu, %zu) is empty or outside the "
                        "model's %zu parameters", range.offset, end, m->n_params);
    int first = -1, n = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        const struct sb_tensor_desc *d = &m->tensors[t];
        if (d->offset >= range.offset && d->offset + d->count <= end) {
            if (first < 0) first = t;
            n++;
        }
    }
    size_t covered = 0;
    for (int t = first; first >= 0 && t < first + n; t++) covered += m->tensors[t].count;
    if (first < 0 || m->tensors[first].offset != range.offset || covered != range.count)
        return sb_error(SB_ERR_USAGE, "gradient range [%zu, %zu) does not start and end on "
                        "the model's tensor boundaries", range.offset, end);
    /* The range's tensors, shifted to start at 0 as the planner wants. */
    struct sb_tensor_desc *t = malloc((size_t)n * sizeof *t);
    if (!t) return sb_error(SB_ERR_NOMEM, "gradient range: out of memory");
    for (int i = 0; i < n; i++) {
        t[i] = m->tensors[first + i];
        t[i].offset -= range.offset;
    }
    sb_status st = sb_bucket_plan_create(t, n, cap_mb, out);
    free(t);
    if (st) return st;
    for (int b = 0; b < out->n; b++) out->buckets[b].offset += range.offset;
    return SB_OK;
}
