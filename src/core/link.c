/* A link and its sized classes; see link.h. */
#include "core/link.h"

struct sb_link sb_link_at(const struct sb_link *l, double message_bytes)
{
    struct sb_link out = {.alpha_s = l->alpha_s, .bandwidth_Bps = l->bandwidth_Bps,
                          .gamma_s_per_byte = l->gamma_s_per_byte};
    int n = l->n_sizes < SB_LINK_MAX_SIZES ? l->n_sizes : SB_LINK_MAX_SIZES;
    if (n < 1) return out;
    int k = 0;
    while (k + 1 < n && message_bytes >= l->size_bytes[k + 1]) k++;
    out.alpha_s = l->size_alpha_s[k];
    out.bandwidth_Bps = l->size_bandwidth_Bps[k];
    return out;
}

struct sb_link sb_link_exchange(const struct sb_link *l)
{
    struct sb_link out = *l;
    int n = l->n_exchange_sizes < SB_LINK_MAX_SIZES ? l->n_exchange_sizes : SB_LINK_MAX_SIZES;
    out.n_exchange_sizes = 0;
    if (n < 1) return out;
    out.n_sizes = n;
    for (int k = 0; k < n; k++) {
        out.size_bytes[k] = l->exchange_bytes[k];
        out.size_alpha_s[k] = l->exchange_alpha_s[k];
        out.size_bandwidth_Bps[k] = l->exchange_bandwidth_Bps[k];
    }
    return out;
}

void sb_link_fit_sized(const double *m, const double *t, int n, struct sb_link *out)
{
    out->n_sizes = 0;
    for (int k = 0; k + 1 < n && k < SB_LINK_MAX_SIZES; k++) {
        double dt = t[k + 1] - t[k];
        double bw = dt > 0 ? (m[k + 1] - m[k]) / dt : m[k + 1] / t[k + 1];
        double a = t[k] - m[k] / bw;
        out->size_bytes[k] = k == 0 ? 0.0 : m[k];
        out->size_alpha_s[k] = a > 0 ? a : 0.0;
        out->size_bandwidth_Bps[k] = bw;
        out->n_sizes = k + 1;
    }
}

void sb_link_fit_exchange(const double *m, const double *t, int n, struct sb_link *out)
{
    struct sb_link fit = {0};
    sb_link_fit_sized(m, t, n, &fit);
    out->n_exchange_sizes = fit.n_sizes;
    for (int k = 0; k < fit.n_sizes; k++) {
        out->exchange_bytes[k] = fit.size_bytes[k];
        out->exchange_alpha_s[k] = fit.size_alpha_s[k];
        out->exchange_bandwidth_Bps[k] = fit.size_bandwidth_Bps[k];
    }
}
