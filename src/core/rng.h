/* A small deterministic random number generator (SplitMix64, Steele et al.,
 * "Fast splittable pseudorandom number generators", OOPSLA 2014).
 *
 * Used for parameter initialisation and the per-epoch data permutation, so
 * the same seed gives the same run on every process and platform. */
#ifndef SB_RNG_H
#define SB_RNG_H

#include <stdint.h>

struct sb_rng {
    uint64_t state;
};

/* Seeds a generator from a seed and a stream number (e.g. the epoch), so that
 * distinct streams of one seed are independent. */
void sb_rng_seed(struct sb_rng *rng, uint64_t seed, uint64_t stream);

/* Next 64 uniformly distributed bits. */
uint64_t sb_rng_next(struct sb_rng *rng);

/* Uniform double in [0, 1) from the top 53 bits. */
double sb_rng_uniform(struct sb_rng *rng);

/* Uniform integer in [0, bound) without modulo bias (Lemire's method,
 * "Fast Random Integer Generation in an Interval", TOMACS 2019). bound > 0. */
uint32_t sb_rng_below(struct sb_rng *rng, uint32_t bound);

#endif
