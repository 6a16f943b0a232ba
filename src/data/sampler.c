/* Per-epoch permutation and batch counting; see sampler.h. */
#include "data/sampler.h"

#include "core/rng.h"

void sb_epoch_permutation(uint64_t seed, int epoch, int32_t *perm, int n)
{
    struct sb_rng rng;
    sb_rng_seed(&rng, seed, 0x5EED0000u + (uint64_t)epoch);
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)sb_rng_below(&rng, (uint32_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

int sb_steps_per_epoch(int n, int global_batch)
{
    return global_batch > 0 ? n / global_batch : 0;
}
