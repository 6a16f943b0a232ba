/* SplitMix64 generator; see rng.h. */
#include "core/rng.h"

void sb_rng_seed(struct sb_rng *rng, uint64_t seed, uint64_t stream)
{
    rng->state = seed ^ (stream * 0xD1B54A32D192ED03ull);
    (void)sb_rng_next(rng);
}

uint64_t sb_rng_next(struct sb_rng *rng)
{
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double sb_rng_uniform(struct sb_rng *rng)
{
    return (double)(sb_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint32_t sb_rng_below(struct sb_rng *rng, uint32_t bound)
{
    uint32_t x = (uint32_t)(sb_rng_next(rng) >> 32);
    uint64_t m = (uint64_t)x * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t threshold = (uint32_t)(-bound) % bound;
        while (low < threshold) {
            x = (uint32_t)(sb_rng_next(rng) >> 32);
            m = (uint64_t)x * bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}
