/* Model tables, parts, shards and the initialisation; see model_table.h. */
#include "workloads/model_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

sb_status sb_part_check(const struct sb_part *part, int whole_layers, const char *workload,
                        struct sb_part *out)
{
    struct sb_part p = {0, whole_layers, 0, 1, 1, 0, 0, 0};
    if (part) p = *part;
    if (p.first_layer < 0 || p.first_layer >= whole_layers)
        return sb_error(SB_ERR_USAGE, "%s: part's first layer %d outside 0..%d", workload,
                        p.first_layer, whole_layers - 1);
    if (p.n_layers < 1 || p.n_layers > whole_layers - p.first_layer)
        return sb_error(SB_ERR_USAGE, "%s: part of %d layers from layer %d (the model has %d)",
                        workload, p.n_layers, p.first_layer, whole_layers);
    if (p.tp_size < 1 || p.tp_rank < 0 || p.tp_rank >= p.tp_size)
        return sb_error(SB_ERR_USAGE, "%s: tp rank %d of %d", workload, p.tp_rank, p.tp_size);
    if (p.slots < 1)
        return sb_error(SB_ERR_USAGE, "%s: %d activation slots (at least 1)", workload,
                        p.slots);
    *out = p;
    return SB_OK;
}

sb_status sb_tp_shard(int width, int size, int rank, const char *what, int *first, int *n)
{
    if (width < size)
        return sb_error(SB_ERR_USAGE, "%s: %d wide, fewer than the %d tp ranks", what, width,
                        size);
    int base = width / size, extra = width % size;
    *n = base + (rank < extra);
    *first = rank * base + (rank < extra ? rank : extra);
    return SB_OK;
}

sb_status sb_model_table_begin(struct sb_model_table *t, struct sb_model *m, int cap_layers,
                               int cap_tensors)
{
    memset(t, 0, sizeof *t);
    t->m = m;
    t->cap_layers = cap_layers;
    t->cap_tensors = cap_tensors;
    m->layers = calloc((size_t)cap_layers, sizeof *m->layers);
    m->tensors = calloc((size_t)cap_tensors, sizeof *m->tensors);
    t->init = calloc((size_t)cap_tensors, sizeof *t->init);
    if (!m->layers || !m->tensors || !t->init)
        return sb_error(SB_ERR_NOMEM, "model tables: out of memory");
    m->n_layers = 0;
    m->n_tensors = 0;
    return SB_OK;
}

void sb_model_table_add_layer(struct sb_model_table *t, const char *name, const int in_shape[3],
                        const int out_shape[3])
{
    struct sb_model *m = t->m;
    struct sb_layer_desc *l = &m->layers[m->n_layers++];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->first_tensor = m->n_tensors;
    l->n_tensors = 0;
    l->offset = t->off;
    l->count = 0;
    l->in_floats = l->out_floats = 1;
    for (int i = 0; i < 3; i++) {
        l->in_shape[i] = in_shape[i];
        l->out_shape[i] = out_shape[i];
        l->in_floats *= (size_t)in_shape[i];
        l->out_floats *= (size_t)out_shape[i];
    }
}

size_t sb_model_table_add_tensor(struct sb_model_table *t, const struct sb_tensor_spec *s)
{
    struct sb_model *m = t->m;
    struct sb_layer_desc *l = &m->layers[m->n_layers - 1];
    t->init[m->n_tensors] = *s;
    struct sb_tensor_desc *d = &m->tensors[m->n_tensors++];
    snprintf(d->name, sizeof d->name, "%s", s->name);
    d->offset = t->off;
    d->count = s->n_rows * s->n_cols;
    d->tp_split = s->tp_split;
    d->layer = m->n_layers - 1;
    d->rows = s->rows;
    l->n_tensors++;
    l->count += d->count;
    t->off += d->count;
    return d->offset;
}

size_t sb_model_add_tensor(struct sb_model *m, const char *name, size_t count, size_t *off)
{
    struct sb_tensor_desc *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->count = count;
    *off += count;
    return t->offset;
}

void sb_model_table_end(struct sb_model_table *t) { t->m->n_params = t->off; }

/* Fills x with tensor s's piece: the whole tensor's stream, row-major,
 * keeping rows [row0, row0 + n_rows) x columns [col0, col0 + n_cols). */
