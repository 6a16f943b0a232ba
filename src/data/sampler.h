/* The data order shared by every strategy (DESIGN.md "Same semantics").
 *
 * Each epoch has its own seeded permutation of the training set. Step s of
 * an epoch takes the global batch perm[s*G .. (s+1)*G) with G = replicas *
 * batch; replica r takes the slice [r*batch, (r+1)*batch) of it. The last
 * partial global batch of an epoch is dropped. Every process computes the
 * permutation itself from the seed, so no data order is communicated. */
#ifndef SB_SAMPLER_H
#define SB_SAMPLER_H

#include <stdint.h>

#include "core/status.h"

/* Fills perm[0..n) with a permutation of 0..n-1 drawn by Fisher-Yates from a
 * generator seeded with (seed, epoch); epochs count from 1. The same
 * (seed, epoch, n) gives the same permutation on every process. */
void sb_epoch_permutation(uint64_t seed, int epoch, int32_t *perm, int n);

/* Number of full global batches of `global_batch` samples in `n` samples
 * (the last partial batch is dropped). */
int sb_steps_per_epoch(int n, int global_batch);

#endif
