/* The ring's split of a buffer into one chunk per rank, shared by every
 * ring schedule of src/comm (mpi_allreduce.c, mpi_allreduce16.c) and by
 * the check that a caller's blocks are the ring's (mpi.c). It is the split
 * of sb_split_range (strategies/shared/replica.h), which zero's shards
 * follow, so their reduce-scatters and all-gathers run on the ring. */
#ifndef SB_RING_H
#define SB_RING_H

#include <stddef.h>

/* Chunk c (0..p-1) of n floats over p ranks: its offset and count, n/p
 * floats, one more for c < n mod p. */
static inline void sb_ring_chunk(size_t n, int p, int c, size_t *off, size_t *count)
{
    size_t q = n / (size_t)p, r = n % (size_t)p, uc = (size_t)c;
    *off = uc * q + (uc < r ? uc : r);
    *count = q + (uc < r ? 1 : 0);
}

/* a mod p in 0..p-1 for any int a (p > 0): the ring's neighbour and chunk
 * arithmetic, r - s - 1 included. */
static inline int sb_ring_mod(int a, int p) { return ((a % p) + p) % p; }

#endif
