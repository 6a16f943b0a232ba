/* A tensor-parallel shard's tensors against the whole model's: which whole
 * tensor each is, where its values go in the whole model's layout (for
 * evaluation's and --save-params' gather), and the check that the
 * replicated tensors are equal on every rank of a tp group (docs/tensor.md,
 * "Why the replicated tensors stay equal"). workload.h states how a shard
 * holds each tensor: a column-parallel one a block of rows of the whole
 * (rows, cols) matrix, a row-parallel one a block of columns of every row,
 * a replicated one all of it; every split is even (the strategy checks). */
#ifndef SB_TP_SHARDS_H
#define SB_TP_SHARDS_H

#include "comm/comm.h"
#include "core/status.h"
#include "workloads/workload.h"

/* whole_tensor[i] (shard->n_tensors) = the index in `whole`'s tensor table
 * of shard tensor i (by name). SB_ERR_INTERNAL for a tensor the whole model
 * lacks, or a row-parallel one that states no rows. */
sb_status sb_tp_shard_match(const struct sb_model *shard, const struct sb_model *whole,
                            int *whole_tensor);

/* Checks that tp shard `shard` (a part built with tp_size T) holds exactly
 * 1/T of each split tensor of `whole` (matched by name) and all of each
 * replicated one, and adds its split tensors to *n_split. Errors:
 * SB_ERR_USAGE naming --tp and the tensor that does not divide evenly. */
sb_status sb_tp_shard_check_even(const struct sb_model *shard, const struct sb_model *whole,
                                 int T, int *n_split);
/* Writes the values `mine` (host, shard->n_params floats in the shard's
 * layout) of tp rank `tp_rank` into `out` (host, whole->n_params floats in
 * the whole model's layout): each split tensor's block of rows or columns;
 * the replicated ones only from tp rank 0 (the other ranks leave them
 * untouched, so that summing every rank's zero-initialised `out` gives the
 * whole model exactly). */
void sb_tp_shard_place(const struct sb_model *shard, const struct sb_model *whole,
                       const int *whole_tensor, int tp_rank, const float *mine, float *out);

/* Collective over tp (the tp group, host memory): tp rank 0 broadcasts each
 * replicated tensor of m->params and every rank compares its own byte for
 * byte. SB_ERR_INTERNAL naming the tensor where any rank differs; the
 * communicator's errors; SB_ERR_NOMEM. */
sb_status sb_tp_check_replicated(const struct sb_model *m, struct sb_comm *tp);

#endif
