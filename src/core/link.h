/* A link between two ranks as the α–β(–γ) cost model prices it
 * (src/comm/cost_model.h) and the probe measures it (src/job/probe.h): a
 * plain data type at the bottom of the layers, so that the probe (job) and
 * the cost model (comm) share it. Pure functions; units: seconds, bytes,
 * bytes per second. */
#ifndef SB_LINK_H
#define SB_LINK_H

/* One link class: every rank-to-rank link is assumed alike (the slowest
 * probed link stands for all). */
#define SB_LINK_MAX_SIZES 8

struct sb_link {
    double alpha_s;          /* latency α of one message, s */
    double bandwidth_Bps;    /* bandwidth B, bytes/s (β = 1 / B) */
    double gamma_s_per_byte; /* reduction arithmetic γ, s per byte (0 = ignore) */
    /* Sized classes (0: alpha_s and bandwidth_Bps at every size): class k
     * prices the messages of size_bytes[k] <= m < size_bytes[k + 1] (class 0
     * also those below, the last those above) with its own α and B, fitted
     * by the probe between the two probed sizes that bound it
     * (src/job/probe.h). size_bytes ascending. */
    int n_sizes;
    double size_bytes[SB_LINK_MAX_SIZES];
    double size_alpha_s[SB_LINK_MAX_SIZES];
    double size_bandwidth_Bps[SB_LINK_MAX_SIZES];
    /* Exchange classes (0: the classes above price exchanges too): the same
     * rungs timed with both ends sending to each other at once, round after
     * round, as a ring's steps send (src/job/probe.h); laid out as above.
     * The rings of the cost model price their blocks with these
     * (sb_link_exchange), a one-way send (a pipeline boundary, a tree)
     * with the classes above. */
    int n_exchange_sizes;
    double exchange_bytes[SB_LINK_MAX_SIZES];
    double exchange_alpha_s[SB_LINK_MAX_SIZES];
    double exchange_bandwidth_Bps[SB_LINK_MAX_SIZES];
};

/* The plain link (n_sizes 0) that prices one message of message_bytes on l:
 * l's α and B, or those of the sized class holding message_bytes (above);
 * γ kept. */
struct sb_link sb_link_at(const struct sb_link *l, double message_bytes);

/* The link that prices exchanges on l (a ring's steps, recursive
 * doubling's swaps): l with its exchange classes as its sized classes
 * where it has any (n_exchange_sizes > 0), else l itself; α, B and γ kept,
 * the result's own exchange classes cleared. */
struct sb_link sb_link_exchange(const struct sb_link *l);

/* The sized classes of n probed rungs (src/job/probe.h): sizes m[0..n)
 * ascending (bytes) and their one-way times t[0..n) (s) into out's
 * n_sizes = n - 1 classes (at most SB_LINK_MAX_SIZES; out's α, B and γ
 * untouched): class k from m[k] (class 0 from 0) with
 *   B_k = (m[k+1] - m[k]) / (t[k+1] - t[k])   (t[k+1] <= t[k]: m[k+1] / t[k+1])
 *   α_k = max(0, t[k] - m[k] / B_k)
 * (the Hockney line through the two rungs that bound the class). n < 2
 * gives no classes. */
void sb_link_fit_sized(const double *m, const double *t, int n, struct sb_link *out);

/* The same fit of n rungs timed as exchanges (t[k]: one round's seconds,
 * both ends sending m[k] bytes at once) into out's exchange classes
 * (n_exchange_sizes = n - 1; the rest of out untouched). */
void sb_link_fit_exchange(const double *m, const double *t, int n, struct sb_link *out);

#endif
