/* The α–β (Hockney) cost model of communication: how long moving M bytes
 * takes on links of latency α (seconds per message) and bandwidth B (bytes
 * per second; β = 1/B seconds per byte), per algorithm and per strategy.
 *
 * Sources:
 * - Hockney, "The communication challenge for MPP", Parallel Computing 20
 *   (1994): T(m) = α + m/B for one message of m bytes.
 * - Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
 *   Operations in MPICH", IJHPCA 19(1) 2005, section 4: recursive doubling
 *   lg p (α + Mβ + Mγ); ring (reduce-scatter + all-gather)
 *   2(p-1)α + 2(p-1)/p Mβ + (p-1)/p Mγ; the non-power-of-two pre/post step.
 * - Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters
 *   of workstations", JPDC 69(2) 2009: the ring is bandwidth optimal,
 *   2(p-1)/p M bytes through each rank's link.
 * - nccl-tests, doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n, so a ring's
 *   busbw equals the link bandwidth.
 * - Jiang et al., "A Unified Architecture for Accelerating Distributed DNN
 *   Training in Heterogeneous GPU/CPU Clusters" (BytePS), OSDI 2020,
 *   section 3: with n workers and k servers each pushing/pulling through
 *   its own link, a step's communication takes max(M/B, nM/(kB)) each way.
 * γ (seconds per byte reduced) is the reduction's arithmetic (Chan et al.,
 * "Collective communication: theory, practice, and experience", CCPE 19(13)
 * 2007, table 1: γ per byte of the vector reduced; ring (p-1)/p Mγ,
 * recursive doubling lg p Mγ); the probe measures it (src/job/probe.h: the
 * comm's own add loop over floats), a report without it leaves it 0, the
 * choice of algorithm (allreduce_algo.h) uses a reference value.
 * All functions are pure; units: seconds, bytes, bytes per second. */
#ifndef SB_COST_MODEL_H
#define SB_COST_MODEL_H

#include "comm/allreduce_algo.h"
#include "core/link.h"

/* The two link classes of a job on hosts of several ranks each: the link
 * between two ranks of one host (shared memory, NVLink) and the link
 * between ranks of two hosts (the network). A job on one host has only
 * intra; a job of one rank per host only inter; the probe measures both
 * where it can (src/job/probe.c) and predict takes either per flag. */
struct sb_link_classes {
    struct sb_link intra; /* within a host */
    struct sb_link inter; /* across hosts */
};

/* The link a communicator's messages cross: &l->inter when its members
 * span hosts (crosses_hosts != 0), else &l->intra. */
const struct sb_link *sb_link_crossed(const struct sb_link_classes *l, int crosses_hosts);

/* One message of `bytes`: α + bytes / B (Hockney); on a sized link (every
 * function below alike) α and B are those of the class of the size each
 * message has: M/p for the ring's blocks, M for recursive doubling and the
 * binomial tree's whole messages. The rings' steps and recursive
 * doubling's swaps are exchanges (both ends send at once) and are priced
 * with the link's exchange classes where the probe measured them
 * (core/link.h, sb_link_exchange; docs/layouts.md, "A ring's step is an
 * exchange", 2026-11-29); one-way sends (this function, the tree, a pipeline
 * boundary) with its one-way classes. */
double sb_cost_message_s(const struct sb_link *l, double bytes);

/* Ring all-reduce (reduce-scatter then all-gather, Patarasuk & Yuan 2009)
 * of M bytes over p ranks: 2(p-1)(α + M/(pB)) + (p-1)/p Mγ; 0 for p <= 1. */
double sb_cost_ring_allreduce_s(const struct sb_link *l, int p, double bytes);

/* Recursive-doubling all-reduce (Thakur et al. 2005, section 4.4) of M
 * bytes over p ranks, p' the largest power of two <= p:
 * lg p' (α + M/B + Mγ), plus, when p != p', a pre-step (α + M/B + Mγ: the
 * extra ranks hand their data to a partner) and a post-step (α + M/B: the
 * result handed back). 0 for p <= 1. */
double sb_cost_recursive_doubling_s(const struct sb_link *l, int p, double bytes);

/* Binomial-tree reduce then binomial-tree broadcast, each of ceil(lg p)
 * rounds of one whole message: 2 ceil(lg p) (α + M/B) + ceil(lg p) Mγ. This
 * is what Open MPI 4.1's libnbc ran for ddp's in-place MPI_Iallreduce at
 * every size in the measurements of issue 8 (2 hosts, 1 Gbit/s: 127 ms
 * measured, 2M/B = 125 ms predicted; its ring, forced with
 * --mca coll_libnbc_iallreduce_algorithm 1, took 73 ms). 0 for p <= 1. */
double sb_cost_binomial_allreduce_s(const struct sb_link *l, int p, double bytes);

