/* stratbench's own non-blocking collectives over MPI point-to-point
 * messages, for the "mpi" communicator (src/comm/mpi.c): all-reduce (ring,
 * recursive doubling), and the ring's two halves as collectives of their
 * own, reduce-scatter and all-gather.
 *
 * A collective is a schedule of steps; each step posts at most one
 * MPI_Isend and one MPI_Irecv (split into pieces of at most
 * SB_COLLECTIVE_PIECE_BYTES, job/eager_limit.h),
 * and, when both are complete, adds what arrived into the buffer (or, for
 * the all-gather, leaves it where it arrived) and posts the next step.
 * Nothing runs in the background, and unlike Open MPI's libnbc (which
 * advances every collective in flight inside any MPI call) a schedule
 * advances only when its owner calls sb_ar_progress on it (ddp's and
 * zero's test calls between layers, then their waits): waiting on one
 * leaves the others at the step they had reached. The only places that
 * wait for MPI are the MPI_Testall / MPI_Waitall in sb_ar_progress.
 *
 * Every rank ends with bit-identical sums (each element is summed once,
 * in one order, then copied; IEEE addition is commutative for recursive
 * doubling's pairwise exchanges), so replicas stay identical. */
#ifndef SB_MPI_ALLREDUCE_H
#define SB_MPI_ALLREDUCE_H

#include <mpi.h>
#include <stddef.h>

#include "comm/allreduce_algo.h"
#include "core/status.h"

struct sb_ar_op;

/* A free list of finished schedules with their scratch buffers, so a
 * step's all-reduces reuse memory instead of faulting in fresh pages. One
 * per communicator; zero-initialise it. */
struct sb_ar_pool {
    struct sb_ar_op *free;
};

/* Starts the all-reduce (sum, in place) of buf (n floats) over comm with
 * `algo` (SB_ALLREDUCE_RING or SB_ALLREDUCE_RECURSIVE_DOUBLING) and posts
 * its first step. `tag` (1..32767) must be the same on every rank and
 * differ between all-reduces in flight at once on comm (every rank starts
 * its all-reduces in the same order). buf must stay untouched until done.
 * Ring: 2(p-1) steps of about n/p floats (chunk c holds n/p floats, one
 * more for c < n mod p; empty chunks send nothing); reduce-scatter step s
 * sends chunk (r-s) mod p to rank r+1 and adds chunk (r-s-1) mod p from
 * rank r-1, then the all-gather passes the reduced chunks on
 * (Patarasuk & Yuan 2009). Recursive doubling: Thakur et al. 2005, with
 * the extra ranks of a non-power-of-two p folded into partners before and
 * served after. Errors: SB_ERR_NOMEM, SB_ERR_COMM with MPI's message. */
sb_status sb_ar_start(MPI_Comm comm, enum sb_allreduce_algo algo, float *buf, size_t n,
                      int tag, struct sb_ar_pool *pool, struct sb_ar_op **out);

/* Starts the ring reduce-scatter (sum) of send (n floats, this rank's
 * contribution) over comm: rank r receives ring chunk r of the sum (the
 * chunks above: n/p floats, one more for r < n mod p, the split of
 * sb_split_range) into recv. p-1 steps; step s sends the partial sum of
 * chunk r-1-s to rank r+1 and adds this rank's values to chunk r-2-s's
 * partial from rank r-1 (the first half of the ring all-reduce above,
 * rotated one rank so that chunk r ends on rank r). Every rank sends
 * (p-1)/p of the buffer, the optimum, and holds 2 (n/p + 1) floats of
 * scratch, so its memory falls as 1/p (MPI_Ireduce_scatter in Open MPI
 * 4.1's libnbc reduces the whole buffer to rank 0 through 2n floats of
 * temporaries, then scatters). send and recv must stay untouched until
 * done; tag as for sb_ar_start (the same sequence of tags). Progress and
 * completion: sb_ar_progress. Errors: as sb_ar_start. */
sb_status sb_rs_start(MPI_Comm comm, const float *send, float *recv, size_t n, int tag,
                      struct sb_ar_pool *pool, struct sb_ar_op **out);

/* Starts the ring all-gather of send (this rank's ring chunk of n floats:
 * n/p, one more for rank < n mod p, as sb_rs_start leaves it) into recv
 * (n floats): the chunk is copied to its place in recv (send may be that
 * place), then p-1 steps; step s passes chunk r-s on to rank r+1 and
 * receives chunk r-1-s from rank r-1 into recv (the second half of the
 * ring all-reduce, rotated one rank). Every rank sends (p-1)/p of the
 * buffer, one message of about n/p floats per step, so the α–β cost is
 * (p-1)(α + M/(pB)) (sb_cost_allgather_s); no scratch. It replaces Open
 * MPI 4.1's libnbc MPI_Iallgatherv, which sends every block to every rank
 * at once: on shaped TCP links its p-1 simultaneous flows took 1.3-1.6x
 * the link time at p = 4 and left the ranks' ends of the gather ~100 ms
 * apart. recv must stay untouched until done (send too, unless it is
 * recv's chunk); tag as for sb_ar_start. Progress and completion:
 * sb_ar_progress. Errors: as sb_ar_start. */
sb_status sb_ag_start(MPI_Comm comm, const float *send, float *recv, size_t n, int tag,
                      struct sb_ar_pool *pool, struct sb_ar_op **out);

/* Advances op: completes as many steps as have arrived (MPI_Testall), or,
 * with `block`, all of them (MPI_Waitall). *done = 1 when the buffer holds
 * the sum; the op then goes back to the pool (do not use it again).
 * Errors: SB_ERR_COMM with MPI's message (the op is then abandoned). */
sb_status sb_ar_progress(struct sb_ar_op *op, int block, int *done);

/* Scratch from the pool for a blocking collective that posts no schedule
 * (the 16-bit ones, mpi_allreduce16.h): at least `bytes` bytes, aligned
 * for float, the scratch of the pooled schedule with the smallest one that
 * holds them (the best fit the schedules take), or of a new one; *holder
 * keeps it until sb_ar_pool_put. Scratch taken and not given back is out
 * of the pool, so collectives in flight at once (schedules, or the 16-bit
 * hierarchical all-reduce's cross-host ring inside its host ring) never
 * share it. Returns NULL when out of memory (*holder NULL). */
void *sb_ar_pool_take(struct sb_ar_pool *pool, size_t bytes, struct sb_ar_op **holder);

/* Gives scratch taken with sb_ar_pool_take back to its pool; holder NULL:
 * nothing. */
void sb_ar_pool_put(struct sb_ar_op *holder);

/* Frees the pool's schedules; safe on an empty pool. */
void sb_ar_pool_free(struct sb_ar_pool *pool);

#endif
