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

/* The hook's state: the communicator it sums over and the first error. */
struct sb_tp_ops {
    struct sb_comm *comm; /* the tp communicator (not owned) */
    sb_status st;         /* first error of a hook call (SB_OK: none) */
};

/* Installs the piece as m's tensor-parallel hook over `comm` (m->tp_allreduce,
 * m->tp_ctx); t must outlive the model's passes. */
void sb_tp_ops_install(struct sb_tp_ops *t, struct sb_model *m, struct sb_comm *comm);

/* The hook (sb_tp_allreduce_fn, ctx = struct sb_tp_ops): sums buf[0,
 * count) in place over t->comm with one counted all-reduce (4 count bytes).
 * After the first error it does nothing and keeps that error in t->st. */
void sb_tp_ops_allreduce(void *ctx, float *buf, size_t count);

/* The first error since the last call, and clears it (SB_OK: none): the
 * strategy checks it after each forward and backward. */
sb_status sb_tp_ops_take_error(struct sb_tp_ops *t);

/* What tensor parallelism moves per step on one tp rank (the formulas). */
struct sb_tp_traffic {
    long forward_calls, backward_calls; /* collectives per step: all-reduces (with
                                         * sequence parallelism: an all-gather and a
                                         * reduce-scatter each way, per block) */
    double floats_per_call;             /* each call's message, floats (b x s x h; the
                                         * mlp: the mean over its calls) */
};

/* The mlp's tensor parallelism per step (workloads/dense.h pairs the
 * hidden layers: fc1 column-, fc2 row-parallel, ...): for each of `pairs`
 * column/row pairs one all-reduce forward (g: the row layer's partial
 * output, b x (that layer's output width) floats) and one backward (f: the
 * column layer's partial input gradient, b x (its input width) floats),
 * except that the first pair's column layer reads the images, whose
 * gradient no one needs: m x pairs forward, m x (pairs - 1) backward, for
 * m micro-batches of b samples. widths: per pair, the row layer's output
 * width and the column layer's input width (row_out[i], col_in[i]). The
 * floats per step are returned in *forward_floats and *backward_floats
 * (pairs of different widths make calls of different sizes). */
void sb_tp_mlp_traffic(int pairs, const int *row_out, const int *col_in, double b,
                       int micro_batches, struct sb_tp_traffic *out, double *forward_floats,
                       double *backward_floats);

/* A transformer's tensor parallelism per step: `blocks` blocks of s
 * tokens x h width, b samples per micro-batch, m micro-batches: 2 m x
 * blocks collectives forward and 2 m x blocks backward, each of b s h
 * floats (Shoeybi et al. 2019, section 3; with sequence parallelism, the
 * same count and bytes as all-gathers and reduce-scatters: Korthikanti et
 * al. 2022, section 4.2.2). */
struct sb_tp_traffic sb_tp_block_traffic(int blocks, double b, double s, double h,
                                         int micro_batches);

/* The α–β time of one step's tp collectives on `link` over tp ranks: the
 * calls of `t`, each a ring all-reduce of floats_per_call x 4 bytes
 * (cost_model.h's sb_cost_ring_allreduce_s: 2(T-1)(α + M/(T B))), s. A
 * sequence-parallel all-gather plus reduce-scatter costs the same as that
 * all-reduce (a ring all-reduce is a reduce-scatter and an all-gather). */
double sb_tp_traffic_seconds(const struct sb_tp_traffic *t, const struct sb_link *link, int tp);

#endif
