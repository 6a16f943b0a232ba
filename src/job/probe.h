/* --probe-links: the α (latency) and B (bandwidth) of the job's links,
 * measured at start-up by a short ping-pong, for the cost model
 * (src/comm/cost_model.h) beside every report's measured times.
 *
 * Rank 0 probes one rank on every other host (the lowest rank there); on
 * one host, rank 1 (then the link is shared memory). With each peer:
 * warm-up exchanges (the connection is made lazily), then
 * - α: the median over 20 round trips of a 1-byte message, halved;
 * - B: the slope of one-way time against size, (m2 − m1) / (T(m2) − T(m1)),
 *   m1 = 256 KiB, m2 = 1 MiB, T the best of 3 sends timed until a 1-byte
 *   acknowledgement returns. The slope cancels the fixed costs (α, the
 *   acknowledgement, a token bucket's burst) and leaves the link's payload
 *   rate.
 * The slowest link stands for all (largest α, smallest B), and rank 0's
 * result is broadcast so every rank holds the same numbers. Cost: a few ms
 * on shared memory or an unshaped link, ~30 ms at 1 Gbit/s, ~0.3 s at
 * 100 Mbit/s. Probe traffic uses its own communicator and is not counted in
 * the report's comm counters.
 *
 * Two link classes (docs/layouts.md): where the job spans hosts and rank
 * 0's host holds other ranks too, rank 0 also probes the lowest of them, so
 * that the within-host link is measured beside the cross-host one
 * (intra_*); on one host the probed link is the within-host link; with one
 * rank per host there is none. alpha_s and bandwidth_Bps stay the slowest
 * probed cross-host link (on one host, the shared-memory one), as before.
 *
 * Sized (issue 35; docs/cost-model.md, "Sized links and γ"): a link's
 * α and B change with the message size (shared memory leaves the caches
 * above ~1 MB; a token bucket's burst favours small sends), so after α and
 * B each probed link also runs a ladder of sizes m = 16 KiB x 4^k up to
 * 16 MiB, T(m) the best of 3 round trips (2 above 1 MiB) less the
 * acknowledgement's α, climbing to the next rung only while it would take
 * at most 40 ms (4 T(m) <= 40 ms: a slow link's large sizes are
 * bandwidth-bound, the last class holds them). Class k spans [m_k, m_k+1) and is fitted between its two
 * rungs: B_k = (m_k+1 − m_k) / (T(m_k+1) − T(m_k)), α_k = T(m_k) − m_k/B_k
 * (≥ 0). The ladder covers every message the layouts of the bench send
 * (tp all-reduces and ring blocks of 10 kB–4 MB, pp activations, dp buckets
 * up to the whole 7.5 MB gradient), so the cost model prices each at its
 * own size (cost_model.h, sb_link_at). Cost: the rungs' round trips, at
 * most ~0.15 s per link (16 MiB on shared memory, 4 MiB at 1 Gbit/s,
 * 256 KiB at 100 Mbit/s; more on a loaded machine); sized_seconds says it.
 *
 * Exchanges (2026-11-29; docs/layouts.md, "A ring's step is an exchange"):
 * a ring's step sends a block to one neighbour while receiving one from
 * the other, step after step, and a link carries that at its streaming
 * rate, which a lone ping-pong does not show (100 Mbit/s between two
 * namespace hosts: 36 kB both ways at once 3.03 ms a round, the line; the
 * ping-pong ladder's class priced it 4.0 ms). So at each rung both sides
 * also send m to each other at once, in pieces of at most
 * SB_COLLECTIVE_PIECE_BYTES as the rings send (whole 4 MiB messages went by
 * rendezvous, the two directions taking turns: 50.6 MB/s at 1 Gbit/s in 2
 * of 4 probes): one unmeasured round, then as many runs as the rung's
 * round trips (3, 2 above 1 MiB) of 2 rounds back to back, X(m) the best
 * run's seconds a round, fitted into exchange classes as above
 * (core/link.h, sb_link_fit_exchange). The cost model's rings and swaps
 * use them (cost_model.h). Cost: 7 rounds a rung (5 above 1 MiB), about
 * as long again as the ping-pong ladder, and m bytes each way per round
 * (about 30 MiB each way on a 1 Gbit/s link, whose ladder reaches 4 MiB).
 *
 * γ: rank 0 times the comm's own reduction loop (dst[i] += src[i] over
 * 2^20 floats, 4 MiB: out of the L2 cache, as a bucket is), the best of 3
 * after a warming pass, per byte of dst (Chan et al. 2007's γ). */
#ifndef SB_PROBE_H
#define SB_PROBE_H

#include "core/link.h"
#include "core/status.h"
#include "job/job.h"

/* What --probe-links measured (sb_probe_links), as the report carries it
 * (the report's comm.model reads its α and B as the link of the α–β
 * cost model, src/comm/cost_model.h). */
struct sb_link_probe {
    int done;              /* 1 once probed (0: not probed; the rest is 0) */
    double alpha_s;        /* one-way latency of a small message, s */
    double bandwidth_Bps;  /* payload bytes per second of the slowest link */
    int peers;             /* links probed (one per other host, or 1) */
    int cross_host;        /* 1 if the probed links cross hosts */
    double seconds;        /* wall time the probe took */
    int intra_done;        /* 1: a link within one host was probed (on one host: the
                            * link above; across hosts: rank 0 with a rank of its host) */
    double intra_alpha_s, intra_bandwidth_Bps; /* that link's α and B */
    double gamma_s_per_byte; /* the reduction's γ on rank 0 (above), s per byte */
    double sized_seconds;    /* wall time of the sized ladders and γ (in seconds) */
    struct sb_link sized;       /* the cross-host (on one host: the probed) link's
                                 * sized classes (n_sizes 0: none) and its
                                 * exchange classes (n_exchange_sizes) */
    struct sb_link intra_sized; /* the within-host link's, where intra_done */
};

/* Probes the links of the job (collective over it) into *out (every rank
 * gets rank 0's result). A job without MPI or of one rank is not probed
 * (out->done = 0). Errors: SB_ERR_COMM naming the MPI call, file:line and
 * MPI's message; SB_ERR_NOMEM. */
sb_status sb_probe_links(const struct sb_job *job, struct sb_link_probe *out);

#endif