/* Reduce-scatter of M bytes (the whole buffer; each rank keeps about M/p)
 * over p ranks as the mpi communicator runs it in the ring's blocks
 * (src/comm/mpi_allreduce.c, sb_rs_start: the first half of the ring
 * all-reduce, Patarasuk & Yuan 2009; Thakur et al. 2005, section 4): p-1
 * steps, each sending one block of M/p to the next rank and reducing the
 * one received: (p-1)(α + M/(pB)) + (p-1)/p Mγ for one unit. M split into
 * u >= 1 units whose rings are in flight together (zero's units: stage 3
 * prefetches the next layer, stages 1-2 start every unit's all-gather at
 * once) pays α once more per unit after the first, not p-1 times: the
 * units' rings take their steps at the same time, as the segments of a
 * pipelined collective do (Pješivac-Grbović et al., "Performance analysis
 * of MPI collective operations", Cluster Computing 10(2) 2007: a chain of
 * P ranks with n_s segments takes P + n_s - 2 stage times, not
 * (P - 1) n_s), while every byte still crosses each link once:
 *   (p-2+u)α + (p-1)M/(pB) + (p-1)/p Mγ.
 * Measured on the cluster fixture (docs/cost-model.md, "What the 2-host α
 * stands for"): splitting M into 3 units in flight together added about the
 * same at 2, 4 and 8 hosts, not (p-1)-fold. 0 for p <= 1; u < 1 counts as 1.
 * (Open MPI 4.1's libnbc MPI_Ireduce_scatter, a binomial reduce of the
 * whole buffer to rank 0 then a linear scatter, ceil(lg p)(α + M/B) + α +
 * (p-1)M/(pB), is what ran before stratbench ran its own ring.) */
double sb_cost_reduce_scatter_s(const struct sb_link *l, int p, double bytes, int units);

/* All-gather of M bytes (every rank contributes its block of about M/p)
 * over p ranks as the mpi communicator runs it in the ring's blocks
 * (src/comm/mpi_allreduce.c, sb_ag_start: the second half of the ring
 * all-reduce, Patarasuk & Yuan 2009; Thakur et al. 2005, section 4): p-1
 * steps, each passing one block of M/p on to the next rank:
 * (p-1)(α + M/(pB)) for one unit; in u units in flight together
 * (p-2+u)α + (p-1)M/(pB), as sb_cost_reduce_scatter_s says. 0 for p <= 1;
 * u < 1 counts as 1. (Open MPI 4.1's libnbc MPI_Iallgatherv, every block
 * to every rank at once, α + (p-1)M/(pB) on an ideal switch, is what ran
 * before; on the cluster fixture it took 1.3-1.6x that at p = 4,
 * docs/cost-model.md.) */
double sb_cost_allgather_s(const struct sb_link *l, int p, double bytes, int units);

/* One all-reduce of `bytes` over p ranks by algorithm `a` (RING,
 * RECURSIVE_DOUBLING, or LIBRARY as the binomial reduce + broadcast that
 * Open MPI's libnbc runs; the caller resolves AUTO, e.g. with
 * sb_allreduce_choose, and costs HIERARCHICAL, which needs the hosts, with
 * sb_cost_hierarchical_allreduce_s): its time, s. */
double sb_cost_allreduce_s(const struct sb_link *l, enum sb_allreduce_algo a, int p,
                           double bytes);

/* The two-level all-reduce (SB_ALLREDUCE_HIERARCHICAL) of M bytes over H
 * hosts of L ranks: a ring reduce-scatter within the host on `intra`
 * ((L-1)(α + M/(LB)) + (L-1)/L Mγ), the all-reduce of the M/L shard across
 * the H hosts by algorithm `cross` (not AUTO or HIERARCHICAL) on `inter`,
 * and a ring all-gather within the host ((L-1)(α + M/(LB))). Horovod's
 * hierarchical all-reduce; the bandwidth terms sum to the flat ring's
 * 2(N-1)/N M/B when intra = inter, with 2(L-1) + the cross stage's messages
 * instead of 2(N-1). */
double sb_cost_hierarchical_allreduce_s(const struct sb_link *intra, const struct sb_link *inter,
                                        enum sb_allreduce_algo cross, int per_host, int hosts,
                                        double bytes);

/* The formula of algorithm `a` (not AUTO) as the report names it ("ring",
 * "recursive-doubling", "binomial") and as text ("2(n-1)(alpha + M/(n B))"). */
const char *sb_cost_allreduce_formula_name(enum sb_allreduce_algo a);
const char *sb_cost_allreduce_formula(enum sb_allreduce_algo a);

/* One predicted variant of a strategy's communication per step. */
struct sb_comm_model_row {
    const char *variant;      /* its name in predict's algorithm column ("ring",
                               * "ring+doubling", "binomial", "push-pull") */
    int servers;              /* server ranks of the variant (0: none) */
    const char *formula_name; /* the report's comm.model.formula_name */
    const char *formula;      /* ... and formula */
    double comm_s;            /* predicted communication time per step, s */
    double wire_bytes;        /* M as the formula prices it: the gradient bytes one replica
                               * sends per step on the wire (half the fp32 bytes on a 16-bit
                               * wire); 0: the fp32 parameter bytes (the report's
                               * comm.model.bytes falls back to them) */
    double exposed_s;         /* of which not hidden behind compute, s; NaN: the strategy
                               * does not overlap (all of comm_s is exposed) */
    char legend[192];         /* one line on the model (formulas, buckets, overlap) for
                               * predict's header; the same for every row of a strategy */
};

#endif
