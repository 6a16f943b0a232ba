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

double sb_cost_message_s(const struct sb_link *l, double bytes)
{
    return l->alpha_s + bytes / l->bandwidth_Bps;
}

double sb_cost_ring_allreduce_s(const struct sb_link *l, int p, double bytes)
{
    if (p <= 1) return 0.0;
    double steps = 2.0 * (p - 1); /* p-1 of reduce-scatter, p-1 of all-gather */
    return steps * sb_cost_message_s(l, bytes / p) +
           (double)(p - 1) / p * bytes * l->gamma_s_per_byte;
}

double sb_cost_recursive_doubling_s(const struct sb_link *l, int p, double bytes)
{
    if (p <= 1) return 0.0;
    int lg = floor_lg(p);
    double exchange = sb_cost_message_s(l, bytes) + bytes * l->gamma_s_per_byte;
    double t = lg * exchange;
    if ((1 << lg) != p) t += exchange + sb_cost_message_s(l, bytes); /* pre + post */
    return t;
}

double sb_cost_binomial_allreduce_s(const struct sb_link *l, int p, double bytes)
{
    if (p <= 1) return 0.0;
    int rounds = ceil_lg(p);
    return 2.0 * rounds * sb_cost_message_s(l, bytes) + rounds * bytes * l->gamma_s_per_byte;
}

double sb_cost_central_s(const struct sb_link *l, int n_workers, int k_servers, double bytes)
{
    if (k_servers <= 0) {
        if (n_workers <= 1) return 0.0;
        return 2.0 * (l->alpha_s + (n_workers - 1) * bytes / l->bandwidth_Bps);
    }
    double worker_link = bytes / l->bandwidth_Bps;
    double server_link = (double)n_workers * bytes / ((double)k_servers * l->bandwidth_Bps);
    double one_way = worker_link > server_link ? worker_link : server_link;
    return 2.0 * (l->alpha_s + one_way);
}

double sb_cost_ddp_exposed_s(const double *bytes, const double *comm_s, int n_buckets,
                             double backward_s)
{
    double total = 0.0;
    for (int i = 0; i < n_buckets; i++) total += bytes[i];
    double ready_bytes = 0.0, done = 0.0;
    for (int i = 0; i < n_buckets; i++) {
        ready_bytes += bytes[i];
        double ready = total > 0 ? backward_s * ready_bytes / total : backward_s;
        done = (ready > done ? ready : done) + comm_s[i];
    }
    double exposed = done - backward_s;
    return n_buckets > 0 && exposed > 0 ? exposed : 0.0;
}
