/* A tensor-parallel shard against the whole model; see tp_shards.h. */
#include "strategies/shared/tp_shards.h"

#include <stdlib.h>
#include <string.h>

sb_status sb_tp_shard_match(const struct sb_model *shard, const struct sb_model *whole,
                            int *whole_tensor)
{
    for (int i = 0; i < shard->n_tensors; i++) {
        whole_tensor[i] = -1;
        for (int j = 0; j < whole->n_tensors && whole_tensor[i] < 0; j++)
            if (strcmp(whole->tensors[j].name, shard->tensors[i].name) == 0) whole_tensor[i] = j;
        if (whole_tensor[i] < 0)
            return sb_error(SB_ERR_INTERNAL, "tp shard: tensor %s not in the whole model",
                            shard->tensors[i].name);
        if (shard->tensors[i].tp_split == SB_TP_ROW && whole->tensors[whole_tensor[i]].rows == 0)
            return sb_error(SB_ERR_INTERNAL, "tp shard: %s states no rows",
                            shard->tensors[i].name);
    }
    return SB_OK;
}

sb_status sb_tp_shard_check_even(const struct sb_model *shard, const struct sb_model *whole,
                                 int T, int *n_split)
{
    for (int i = 0; i < shard->n_tensors; i++) {
        const struct sb_tensor_desc *t = &shard->tensors[i], *e = NULL;
        for (int j = 0; j < whole->n_tensors && !e; j++)
            if (strcmp(whole->tensors[j].name, t->name) == 0) e = &whole->tensors[j];
        if (t->tp_split != SB_TP_REPLICATED) (*n_split)++;
        int even = e && (t->tp_split == SB_TP_REPLICATED ? t->count == e->count
                                                         : t->count * (size_t)T == e->count);
        if (!even)
            return sb_error(SB_ERR_USAGE, "--tp: %d does not divide the split dimension of %s "
                            "(%zu floats: the hidden width or the heads)", T, t->name,
                            e ? e->count : 0);
    }
    return SB_OK;
}

void sb_tp_shard_place(const struct sb_model *shard, const struct sb_model *whole,
                       const int *whole_tensor, int tp_rank, const float *mine, float *out)
{
    for (int i = 0; i < shard->n_tensors; i++) {
        const struct sb_tensor_desc *d = &shard->tensors[i];
        const struct sb_tensor_desc *e = &whole->tensors[whole_tensor[i]];
        if (d->tp_split == SB_TP_REPLICATED) {
            if (tp_rank == 0) memcpy(out + e->offset, mine + d->offset, d->count * sizeof *out);
        } else if (d->tp_split == SB_TP_COLUMN) {
            /* rows [r n, (r+1) n): one contiguous block in row-major order */
            memcpy(out + e->offset + (size_t)tp_rank * d->count, mine + d->offset,
                   d->count * sizeof *out);
        } else {
            size_t rows = e->rows, cols = e->count / rows, nc = d->count / rows;
            for (size_t row = 0; row < rows; row++)
                memcpy(out + e->offset + row * cols + (size_t)tp_rank * nc,
                       mine + d->offset + row * nc, nc * sizeof *out);
        }
    }
}

sb_status sb_tp_check_replicated(const struct sb_model *m, struct sb_comm *tp)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const struct sb_tensor_desc *d = &m->tensors[i];
        if (d->tp_split != SB_TP_REPLICATED) continue;
        const float *mine = m->params + d->offset;
        float *ref = malloc(d->count * sizeof *ref);
        if (!ref) return sb_error(SB_ERR_NOMEM, "tp shard: out of memory");
        memcpy(ref, mine, d->count * sizeof *ref);
        sb_status st = sb_comm_broadcast(tp, ref, d->count, 0);
        double differ = !st && memcmp(ref, mine, d->count * sizeof *ref) != 0;
        free(ref);
        if (!st) st = sb_comm_allreduce_f64(tp, &differ, 1);
        if (st) return st;
        if (differ > 0)
            return sb_error(SB_ERR_INTERNAL, "tp shard: the replicated tensor %s differs "
                            "between the ranks of a tp group", d->name);
    }
    return SB_OK;
}