static void init_tensor(const struct sb_tensor_spec *s, uint64_t seed, float *x)
{
    double bound = 1.0 / sqrt((double)s->fan_in);
    struct sb_rng rng;
    sb_rng_seed(&rng, seed, 1000 + (uint64_t)s->global_index);
    size_t end_row = s->row0 + s->n_rows, k = 0;
    for (size_t r = 0; r < end_row; r++)
        for (size_t c = 0; c < s->cols; c++) {
            float v = (float)((2.0 * sb_rng_uniform(&rng) - 1.0) * bound);
            if (r >= s->row0 && c >= s->col0 && c < s->col0 + s->n_cols) x[k++] = v;
        }
}

sb_status sb_model_table_init(const struct sb_model_table *t, uint64_t seed,
                              const char *workload)
{
    const struct sb_model *m = t->m;
    const struct sb_backend_ops *be = m->be;
    size_t n = m->n_params;
    float *host = be->host_memory ? m->params : malloc(n * sizeof *host);
    if (!host) return sb_error(SB_ERR_NOMEM, "%s: out of memory", workload);
    for (int i = 0; i < m->n_tensors; i++)
        init_tensor(&t->init[i], seed, host + m->tensors[i].offset);
    sb_status st = be->host_memory ? SB_OK : be->upload(m->params, host, n * sizeof *host);
    if (host != m->params) free(host);
    return st;
}

void sb_model_table_free(struct sb_model_table *t)
{
    free(t->init);
    t->init = NULL;
}

sb_status sb_part_check_forward(const struct sb_model *m, int slot, int n, const char *workload)
{
    if (slot < 0 || slot >= m->part.slots)
        return sb_error(SB_ERR_INTERNAL, "%s: slot %d outside 0..%d", workload, slot,
                        m->part.slots - 1);
    if (n <= 0 || n > m->max_batch)
        return sb_error(SB_ERR_INTERNAL, "%s: batch %d outside 1..%d", workload, n,
                        m->max_batch);
    return SB_OK;
}

sb_status sb_part_check_backward(const struct sb_model *m, int slot, const float *dout,
                                 const float *din, const char *workload)
{
    if (slot < 0 || slot >= m->part.slots)
        return sb_error(SB_ERR_INTERNAL, "%s: slot %d outside 0..%d", workload, slot,
                        m->part.slots - 1);
    if (!dout && !sb_part_is_last(m))
        return sb_error(SB_ERR_INTERNAL, "%s: backward of a part before the last without dout",
                        workload);
    if (din && m->part.first_layer == 0)
        return sb_error(SB_ERR_INTERNAL, "%s: no input gradient for the images (first part)",
                        workload);
    return SB_OK;
}

sb_status sb_part_check_whole(const struct sb_model *m, const char *workload)
{
    if (m->part.first_layer != 0 || m->part.n_layers != m->whole_layers || m->part.tp_size != 1)
        return sb_error(SB_ERR_INTERNAL, "%s: a whole-model op on a part (use the part ops)",
                        workload);
    return SB_OK;
}

/* The greatest common divisor of a and b (gcd(0, b) = b). */
static size_t gcd_size(size_t a, size_t b)
{
    while (b) {
        size_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

int sb_model_layer_summaries(const struct sb_model *m, struct sb_layer_summary *out, int cap)
{
    int n = 0;
    for (int l = 0; l < m->n_layers && n < cap; l++, n++) {
        const struct sb_layer_desc *d = &m->layers[l];
        struct sb_layer_summary *y = &out[n];
        memset(y, 0, sizeof *y);
        snprintf(y->name, sizeof y->name, "%s", d->name);
        y->params = (double)d->count;
        y->in_floats = (double)d->in_floats;
        y->out_floats = (double)d->out_floats;
        size_t width = 0; /* gcd of the column-parallel tensors' sizes */
        int columns = 0;
        for (int t = d->first_tensor; t < d->first_tensor + d->n_tensors; t++) {
            const struct sb_tensor_desc *x = &m->tensors[t];
            if (x->tp_split == SB_TP_REPLICATED) continue;
            y->split_params += (double)x->count;
            if (x->tp_split == SB_TP_COLUMN) {
                columns++;
                width = gcd_size(width, x->count);
            } else {
                y->tp_row++;
            }
        }
        y->tp_column = columns == 0 ? 0 : y->tp_row > 0 ? y->tp_row : 1;
        if (width && d->split_units > 0) width = gcd_size(width, (size_t)d->split_units);
        y->split_width = width ? (int)width : y->tp_row ? d->in_shape[0] : 0;
        double positions = d->out_shape[2] == 1 && d->out_shape[1] > 1
                               ? d->out_shape[0]
                               : (double)d->out_shape[1] * d->out_shape[2];
        y->flops = 2.0 * y->params * positions;
    }
    return n;
}
