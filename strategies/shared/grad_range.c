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
    for (int l = 0; l < m->n_layers; l++) {
        const struct sb_layer_desc *d = &m->layers[l];
        if (d->offset >= range.offset && d->offset + d->count <= end) {
            if (first < 0) first = l;
            n++;
        }
    }
    size_t covered = 0;
    for (int l = first; first >= 0 && l < first + n; l++) covered += m->layers[l].count;
    if (first < 0 || m->layers[first].offset != range.offset || covered != range.count)
        return sb_error(SB_ERR_USAGE, "gradient range [%zu, %zu) does not start and end on "
                        "the model's layer boundaries", range.offset, end);
    /* The range's layers, shifted to start at 0 as the planner wants. */
    struct sb_layer_desc *t = malloc((size_t)n * sizeof *t);
    if (!t) return sb_error(SB_ERR_NOMEM, "gradient range: out of memory");
    for (int i = 0; i < n; i++) {
        t[i] = m->layers[first + i];
        t[i].offset -= range.offset;
    }
    sb_status st = sb_bucket_plan_create(t, n, cap_mb, out);
    free(t);
    if (st) return st;
    for (int b = 0; b < out->n; b++) out->buckets[b].offset += range.offset;
    return SB_OK;
}
