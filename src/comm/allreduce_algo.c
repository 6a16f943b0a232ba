/* All-reduce algorithm names and the auto rule; see allreduce_algo.h. */
#include "comm/allreduce_algo.h"

#include <string.h>

#include "comm/cost_model.h"

static const char *const names[SB_ALLREDUCE_NALGOS] = {"auto", "ring", "recursive-doubling",
                                                       "mpi"};

const char *sb_allreduce_algo_name(enum sb_allreduce_algo a)
{
    return (unsigned)a < SB_ALLREDUCE_NALGOS ? names[a] : "unknown";
}

int sb_allreduce_algo_parse(const char *name, enum sb_allreduce_algo *out)
{
    for (int a = 0; a < SB_ALLREDUCE_NALGOS; a++)
        if (strcmp(name, names[a]) == 0) {
            *out = (enum sb_allreduce_algo)a;
            return 0;
        }
    return -1;
}

enum sb_allreduce_algo sb_allreduce_choose(size_t bytes, int ranks)
{
    const struct sb_link ref = {SB_ALLREDUCE_REF_ALPHA_S, SB_ALLREDUCE_REF_BANDWIDTH_BPS,
                                SB_ALLREDUCE_REF_GAMMA_S_PER_BYTE};
    double ring = sb_cost_ring_allreduce_s(&ref, ranks, (double)bytes);
    double rd = sb_cost_recursive_doubling_s(&ref, ranks, (double)bytes);
    return rd < ring ? SB_ALLREDUCE_RECURSIVE_DOUBLING : SB_ALLREDUCE_RING;
}
