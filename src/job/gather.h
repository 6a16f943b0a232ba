/* The job layer's gather: variable-sized blocks from every rank of the MPI
 * job to rank 0, used by the cross-rank step statistics (rank_stats.c) and
 * the --trace merge (src/trace). Part of the job layer with job.c: it
 * depends on MPI and src/core only. */
#ifndef SB_GATHER_H
#define SB_GATHER_H

#include "core/status.h"

/* Gathers `bytes` bytes of `mine` from every rank to rank 0 of mpi_world
 * (an MPI_Comm *), safely: a rank whose local preparation failed passes
 * bytes < 0, and then every rank returns an error instead of leaving rank 0
 * waiting. On rank 0, *all (malloc'd, caller frees) holds the blocks in
 * rank order and counts[r] (malloc'd, size entries) their sizes; NULL on
 * other ranks. Collective. Errors: SB_ERR_COMM (an MPI call failed, another
 * rank failed, or the total exceeds 2 GiB), SB_ERR_NOMEM. */
sb_status sb_gather_bytes_to_root(const void *mpi_world, int rank, int size, const void *mine,
                                  long long bytes, char **all, long long **counts);

#endif
