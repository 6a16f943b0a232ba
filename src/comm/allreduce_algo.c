/* All-reduce algorithm names and the auto rule; see allreduce_algo.h. */
#include "comm/allreduce_algo.h"

#include <stdio.h>
#include <string.h>

#include "comm/cost_model.h"

static const char *const names[SB_ALLREDUCE_NALGOS] = {"auto", "ring", "recursive-doubling",
                                                       "mpi", "hierarchical"};

const char *sb_allreduce_algo_name(enum sb_allreduce_algo a)
{
    return (unsigned)a < SB_ALLREDUCE_NALGOS ? names[a] : "unknown";
}

const char *sb_allreduce_algo_names(const char *sep)
{
    static char buf[256];
    size_t len = 0;
    buf[0] = '\0';
    for (int a = 0; a < SB_ALLREDUCE_NALGOS && len < sizeof buf; a++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", a ? sep : "", names[a]);
    return buf;
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
    const struct sb_link ref = {.alpha_s = SB_ALLREDUCE_REF_ALPHA_S,
                                .bandwidth_Bps = SB_ALLREDUCE_REF_BANDWIDTH_BPS,
                                .gamma_s_per_byte = SB_ALLREDUCE_REF_GAMMA_S_PER_BYTE};
    double ring = sb_cost_ring_allreduce_s(&ref, ranks, (double)bytes);
    double rd = sb_cost_recursive_doubling_s(&ref, ranks, (double)bytes);
    return rd < ring ? SB_ALLREDUCE_RECURSIVE_DOUBLING : SB_ALLREDUCE_RING;
}

enum sb_allreduce_algo sb_allreduce_choose_hosts(size_t bytes, int ranks, int hosts)
{
    enum sb_allreduce_algo flat = sb_allreduce_choose(bytes, ranks);
    if (hosts < 2 || ranks % hosts != 0 || ranks / hosts < 2) return flat;
    int per_host = ranks / hosts;
    const struct sb_link inter = {.alpha_s = SB_ALLREDUCE_REF_ALPHA_S,
                                  .bandwidth_Bps = SB_ALLREDUCE_REF_BANDWIDTH_BPS,
                                  .gamma_s_per_byte = SB_ALLREDUCE_REF_GAMMA_S_PER_BYTE};
    const struct sb_link intra = {.alpha_s = SB_ALLREDUCE_REF_HOST_ALPHA_S,
                                  .bandwidth_Bps = SB_ALLREDUCE_REF_HOST_BANDWIDTH_BPS,
                                  .gamma_s_per_byte = SB_ALLREDUCE_REF_GAMMA_S_PER_BYTE};
    enum sb_allreduce_algo cross = sb_allreduce_choose(bytes / (size_t)per_host, hosts);
    double hier = sb_cost_hierarchical_allreduce_s(&intra, &inter, cross, per_host, hosts,
                                                   (double)bytes);
    double flat_s = sb_cost_allreduce_s(&inter, flat, ranks, (double)bytes);
    return hier < flat_s ? SB_ALLREDUCE_HIERARCHICAL : flat;
}
