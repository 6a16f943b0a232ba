/* The α–β cost model; formulas and sources in cost_model.h. */
#include "comm/cost_model.h"

/* ceil(log2 p) for p >= 1. */
static int ceil_lg(int p)
{
    int r = 0;
    while ((1 << r) < p) r++;
    return r;
}

/* floor(log2 p) for p >= 1. */
static int floor_lg(int p)
{
    int r = 0;
    while ((2 << r) <= p) r++;
    return r;
}

const struct sb_link *sb_link_crossed(const struct sb_link_classes *l, int crosses_hosts)
{
    return crosses_hosts ? &l->inter : &l->intra;
}

double sb_cost_message_s(const struct sb_link *l, double bytes)
{
    if (l->n_sizes > 0) {
        struct sb_link c = sb_link_at(l, bytes);
        return c.alpha_s + bytes / c.bandwidth_Bps;
    }
    return l->alpha_s + bytes / l->bandwidth_Bps;
}

double sb_cost_ring_allreduce_s(const struct sb_link *l, int p, double bytes)
{
    if (p <= 1) return 0.0;
    double steps = 2.0 * (p - 1); /* p-1 of reduce-scatter, p-1 of all-gather */
    struct sb_link x = sb_link_exchange(l);
    return steps * sb_cost_message_s(&x, bytes / p) +
           (double)(p - 1) / p * bytes * l->gamma_s_per_byte;
}

double sb_cost_recursive_doubling_s(const struct sb_link *l, int p, double bytes)
{
    if (p <= 1) return 0.0;
    int lg = floor_lg(p);
    struct sb_link x = sb_link_exchange(l); /* the partners swap */
    double exchange = sb_cost_message_s(&x, bytes) + bytes * l->gamma_s_per_byte;
    double t = lg * exchange;
    if ((1 << lg) != p) t += exchange + sb_cost_message_s(l, bytes); /* pre + post: one way */
    return t;
}

double sb_cost_binomial_allreduce_s(const struct sb_link *l, int p, double bytes)
{
    if (p <= 1) return 0.0;
    int rounds = ceil_lg(p);
    return 2.0 * rounds * sb_cost_message_s(l, bytes) + rounds * bytes * l->gamma_s_per_byte;
}

/* The α count of a ring collective of p-1 steps over u units in flight
 * together (cost_model.h): p-1 for the first unit, 1 for each other. */
static double ring_messages(int p, int units)
{
    return (double)(p - 1) + (units > 1 ? units - 1 : 0);
}

double sb_cost_reduce_scatter_s(const struct sb_link *l, int p, double bytes, int units)
{
    if (p <= 1) return 0.0;
    struct sb_link x = sb_link_exchange(l);
    struct sb_link c = sb_link_at(&x, bytes / p); /* the ring's blocks */
    l = &c;
    return ring_messages(p, units) * l->alpha_s + (p - 1) * bytes / p / l->bandwidth_Bps +
           (double)(p - 1) / p * bytes * l->gamma_s_per_byte;
}

double sb_cost_allgather_s(const struct sb_link *l, int p, double bytes, int units)
{
    if (p <= 1) return 0.0;
    struct sb_link x = sb_link_exchange(l);
    struct sb_link c = sb_link_at(&x, bytes / p); /* the ring's blocks */
    l = &c;
    return ring_messages(p, units) * l->alpha_s + (p - 1) * bytes / p / l->bandwidth_Bps;
}

double sb_cost_allreduce_s(const struct sb_link *l, enum sb_allreduce_algo a, int p,
                           double bytes)
{
    if (a == SB_ALLREDUCE_LIBRARY) return sb_cost_binomial_allreduce_s(l, p, bytes);
    if (a == SB_ALLREDUCE_RECURSIVE_DOUBLING) return sb_cost_recursive_doubling_s(l, p, bytes);
    return sb_cost_ring_allreduce_s(l, p, bytes);
}

double sb_cost_hierarchical_allreduce_s(const struct sb_link *intra, const struct sb_link *inter,
                                        enum sb_allreduce_algo cross, int per_host, int hosts,
                                        double bytes)
{
    double l = per_host, stage = 0.0;
    struct sb_link x = sb_link_exchange(intra);
    if (per_host > 1) /* one ring pass: reduce-scatter, or all-gather (no γ) */
        stage = (l - 1) * sb_cost_message_s(&x, bytes / l);
    double gamma = per_host > 1 ? (l - 1) / l * bytes * intra->gamma_s_per_byte : 0.0;
    return 2.0 * stage + gamma + sb_cost_allreduce_s(inter, cross, hosts, bytes / l);
}

const char *sb_cost_allreduce_formula_name(enum sb_allreduce_algo a)
{
    if (a == SB_ALLREDUCE_LIBRARY) return "binomial";
    if (a == SB_ALLREDUCE_RECURSIVE_DOUBLING) return "recursive-doubling";
    return "ring";
}

const char *sb_cost_allreduce_formula(enum sb_allreduce_algo a)
{
    if (a == SB_ALLREDUCE_LIBRARY) return "2 ceil(lg n)(alpha + M/B)";
    if (a == SB_ALLREDUCE_RECURSIVE_DOUBLING)
        return "lg(n')(alpha + M/B), + 2(alpha + M/B) when n is not a power of two n'";
    return "2(n-1)(alpha + M/(n B))";
}
