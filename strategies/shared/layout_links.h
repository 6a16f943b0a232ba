/* How much of a host's link each axis of a dp x tp x pp layout gets, and the
 * all-reduce the data-parallel world communicator runs across hosts: the
 * link terms of the layout model (layout_model.h; docs/layouts.md, "Flows
 * that share a host's link").
 *
 * Sharing. On the cluster fixture (and on a real cluster whose hosts have one
 * NIC each) every message between two hosts passes the sending host's one
 * shaped link out and the receiving host's link in. The groups of one axis
 * (every dp group, one per tp rank and stage; every tp group, one per
 * replica and stage) run their collectives at the same time, so a host's
 * link carries one flow per member of a group whose next member in the ring
 * (dp, tp) or next stage (pp) is on another host. Flows through one link
 * share it (processor sharing, max-min fair: TCP over one bottleneck; the
 * kernel's tbf is one queue): n flows of sizes s_1..s_n that start together,
 * the flow of size s_i finishes after
 *     T_i = sum_j min(s_j, s_i) / B
 * (Kleinrock, "Queueing Systems, Vol. 2", 1976, processor sharing; the
 * bottleneck's max-min fair share, Bertsekas & Gallager, "Data Networks",
 * 1992, section 6.5.2), so to that flow the link has the bandwidth
 * B / k_i, k_i = sum_j min(s_j, s_i) / s_i: n equal flows k = n, a flow
 * beside much smaller ones k ~ 1. The share of stage s's groups is the
 * largest k over the links (each host's out and in) its flows cross.
 *
 * Hierarchical. The data-parallel strategies adopt the world as their dp
 * communicator (comm/grid.h), and the "mpi" world of 4 or more ranks groups
 * itself into hosts (comm/factory.c), so --allreduce auto there picks
 * sb_allreduce_choose_hosts per bucket: on H >= 2 hosts of L >= 2 ranks the
 * hierarchical all-reduce (mpi_hier.c). Its cross stage runs L all-reduces
 * of M/L at once, one per local rank, all through each host's one link:
 * each gets B / L (the sharing above, k = L), so that stage moves the
 * whole M across each host link, not M/L. */
#ifndef SB_LAYOUT_LINKS_H
#define SB_LAYOUT_LINKS_H

#include "comm/cost_model.h"
#include "comm/grid.h"

/* The share k_s >= 1 (above) of the cross-host link each stage's groups of
 * `axis` (SB_COMM_ROLE_DP, _TP or _PP) get in a dp x tp x pp grid in `order`
 * on hosts of ranks_per_host consecutive ranks: flows from every rank to its
 * ring successor along the axis (dp, tp: coordinate + 1 mod size; pp: stage
 * s to s + 1, the forward activations; the gradients come back the same
 * way), a flow weighing stage_bytes[its pp coordinate] (what one group of
 * that stage sends per step, any unit; 0 counts as no flow), that crosses
 * hosts. share[s] (pp entries) gets max over the host links (out and in)
 * that stage s's flows cross of sum_j min(w_j, w_s) / w_s; 1 where stage
 * s's flows cross no host or weigh 0. Returns 0, or -1 for sizes < 1 or an
 * axis other than those three (share untouched). */
int sb_layout_link_share(int dp, int tp, int pp, enum sb_rank_order order,
                         enum sb_comm_role axis, int ranks_per_host, const double *stage_bytes,
                         double *share);

/* The link `l` as one of `share` (>= 1) flows through it sees it: its
 * bandwidth, and every sized class's, divided by share, and every class's
 * lower bound too, so that a message of m bytes is priced in the class of
 * share · m, the bytes the link carries while it passes (the flows' messages
 * go at once: what a lone message of that size pays per message, the probe's
 * ping-pong, is paid once for all of them). Its time is then
 * α_c + share · m / B_c, c the class of share · m (docs/layouts.md, "Flows
 * that share a link are priced at their sum's size", 2026-11-29). α and γ
 * kept. */
struct sb_link sb_link_shared(const struct sb_link *l, double share);

/* Whether ddp's world communicator of `ranks` ranks on hosts of
 * ranks_per_host runs its all-reduces hierarchically where auto picks it:
 * ranks >= 4 (comm/factory.c groups only those), ranks_per_host >= 2 and
 * hosts = ranks / ranks_per_host >= 2 whole hosts. Returns the hosts, or 0. */
int sb_layout_world_hosts(int ranks, int ranks_per_host);

/* One all-reduce of `bytes` over the world of hosts x per_host ranks as
 * --allreduce auto runs it there (sb_allreduce_choose_hosts): the
 * hierarchical one costed by sb_cost_hierarchical_allreduce_s with its cross
 * stage on inter shared by the per_host concurrent shards (B / per_host),
 * its cross algorithm sb_allreduce_choose(bytes / per_host, hosts); or the
 * flat algorithm on inter (a ring of blocks of consecutive ranks has one flow
 * per host link: not shared). *algo gets the algorithm chosen. Seconds. */
double sb_layout_world_allreduce_s(const struct sb_link *intra, const struct sb_link *inter,
                                   int hosts, int per_host, double bytes,
                                   enum sb_allreduce_algo *algo);

#endif
