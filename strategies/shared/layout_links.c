/* The link terms of the layout model; formulas and sources in
 * layout_links.h. */
#include "strategies/shared/layout_links.h"

#include <stdlib.h>

/* The rank after `rank` along `axis` (-1: none: the last stage). */
static int successor(int dp, int tp, int pp, enum sb_rank_order order, enum sb_comm_role axis,
                     int rank)
{
    struct sb_grid_coords c = sb_grid_coords_of(dp, tp, pp, order, rank);
    if (axis == SB_COMM_ROLE_DP) c.dp_rank = (c.dp_rank + 1) % dp;
    else if (axis == SB_COMM_ROLE_TP) c.tp_rank = (c.tp_rank + 1) % tp;
    else if (c.pp_rank + 1 < pp) c.pp_rank++;
    else return -1;
    int next = sb_grid_rank_of(dp, tp, pp, order, c);
    return next == rank ? -1 : next;
}

int sb_layout_link_share(int dp, int tp, int pp, enum sb_rank_order order,
                         enum sb_comm_role axis, int ranks_per_host, const double *stage_bytes,
                         double *share)
{
    if (dp < 1 || tp < 1 || pp < 1 || ranks_per_host < 1) return -1;
    if (axis != SB_COMM_ROLE_DP && axis != SB_COMM_ROLE_TP && axis != SB_COMM_ROLE_PP)
        return -1;
    int world = dp * tp * pp, hosts = (world + ranks_per_host - 1) / ranks_per_host;
    /* each crossing flow: its host out (from), host in (to), its weight and stage */
    int *from = malloc(sizeof(int) * 4 * (size_t)world);
    if (!from) return -1;
    int *to = from + world, *stage = to + world, n = 0;
    for (int s = 0; s < pp; s++) share[s] = 1.0;
    for (int r = 0; r < world; r++) {
        int next = successor(dp, tp, pp, order, axis, r);
        int s = sb_grid_coords_of(dp, tp, pp, order, r).pp_rank;
        if (next < 0 || r / ranks_per_host == next / ranks_per_host || !(stage_bytes[s] > 0))
            continue;
        from[n] = r / ranks_per_host;
        to[n] = next / ranks_per_host;
        stage[n++] = s;
    }
    for (int s = 0; s < pp; s++) {
        double w = stage_bytes[s];
        for (int h = 0; h < hosts; h++) {
            for (int dir = 0; dir < 2; dir++) { /* the host's link out, then in */
                const int *end = dir ? to : from;
                double k = 0.0;
                int mine = 0;
                for (int i = 0; i < n; i++) {
                    if (end[i] != h) continue;
                    double wi = stage_bytes[stage[i]];
                    k += (wi < w ? wi : w) / w;
                    mine |= stage[i] == s;
                }
                if (mine && k > share[s]) share[s] = k;
            }
        }
    }
    free(from);
    return 0;
}

struct sb_link sb_link_shared(const struct sb_link *l, double share)
{
    struct sb_link out = *l;
    if (share > 1.0) {
        out.bandwidth_Bps /= share;
        for (int k = 0; k < out.n_sizes && k < SB_LINK_MAX_SIZES; k++) {
            out.size_bandwidth_Bps[k] /= share;
            out.size_bytes[k] /= share;
        }
        for (int k = 0; k < out.n_exchange_sizes && k < SB_LINK_MAX_SIZES; k++) {
            out.exchange_bandwidth_Bps[k] /= share;
            out.exchange_bytes[k] /= share;
        }
    }
    return out;
}

int sb_layout_world_hosts(int ranks, int ranks_per_host)
{
    if (ranks < 4 || ranks_per_host < 2 || ranks % ranks_per_host != 0) return 0;
    int hosts = ranks / ranks_per_host;
    return hosts >= 2 ? hosts : 0;
}

double sb_layout_world_allreduce_s(const struct sb_link *intra, const struct sb_link *inter,
                                   int hosts, int per_host, double bytes,
                                   enum sb_allreduce_algo *algo)
{
    int ranks = hosts * per_host;
    *algo = sb_allreduce_choose_hosts((size_t)bytes, ranks, hosts);
    if (*algo != SB_ALLREDUCE_HIERARCHICAL) return sb_cost_allreduce_s(inter, *algo, ranks, bytes);
    enum sb_allreduce_algo cross = sb_allreduce_choose((size_t)bytes / (size_t)per_host, hosts);
    struct sb_link shared = sb_link_shared(inter, per_host);
    return sb_cost_hierarchical_allreduce_s(intra, &shared, cross, per_host, hosts, bytes);
}
