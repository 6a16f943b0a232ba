/* What every workload does the same way when it builds a model or a part of
 * one: check the part it is asked for, fill the layer and tensor tables
 * (struct sb_model's), cut tensor-parallel shards, and initialise the
 * parameters with PyTorch's default so that a part's values are the whole
 * model's. */
#ifndef SB_MODEL_TABLE_H
#define SB_MODEL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/workload.h"

/* How the whole model initialises one tensor, and which piece of it a part
 * holds. The whole tensor is seen as a matrix (rows, cols) in row-major
 * order (a weight (out, in), a bias (out, 1), a convolution's weight
 * (out, c * k * k)); the part holds rows [row0, row0 + n_rows) x columns
 * [col0, col0 + n_cols) of it, in that order. */
struct sb_tensor_spec {
    const char *name;         /* the whole model's name: "fc1.weight" */
    enum sb_tp_split tp_split;
    int global_index;         /* index in the whole model's tensor table: its RNG stream */
    int fan_in;               /* of its layer (PyTorch's bound 1/sqrt(fan_in)) */
    size_t rows, cols;        /* the whole tensor */
    size_t row0, n_rows, col0, n_cols; /* the part's piece */
};

/* A model's tables while a workload fills them; `init` keeps each added
 * tensor's spec for sb_model_table_init. */
struct sb_model_table {
    struct sb_model *m;
    struct sb_tensor_spec *init; /* (cap_tensors) */
    int cap_layers, cap_tensors;
    size_t off;                  /* floats laid out so far */
};

/* The part `part` (NULL: the whole model, one slot) checked against a
 * model of whole_layers layers: 0 <= first_layer, 1 <= n_layers, first_layer
 * + n_layers <= whole_layers, 1 <= tp_size, 0 <= tp_rank < tp_size, 1 <=
 * slots; the checked part in *out. SB_ERR_USAGE naming `workload` and the
 * field otherwise. */
sb_status sb_part_check(const struct sb_part *part, int whole_layers, const char *workload,
                        struct sb_part *out);

/* Tensor-parallel rank `rank` of `size` ranks takes [*first, *first + *n)
 * of `width` (the first width % size ranks one more, as sb_split_range).
 * SB_ERR_USAGE naming `what` if width < size (a rank with nothing). */
sb_status sb_tp_shard(int width, int size, int rank, const char *what, int *first, int *n);

/* Starts m's tables with room for cap_layers layers and cap_tensors
 * tensors. SB_ERR_NOMEM; sb_model_table_free releases them. */
sb_status sb_model_table_begin(struct sb_model_table *t, struct sb_model *m, int cap_layers,
                               int cap_tensors);

/* Appends a layer `name` with per-sample activation shapes in and out (3
 * dims each, unused trailing dims 1); the tensors added next are its. */
void sb_model_table_add_layer(struct sb_model_table *t, const char *name, const int in_shape[3],
                        const int out_shape[3]);

/* Appends tensor s (the part's piece of it, n_rows * n_cols floats) to the
 * last layer and returns its offset in the part's flat buffer. */
size_t sb_model_table_add_tensor(struct sb_model_table *t, const struct sb_tensor_spec *s);

/* Appends tensor `name` of `count` floats at *off to m's tensor table
 * (m->tensors must have room; tp_split and layer left 0 for the caller) and
 * returns its offset; *off advances. For a workload that fills its tables
 * by hand rather than with struct sb_model_table. */
size_t sb_model_add_tensor(struct sb_model *m, const char *name, size_t count, size_t *off);

/* Ends the tables (m->n_params = the floats laid out). */
void sb_model_table_end(struct sb_model_table *t);

/* Initialises m->params (allocated, tables complete) with PyTorch's
 * default for nn.Linear and nn.Conv2d (Kaiming-uniform with a = sqrt(5):
 * every weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))): one
 * generator stream per whole-model tensor (seed, 1000 + global_index), run
 * over the whole tensor in row-major order, keeping the part's piece; so a
 * part holds exactly the whole model's values, and changing one layer
 * leaves the others' values unchanged. In place on a host-memory backend,
 * else in a host copy uploaded once. Errors: SB_ERR_NOMEM naming `workload`;
 * the upload's. */
sb_status sb_model_table_init(const struct sb_model_table *t, uint64_t seed,
                              const char *workload);

/* The summaries of m's layers (m holds the whole model: part.tp_size 1;
 * a part's layers are its own) into out[0, cap); returns how many
 * (min(m->n_layers, cap)). */
int sb_model_layer_summaries(const struct sb_model *m, struct sb_layer_summary *out, int cap);

/* Frees the table's specs (not the model's tables, which the model keeps). */
void sb_model_table_free(struct sb_model_table *t);

/* The checks every part op makes: slot in [0, slots), n in [1, max_batch]
 * (forward), the first part given no din, a dout on every part but the
 * last. SB_ERR_INTERNAL naming `workload`. */
sb_status sb_part_check_forward(const struct sb_model *m, int slot, int n, const char *workload);
sb_status sb_part_check_backward(const struct sb_model *m, int slot, const float *dout,
                                 const float *din, const char *workload);

/* The check of the whole-model ops (forward, backward, predict): m holds
 * every layer and one tp shard of one. SB_ERR_INTERNAL naming `workload`
 * otherwise (a part is run with the part ops). */
sb_status sb_part_check_whole(const struct sb_model *m, const char *workload);

/* Whether m holds the whole model's last layer (its forward ends in the
 * loss). */
static inline int sb_part_is_last(const struct sb_model *m)
{
    return m->part.first_layer + m->part.n_layers == m->whole_layers;
}

#endif
