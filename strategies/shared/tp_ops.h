/* Megatron-LM's conjugate operators as a piece over a tensor-parallel
 * communicator (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion
 * Parameter Language Models Using Model Parallelism", section 3, figure 3):
 *
 *   f: identity forward, all-reduce backward  (before a column-parallel
 *      layer: the input gradients of the shards are partial sums);
 *   g: all-reduce forward, identity backward  (after a row-parallel layer:
 *      the shards' outputs are partial sums).
 *
 * A workload calls one hook where either all-reduce falls (workload.h's
 * sb_tp_allreduce_fn: g's forward, f's backward); this piece is that hook,
 * counted on the tp communicator (the report's comm.by_role.tp). The
 * formulas of what it moves per step are here too, as pure functions a
 * cost model or `predict` can call: a column/row pair of the mlp costs one
 * all-reduce forward and one backward of b x width floats, a transformer
 * block two of each of b x s x h floats (Korthikanti et al. 2022,
 * "Reducing Activation Recomputation in Large Transformer Models",
 * section 4.2.2: with sequence parallelism each becomes an all-gather and
 * a reduce-scatter of the same bytes). */
#ifndef SB_TP_OPS_H
#define SB_TP_OPS_H

#include <stddef.h>

#include "comm/comm.h"
#include "comm/cost_model.h"
#include "core/status.h"
#include "workloads/workload.h"

#define SB_TP_MAX 64 /* tp ranks a group may have (--tp's range) */

/* The hook's state: the communicator it sums over and the first error. */
struct sb_tp_ops {
    struct sb_comm *comm; /* the tp communicator (not owned) */
    sb_status st;         /* first error of a hook call (SB_OK: none) */
    size_t counts[SB_TP_MAX]; /* the blocks of an all-gather or reduce-scatter */
};

/* Installs the piece as m's tensor-parallel hooks over `comm` (m->tp_allreduce,
 * and with sequence parallelism m->tp_allgather and m->tp_reduce_scatter;
 * m->tp_ctx); t must outlive the model's passes. */
void sb_tp_ops_install(struct sb_tp_ops *t, struct sb_model *m, struct sb_comm *comm);

/* Sequence parallelism's pair (workload.h's sb_tp_allgather_fn and
 * sb_tp_reduce_scatter_fn, ctx = struct sb_tp_ops), counted on t->comm
 * as the collectives they are: one all-gather or reduce-scatter of the
 * whole buffer (4 x count x T bytes, nccl-tests' convention; the same as
 * the all-reduce each pair replaces). Errors kept as the all-reduce's. */
void sb_tp_ops_allgather(void *ctx, const float *shard, float *whole, size_t count);
void sb_tp_ops_reduce_scatter(void *ctx, const float *whole, float *shard, size_t count);

/* The hook (sb_tp_allreduce_fn, ctx = struct sb_tp_ops): sums buf[0,
 * count) in place over t->comm with one counted all-reduce (4 count bytes).
 * After the first error it does nothing and keeps that error in t->st. */
void sb_tp_ops_allreduce(void *ctx, float *buf, size_t count);

/* The first error since the last call, and clears it (SB_OK: none): the
 * strategy checks it after each forward and backward. */
sb_status sb_tp_ops_take_error(struct sb_tp_ops *t);

/* What tensor parallelism moves per step on one tp rank: the hook's calls
 * and their floats (each call's message, nccl-tests' bytes = 4 x floats). */
struct sb_tp_traffic {
    long forward_calls, backward_calls;    /* collectives per step */
    double forward_floats, backward_floats; /* summed over those calls */
};

/* The tp traffic of one step of model part m (a tp shard) for
 * micro_batches micro-batches of b samples, read off its layer table
 * (workload.h: a row-parallel layer's output and a column-parallel layer's
 * input are whole): forward, one all-reduce per row-parallel weight (g) of
 * b x its layer's out_floats; backward, one per run of consecutive
 * column-parallel tensors (f: q, k and v share one input, so one
 * all-reduce of its gradient), of b x its layer's in_floats, except a run
 * in the whole model's first layer, whose input (the images) needs no
 * gradient. For the mlp's column/row pairs: per pair 1 forward (b x the
 * row layer's output) and 1 backward (b x the column layer's input; none
 * for fc1); for a transformer block 2 forward and 2 backward of b x s x h
 * (sb_tp_block_traffic). */
struct sb_tp_traffic sb_tp_model_traffic(const struct sb_model *m, double b, int micro_batches);

/* A transformer's tensor parallelism per step (Shoeybi et al. 2019,
 * section 3: two all-reduces forward and two backward per block): `blocks`
 * blocks of s tokens x h width, b samples per micro-batch, m micro-batches:
 * 2 m blocks all-reduces each way of b s h floats each. With sequence
 * parallelism (Korthikanti et al. 2022, section 4.2.2) each all-reduce
 * becomes an all-gather and a reduce-scatter of the same b s h floats
 * (counted as the collectives they are: twice the calls, the same
 * bytes per call). The closed form, for a cost model or predict. */
struct sb_tp_traffic sb_tp_block_traffic(int blocks, double b, double s, double h,
                                         int micro_batches);

/* A transformer's tp collectives per step under sequence parallelism (as
 * workloads/vit_sp.c runs them), L blocks, m micro-batches of b samples,
 * s tokens, h width: per block 2 all-gathers and 2 reduce-scatters forward
 * and 2 of each backward, each of b s h floats (the whole buffer); 2
 * all-reduces per block of the LayerNorms' weight and bias gradients (2h
 * floats each: sums over the rank's tokens); and one all-gather of b s h
 * forward (the head reads the class token, rank 0's) and one backward (the
 * replicated embedding's gradient). */
struct sb_tp_sp_traffic {
    long allgather_calls, reduce_scatter_calls, allreduce_calls;
    double allgather_floats, reduce_scatter_floats, allreduce_floats;
};
struct sb_tp_sp_traffic sb_tp_sp_block_traffic(int blocks, double b, double s, double h,
                                               int micro_batches);

/* The transformer blocks of model part m (a tp shard) as sequence
 * parallelism shards them: the layers holding split tensors whose input is
 * a sequence ((tokens, width), in_shape[1] > 1), their count in *blocks and
 * the last one's tokens and width (0 and 0 when there is none). */
void sb_tp_sp_blocks(const struct sb_model *m, int *blocks, double *tokens, double *width);

/* The α–β seconds of one step's tp all-reduces over `tp` ranks on `link`
 * (cost_model.h): each call an all-reduce of its 4 x floats bytes by the
 * algorithm sb_allreduce_choose picks for the mean call (algo AUTO) or by
 * `algo`; the α–β costs are linear in the bytes for one algorithm, so the
 * mean call stands for all. A sequence-parallel all-gather plus
 * reduce-scatter costs a ring all-reduce (a ring all-reduce is a
 * reduce-scatter then an all-gather). 0 for tp <= 1 or no calls. */
double sb_tp_traffic_seconds(const struct sb_tp_traffic *t, const struct sb_link *link, int tp,
                             enum sb_allreduce_algo algo);

#endif
