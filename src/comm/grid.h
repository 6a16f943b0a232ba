/* Process grids: the ranks of a communicator (the job's world) laid out
 * as dp x tp x pp, with one communicator per axis, as Megatron-LM lays out
 * data, tensor and pipeline parallelism (Narayanan et al., "Efficient
 * Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
 * SC'21, section 3; megatron/core/parallel_state.py).
 *
 * A rank's coordinates are (dp_rank, tp_rank, pp_rank). In the default
 * order tp is innermost, then dp, then pp:
 *
 *     rank = tp_rank + tp * (dp_rank + dp * pp_rank)         (tp-dp-pp)
 *
 * so the ranks of one tensor-parallel group are neighbours (one host, its
 * fastest links), and, for 16 ranks with tp 2 and pp 4 (dp 2): tp groups
 * [0,1] [2,3] ..., dp groups [0,2] [1,3] [4,6] ..., pp groups
 * [0,4,8,12] [1,5,9,13] .... The alternative order puts pp before dp:
 *
 *     rank = tp_rank + tp * (pp_rank + pp * dp_rank)         (tp-pp-dp)
 *
 * Each axis communicator is a split of the parent (sb_comm_split) ranked
 * by the coordinate along its axis, so in the dp communicator rank i is
 * the replica with dp_rank i, in the pp communicator rank s is stage s,
 * and a 1-deep grid (dp = world size, tp = pp = 1) has a dp communicator
 * with the world's members in the world's order. The data-parallel
 * strategies take the world itself as that communicator (sb_grid_adopt),
 * so that it keeps the world's all-reduce set-up. */
#ifndef SB_GRID_H
#define SB_GRID_H

#include "comm/comm.h"
#include "core/status.h"

enum sb_rank_order {
    SB_RANK_ORDER_TP_DP_PP = 0, /* Megatron-LM's default: tp innermost, then dp, then pp */
    SB_RANK_ORDER_TP_PP_DP,     /* tp innermost, then pp, then dp */
    SB_RANK_ORDER_COUNT
};

/* A rank's place in a dp x tp x pp grid. */
struct sb_grid_coords {
    int dp_rank, tp_rank, pp_rank;
};

struct sb_grid {
    struct sb_comm *world; /* the parent (not owned; adopted: = dp_comm, owned) */
    int dp, tp, pp;        /* the axes' sizes; dp * tp * pp = world->size */
    enum sb_rank_order order;
    struct sb_grid_coords me; /* this rank's coordinates */
    /* One communicator per axis (owned), roles SB_COMM_ROLE_DP, _TP, _PP,
     * each ranked by the coordinate along its axis (an adopted 1-deep
     * grid: dp_comm = world, tp_comm = pp_comm = NULL). */
    struct sb_comm *dp_comm, *tp_comm, *pp_comm;
    /* The previous and next stage of this rank's pipeline, as ranks of
     * pp_comm (= their stage numbers) and of world; -1 at the first
     * (prev) and last (next) stage: the pipeline is not a ring. */
    int pp_prev, pp_next;
    int pp_prev_world, pp_next_world;
};

/* The rank of the parent communicator at coordinates c of a dp x tp x pp
 * grid in `order` (the formulas above); -1 when c is outside the grid. */
int sb_grid_rank_of(int dp, int tp, int pp, enum sb_rank_order order,
                    struct sb_grid_coords c);

/* The coordinates of `rank` (0 .. dp*tp*pp - 1) in that grid: the inverse
 * of sb_grid_rank_of. */
struct sb_grid_coords sb_grid_coords_of(int dp, int tp, int pp, enum sb_rank_order order,
                                        int rank);

/* Whether the groups along `axis` (SB_COMM_ROLE_DP, _TP or _PP) of a dp x
 * tp x pp grid in `order` span more than one host, the ranks placed on
 * hosts in blocks of ranks_per_host consecutive world ranks (mpirun's
 * --map-by ppr:R:node, stratbench's --ranks-per-host): 1 when any group
 * has members on two hosts, 0 when every group stays inside one host (tp
 * innermost: tp groups do when R % tp == 0), -1 for a bad axis or a size <
 * 1. The α–β model prices such an axis's collectives on the cross-host
 * link, the others on the intra-host link (docs/layouts.md). */
int sb_grid_axis_crosses_hosts(int dp, int tp, int pp, enum sb_rank_order order,
                               enum sb_comm_role axis, int ranks_per_host);

/* Whether the point-to-point pair from pipeline stage `from` to stage `to`
 * (0 .. pp - 1: a pipeline boundary, s to s + 1, or interleaved's wrap from
 * pp - 1 to 0) crosses hosts, the ranks placed as in
 * sb_grid_axis_crosses_hosts: 1 when the member of stage `from` of any
 * (dp, tp) coordinate sits on another host than its partner of stage `to`,
 * 0 when every pair shares a host, -1 for a size < 1 or a stage outside
 * 0 .. pp - 1. A pipeline of 4 stages on 2 hosts of 2 crosses hosts at one
 * boundary of its three (1 to 2), not at all (docs/layouts.md, "The
 * pipeline's boundaries, one by one"). */
int sb_grid_stages_cross_hosts(int dp, int tp, int pp, enum sb_rank_order order, int from, int to,
                               int ranks_per_host);

/* Lays the members of `world` out as dp x tp x pp in `order` and makes
 * the three axis communicators by sb_comm_split (so any communicator with
 * split works: mpi, local, nccl, staged). Collective over world: every
 * member calls it with the same sizes and order. Errors: SB_ERR_USAGE
 * (before any split, on every member alike) when a size is < 1, when
 * dp * tp * pp != world->size (naming --replicas, --tp and --stages) or
 * the order is unknown; those of sb_comm_split (SB_ERR_USAGE for a
 * communicator without split, SB_ERR_COMM, SB_ERR_NOMEM). */
sb_status sb_grid_create(struct sb_comm *world, int dp, int tp, int pp, enum sb_rank_order order,
                         struct sb_grid **out);

/* The 1-deep grid of a data-parallel strategy (ddp, hierarchical, zero):
 * dp = world->size, tp = pp = 1, whose dp communicator is `world` itself,
 * adopted rather than split, so that the dp axis keeps everything world
 * was made with (sb_comm_world_create: --allreduce's algorithm, the host
 * groups of the hierarchical all-reduce, NCCL or staged on GPUs), tagged
 * SB_COMM_ROLE_DP as sb_comm_world_create tags it; a split would make a
 * plain communicator without that set-up. Ranks are world's (me.dp_rank
 * = world->rank). The tp and pp axes have one member each and no
 * communicator (tp_comm and pp_comm NULL: nothing runs on them); pp_prev,
 * pp_next and their world ranks are -1. Takes
 * ownership of world: sb_grid_destroy destroys it (and so does a failure
 * here). Not collective. Errors: SB_ERR_NOMEM. */
sb_status sb_grid_adopt(struct sb_comm *world, struct sb_grid **out);

/* Destroys the axis communicators and the grid (not world, unless the
 * grid adopted it: sb_grid_adopt); safe on NULL. */
void sb_grid_destroy(struct sb_grid *g);

/* "tp-dp-pp" or "tp-pp-dp"; "unknown" out of range. */
const char *sb_rank_order_name(enum sb_rank_order order);

/* The order named `name` (as sb_rank_order_name writes it) into *out.
 * Errors: SB_ERR_USAGE for any other name. */
sb_status sb_rank_order_parse(const char *name, enum sb_rank_order *out);

#endif
