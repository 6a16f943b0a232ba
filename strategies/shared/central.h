/* Internal to strategy "central" (central.c, central_server.c): the state
 * of one rank of a parameter-server job and the step pieces shared by the
 * two files. docs/central.md describes the protocol.
 *
 * Ranks: servers 0..n_servers-1, workers first_worker..first_worker+N-1.
 * --servers 0: one server, rank 0, which is also worker 0 (first_worker 0).
 * --servers K >= 1: K dedicated servers; worker w is rank K + w. Server k
 * owns the contiguous shard sb_split_range(P, n_servers, k) of the flat
 * parameter buffer and the momentum for that shard only. */
#ifndef SB_CENTRAL_H
#define SB_CENTRAL_H

#include "comm/cost_model.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/precision.h"
#include "strategies/shared/replica.h"

/* central's own flags (cfg->strategy_opts). */
struct central_opts {
    int servers; /* --servers: 0 = rank 0 also trains, K = dedicated */
    int async;   /* --async: no step barrier (stale gradients) */
};

/* central's options in `cfg`. */
static inline const struct central_opts *sb_central_opts(const struct sb_config *cfg)
{
    return (const struct central_opts *)(const void *)cfg->strategy_opts;
}

/* The α–β model of central, synchronous (its comm_model op): n workers push M
 * bytes of gradients and pull M bytes of parameters per step. k >= 1
 * dedicated servers, each owning M/k: a server's link carries nM/k each way
 * in n messages, a worker's M each way in k, one direction after the other
 * (BytePS, OSDI 2020), each message costing α at its ends, as Thakur,
 * Rabenseifner & Gropp (IJHPCA 2005) charge the p-1 messages of their
 * pairwise-exchange algorithms (p-1)α and as the ring costs each of its
 * steps: max(2(kα + M/B), 2n(α + M/(kB))). A worker pulls, computes, then
 * pushes, so its two directions cannot overlap; a server's could, by up to
 * 1 - 1/n of a direction when the pulls end one after another, but on hosts
 * whose links share fairly among the n flows they end together and the
 * server's directions take turns: measured on the one-machine cluster with cubic hosts
 * (docs/cost-model.md, "central's two directions"), the server's link took
 * 1.96-2.00 nM/B at 4 and 8 workers, 100 Mbit/s and 1 Gbit/s. k == 0 (rank 0
 * serves and trains): the other n-1 workers' M cross rank 0's link each way:
 * 2(n-1)(α + M/B). 0 when no byte crosses a link (n <= 1 and k == 0). */
double sb_central_cost_s(const struct sb_link *l, int n_workers, int k_servers, double bytes);

/* Staleness histogram bins: values 0..STALE_BINS-2 exactly, the last bin
 * holds every larger value (the exact maximum is kept separately). */
#define STALE_BINS 1024

struct central {
    struct sb_replica *replica; /* full model, no optimizer (servers own it) */
    struct sb_comm *comm;       /* the whole world (servers and workers; no grid: central.c) */
    int n_servers;              /* server ranks 0..n_servers-1 (>= 1) */
    int first_worker;           /* world rank of worker 0 (= --servers) */
    int n_workers;
    int server;                 /* this rank's shard index, or -1 */
    int worker;                 /* this rank's worker index, or -1 */
    int async;                  /* --async: no step barrier */
    /* Server state (server >= 0). */
    int shard_first, shard_count; /* this rank's shard, floats */
    struct sb_optimizer opt;    /* over the shard (shard_count) */
    float *sum;                 /* (shard_count) sync: gradient sum */
    /* Sync: (max(1, N-1) x shard_count) worker w's pushed shard at
     * inbox + (w-1) shard_count for w >= 1 (worker 0's lands in sum), all
     * received at once. Async: (shard_count) one push at a time. */
    float *inbox;
    /* (2 max(n_servers, n_workers)) requests of the exchanges in flight. */
    struct sb_comm_request *requests;
    long version;               /* updates applied to the shard so far */
    long *sent_version;         /* (n_workers) version last sent to worker w */
    /* Staleness of applied gradients, this rank: [0, STALE_BINS) counts,
     * then the sum and the count of samples; stale_max the largest. */
    double *stale_local;
    long stale_max;
    /* Job-wide staleness (world rank 0, refreshed by evaluate). */
    double g_stale_median, g_stale_max, g_stale_mean, g_stale_count;
    int params_current;         /* every shard gathered to rank 0 since the last step (the
                                 * same value on every rank) */
    /* --precision bf16|fp16 on a communicator with 16-bit point-to-point
     * (sb_central_wire16): pushes and pulls carry 16-bit values in
     * wire_fmt, 2 bytes each; else fp32. */
    int wire16;
    enum sb_half_format wire_fmt;
    /* --precision fp16: the loss scaler (docs/precision.md, "fp16 under
     * central"). Every rank's replica->scaler is its S: workers scale by
     * it, servers unscale by it. A worker whose gradient holds an inf or a
     * NaN anywhere writes +inf into the first value of every shard it
     * pushes (sb_central_flag_push), so every server sees every worker's
     * flag and all decide alike. */
    int scaled;
    /* Sync, scaled, a worker that is no server: (|shard 0| + 1) floats,
     * where server 0's pull lands: the shard, then its skip word (0 or 1),
     * which the worker's scaler is updated with. NULL otherwise. */
    float *pull0;
    /* Async, scaled, a server: (n_workers) worker w's scaler as its pushes
     * drive it (every push is one scaler step; worker w's own copy makes
     * the same decisions from the same flags). Index 0 unused with
     * --servers 0 (rank 0's own is replica->scaler). NULL otherwise. */
    struct sb_loss_scaler *push_scaler;
    long pushes_skipped; /* async server: pushes it skipped, all workers' */
    /* Job-wide, per rank (world rank 0, refreshed by evaluate): S and the
     * skipped steps (sb_central_precision_state), fp16 only. */
    double *g_loss_scale, *g_skipped;
};

