/* The hierarchical all-reduce of the "mpi" communicator (private to
 * src/comm/mpi.c and mpi_hier.c), as Horovod's
 * HOROVOD_HIERARCHICAL_ALLREDUCE and NCCL's trees across nodes do it:
 *
 *   1. reduce-scatter within the host: the L ranks of a host sum the
 *      buffer and local rank i keeps shard i of the sum (shared memory);
 *   2. all-reduce across hosts: local rank i of every host sums its shard
 *      with the other hosts' shard i (each of the L ranks on its own shard,
 *      so every host link carries 1/L of the buffer, in parallel);
 *   3. all-gather within the host: every rank gets every summed shard.
 *
 * Shard i of n floats is the i-th of L near-equal parts (the first n mod L
 * one float longer). Each stage runs on its own communicator (this host's
 * ranks, one rank per host, this host's ranks again), and a stage of an
 * all-reduce starts only after the same stage of every all-reduce issued
 * before it on this communicator has started, so every rank issues the
 * collectives of each communicator in the same order, whatever order the
 * caller polls in. Like the flat algorithms nothing runs in the
 * background: stages advance inside sb_hier_progress. */
#ifndef SB_MPI_HIER_H
#define SB_MPI_HIER_H

#include <stddef.h>

#include "comm/comm.h"

struct sb_hier;    /* the host grouping and the all-reduces in flight */
struct sb_hier_op; /* one all-reduce in flight */

/* Splits c into hosts (see sb_comm_mpi_group_hosts) and sets c->stages.
 * Collective over c. Errors: those of sb_comm_split_hosts and
 * sb_comm_split. */
sb_status sb_hier_create(struct sb_comm *c, int ranks_per_host, struct sb_hier **out);

/* Hosts (H) of the grouping. */
int sb_hier_hosts(const struct sb_hier *h);

/* The grouping's communicators: this host's ranks (stage 1) and this local
 * rank on every host (stage 2), for the blocking 16-bit algorithm
 * (mpi_allreduce16.h), which runs them while no all-reduce is in flight. */
struct sb_comm *sb_hier_local(const struct sb_hier *h);
struct sb_comm *sb_hier_cross(const struct sb_hier *h);

/* Starts the all-reduce (sum, in place) of buf (n floats): issues its
 * reduce-scatter. `stages` (3: reduce-scatter, cross all-reduce,
 * all-gather) receive each stage's call, bytes and seconds. buf stays
 * untouched by the caller until done. Errors: SB_ERR_NOMEM, SB_ERR_COMM. */
sb_status sb_hier_start(struct sb_hier *h, float *buf, size_t n, struct sb_comm_stage *stages,
                        struct sb_hier_op **out);

/* Advances every all-reduce in flight without blocking, or, with `block`,
 * until op is done. *done = 1 when op's buffer holds the sum; op is then
 * freed (do not use it again). Errors: SB_ERR_COMM (op is then abandoned). */
sb_status sb_hier_progress(struct sb_hier *h, struct sb_hier_op *op, int block, int *done);

/* Frees the grouping and its communicators; safe on NULL. */
void sb_hier_destroy(struct sb_hier *h);

#endif
