/* Which all-reduce algorithm runs: the names of --allreduce and of the
 * report, and the rule --allreduce auto follows.
 *
 * The "mpi" communicator runs ring and recursive doubling itself, on
 * non-blocking point-to-point messages (src/comm/mpi_allreduce.c), because
 * Open MPI 4.1's MPI_Iallreduce (libnbc) runs a binomial reduce + broadcast
 * for ddp's in-place buffers, moving 2M/B instead of the ring's
 * 2(p-1)/p M/B (issue 8), and mpirun's --mca flags are out of reach under a
 * user's own mpirun. Other communicators (nccl, local, staged) run their
 * library's own algorithm, reported under the communicator's name. */
#ifndef SB_ALLREDUCE_ALGO_H
#define SB_ALLREDUCE_ALGO_H

#include <stddef.h>

enum sb_allreduce_algo {
    SB_ALLREDUCE_AUTO = 0,           /* per call, by size and ranks (sb_allreduce_choose) */
    SB_ALLREDUCE_RING,               /* reduce-scatter + all-gather around a ring */
    SB_ALLREDUCE_RECURSIVE_DOUBLING, /* lg p exchanges of the whole buffer */
    SB_ALLREDUCE_LIBRARY,            /* the communicator's library (MPI_Iallreduce, NCCL) */
    SB_ALLREDUCE_HIERARCHICAL,       /* reduce-scatter within each host, all-reduce of each
                                      * shard across hosts, all-gather within each host
                                      * (src/comm/mpi_hier.c, docs/hierarchical.md) */
    SB_ALLREDUCE_NALGOS
};

/* Name of an algorithm as --allreduce and the report spell it: "auto",
 * "ring", "recursive-doubling", "mpi" (the library's own; the report names
 * it after the communicator: "mpi", "nccl", "local", "staged"),
 * "hierarchical". */
const char *sb_allreduce_algo_name(enum sb_allreduce_algo a);

/* Every algorithm's name joined by `sep` (", " or " | "), in enum order,
 * for usage texts and errors; a static buffer, valid until the next call. */
const char *sb_allreduce_algo_names(const char *sep);

/* Parses a --allreduce value; returns 0 and sets *out, or -1 if unknown. */
int sb_allreduce_algo_parse(const char *name, enum sb_allreduce_algo *out);

/* The "auto" rule: ring or recursive doubling for an all-reduce of `bytes`
 * over `ranks`, whichever the α–β–γ model (cost_model.h, Thakur et al.
 * 2005) predicts faster on a reference link (SB_ALLREDUCE_REF_*); ring on
 * a tie. The reference is a constant, not the probed link, so that every
 * run of the same job, on one host or many, picks the same algorithm and
 * sums in the same order (byte-identical parameters). With it, ring from
 * 2α/γ = 160 kB at p = 2, ~12 kB at p = 3, ~116 kB at p = 4, ~148 kB at
 * p = 8, ~550 kB at p = 64; recursive doubling below.
 * Never SB_ALLREDUCE_AUTO or _LIBRARY. */
enum sb_allreduce_algo sb_allreduce_choose(size_t bytes, int ranks);

/* The "auto" rule of a communicator whose ranks form `hosts` hosts of
 * ranks / hosts ranks each (hosts <= 1: no grouping known): hierarchical
 * when there are at least 2 hosts of at least 2 ranks and the α–β model
 * (sb_cost_hierarchical_allreduce_s, with the reference link across hosts
 * and SB_ALLREDUCE_REF_HOST_* within a host) predicts it faster than
 * sb_allreduce_choose's flat algorithm; else that flat algorithm. The
 * cross-host stage is costed with sb_allreduce_choose(bytes / L, hosts),
 * the algorithm it runs. Never SB_ALLREDUCE_AUTO or _LIBRARY. */
enum sb_allreduce_algo sb_allreduce_choose_hosts(size_t bytes, int ranks, int hosts);

/* Reference link of the auto rule: 20 µs per message (TCP over Ethernet),
 * 10 Gbit/s, and the reduction's arithmetic at 0.25 ns per byte (one
 * float add per 4 bytes at ~1 ns, a few GB/s of memory traffic). */
#define SB_ALLREDUCE_REF_ALPHA_S 20e-6
#define SB_ALLREDUCE_REF_BANDWIDTH_BPS 1.25e9
#define SB_ALLREDUCE_REF_GAMMA_S_PER_BYTE 0.25e-9
/* Reference link within a host (shared memory): 1 µs per message, 10 GB/s. */
#define SB_ALLREDUCE_REF_HOST_ALPHA_S 1e-6
#define SB_ALLREDUCE_REF_HOST_BANDWIDTH_BPS 10e9

#endif