/* Whether central's pushes and pulls go over a 16-bit wire under cfg:
 * --precision bf16|fp16 (its gradients and parameters are 16-bit values,
 * so the 16-bit message carries them exactly) on the CPU, whose "mpi"
 * communicator has the 16-bit point-to-point ops (staged and nccl, on
 * GPUs, have none yet: fp32 there). *fmt (may be NULL) = the format. */
int sb_central_wire16(const struct sb_config *cfg, enum sb_half_format *fmt);

/* The push and pull messages of c, in the wire's format (c->wire16:
 * 16-bit, else fp32), counted as `kind` (SB_COMM_PUSH, SB_COMM_PULL) with
 * the wire's bytes (strategies/shared/central_wire.c): non-blocking send
 * and receive (sb_comm_isend/irecv or their 16-bit forms), blocking send
 * and receive, and the blocking receive from any source. Errors: those of
 * the sb_comm_* calls they make. */
sb_status sb_central_isend(struct central *c, const float *buf, size_t n, int peer,
                           enum sb_comm_kind kind, struct sb_comm_request *req);
sb_status sb_central_irecv(struct central *c, float *buf, size_t n, int peer,
                           enum sb_comm_kind kind, struct sb_comm_request *req);
sb_status sb_central_send(struct central *c, const float *buf, size_t n, int peer,
                          enum sb_comm_kind kind);
sb_status sb_central_recv(struct central *c, float *buf, size_t n, int peer,
                          enum sb_comm_kind kind);
sb_status sb_central_recv_any(struct central *c, float *buf, size_t n, int *peer,
                              enum sb_comm_kind kind);

/* fp16's loss scaling under central (strategies/shared/central_scale.c;
 * nothing when !c->scaled). */

/* Worker side, before the push: *found = 1 when any of the P gradient
 * values is inf or NaN, and then +inf is written into the first value of
 * every shard (each server's sum then holds an inf, so every server skips
 * the step or the push: the gradient is discarded anyway). Errors: the
 * backend's. */
sb_status sb_central_flag_push(struct central *c, int *found);

/* Server side: unscales grads[0..n) (backend memory) by 1/S of ls, checks
 * them, and updates ls (sb_loss_scaler_update); *skip = 1 when the step
 * (sync) or the push (async) must be skipped. Errors: the backend's. */
sb_status sb_central_decide(struct central *c, struct sb_loss_scaler *ls, float *grads,
                            size_t n, int *skip);

/* Whether this rank is server 0 of a synchronous fp16 run, whose pulls
 * carry the skip word after its shard. */
int sb_central_pull_word(const struct central *c);

/* Server 0, sync: writes its shard followed by the skip word (1.0 or 0.0)
 * into c->sum (shard_count + 1 floats), the buffer its pulls send. */
sb_status sb_central_pull_with_word(struct central *c, int skip);

/* Worker that is no server, sync, after its pulls: copies shard 0 from
 * c->pull0 into the parameters and updates its scaler with server 0's skip
 * word. `found`: its own flag (sb_central_flag_push); a flag the word does
 * not echo is SB_ERR_INTERNAL (the ranks would disagree). */
sb_status sb_central_read_word(struct central *c, int found);

/* This rank's S and skipped steps as the report states them: sync, the
 * replica's scaler (every rank the same); async, a server's: the smallest
 * S of the workers' scalers it drives and the pushes it skipped (its own
 * worker's included with --servers 0); a worker's: its own scaler. */
void sb_central_precision_state(const struct central *c, double *loss_scale, long *skipped);

/* Shard k of P parameters over n_servers: [*first, *first + *count). */
void sb_central_shard(const struct central *c, int k, int *first, int *count);

/* Server side of one synchronous step: receives shard `server` of every
 * worker's gradient (all N receives in flight at once, into separate
 * buffers), sums them in worker order (so the sum is deterministic), applies
 * SGD with momentum to the shard, sends the shard back to every worker (all
 * N sends at once).
 * On --servers 0 the caller has already computed rank 0's own gradient.
 * Adds comm and optimizer times to out. Errors: SB_ERR_COMM. */
sb_status sb_central_server_sync(struct sb_strategy *s, struct central *c,
                                 struct sb_step_result *out);

/* Server side of one asynchronous step: applies exactly N gradient shards
 * (its own first on --servers 0, then pushes from any worker in arrival
 * order), each at once, replying to its sender with the updated shard, and
 * records each one's staleness. Errors: SB_ERR_COMM, SB_ERR_INTERNAL for a
 * push from a rank that is no worker. */
sb_status sb_central_server_async(struct sb_strategy *s, struct central *c,
                                  struct sb_step_result *out);

#endif
