/* Communicators: how replicas talk, behind one interface.
 *
 * Implementations: "mpi" (ranks of an MPI communicator, host buffers),
 * "local" (threads of one process sharing memory), "nccl" (GPU buffers,
 * NCCL) and "staged" (GPU buffers through pinned host memory over mpi or
 * local). Strategies call the
 * sb_comm_* wrappers below, which time each call and count it per kind, so
 * every strategy reports communication on one scale. */
#ifndef SB_COMM_H
#define SB_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "comm/allreduce_algo.h"
#include "core/half.h"
#include "core/status.h"

/* Kinds of traffic, as the report names them. */
enum sb_comm_kind {
    SB_COMM_ALLREDUCE = 0, /* all-reduce of gradients */
    SB_COMM_BROADCAST,     /* broadcast of parameters from rank 0 */
    SB_COMM_PUSH,          /* worker -> server (gradients), point-to-point */
    SB_COMM_PULL,          /* server -> worker (parameters), point-to-point */
    SB_COMM_REDUCE_SCATTER, /* reduce-scatter (sb_comm_ireduce_scatter) */
    SB_COMM_ALLGATHER,     /* all-gather (sb_comm_iallgather) */
    SB_COMM_SENDRECV,      /* point-to-point activations and their gradients between
                            * pipeline stages (sb_comm_isend/irecv), nccl-tests' sendrecv */
    SB_COMM_NKINDS
};

/* What a communicator is for, as the report groups traffic
 * (comm.by_role): the axes of a process grid (comm/grid.h) and the levels
 * of a multi-host job. A communicator is SB_COMM_ROLE_WORLD unless its
 * maker says otherwise; a split inherits its parent's role until the
 * caller sets it. */
enum sb_comm_role {
    SB_COMM_ROLE_WORLD = 0,  /* every rank of the job */
    SB_COMM_ROLE_DP,         /* data-parallel: replicas of one model part (gradient sync) */
    SB_COMM_ROLE_TP,         /* tensor-parallel: the shards of one layer */
    SB_COMM_ROLE_PP,         /* pipeline: the stages of one model replica */
    SB_COMM_ROLE_HOST_LOCAL, /* the ranks of one host */
    SB_COMM_ROLE_CROSS_HOST, /* one rank per host */
    SB_COMM_NROLES
};

/* Totals for one kind, seen from one rank. bytes counts the message size as
 * nccl-tests does: for an all-reduce of n floats, 4n bytes per call. */
struct sb_comm_counter {
    long calls;
    double bytes;
    double seconds;
};

/* One stage of a multi-stage all-reduce algorithm (hierarchical's
 * reduce-scatter within the host, all-reduce across hosts, all-gather
 * within the host), counted by the communicator that runs the algorithm:
 * one call and its bytes (this rank's message of the stage, nccl-tests'
 * convention) when the stage is issued, its seconds from issue to
 * completion as observed. The report writes them under the algorithm
 * (comm.allreduce.algorithms.<name>.stages) with their own busbw. */
struct sb_comm_stage {
    const char *name;            /* "intra_host_reduce_scatter", ... */
    enum sb_allreduce_algo algo; /* the algorithm it is a stage of */
    enum sb_comm_kind kind;      /* the collective it is (its busbw factor) */
    int ranks;                   /* ranks of the stage's collective (n of the factor) */
    struct sb_comm_counter counter;
};
#define SB_COMM_STAGES_MAX 4

struct sb_comm;

/* A non-blocking all-reduce in flight (sb_comm_iallreduce .. sb_comm_wait).
 * The caller owns the struct (e.g. one per gradient bucket) and must keep it
 * and the buffer alive, and leave the buffer untouched, until completion.
 * The wrappers fill bytes, start_s and done_s; `impl` belongs to the
 * communicator (an MPI_Request array for "mpi", an event for a GPU one). */
struct sb_comm_request {
    void *impl;      /* the communicator's handle; NULL once completed */
    size_t bytes;    /* message size, 4n for n floats (nccl-tests' convention) */
    double start_s;  /* sb_now_s() when the call was issued */
    double done_s;   /* sb_now_s() when completion was first observed */
    int done;        /* 1 once completed (buffer holds the sum) */
    enum sb_comm_kind kind; /* the counter its seconds go to (set by the wrapper) */
    enum sb_allreduce_algo algo; /* what ran: set by the op (LIBRARY unless it says) */
    int index;       /* set by the caller (ddp: the bucket), for the flight
                      * recorder and the watchdog's message; untouched here */
    int64_t seq;     /* the flight recorder's number of this call (flight.h) */
};

struct sb_comm_ops {
    const char *name;
    /* buf (n) = sum over ranks of buf, in place, on every rank. */
    sb_status (*allreduce)(struct sb_comm *c, float *buf, size_t n);
    /* Same for doubles (metrics such as loss sums; not counted). */
    sb_status (*allreduce_f64)(struct sb_comm *c, double *buf, size_t n);
    /* buf (n) on every rank = buf on `root`. */
    sb_status (*broadcast)(struct sb_comm *c, float *buf, size_t n, int root);
    /* Blocking point-to-point send/receive of n floats; `kind` is the
     * counter the call belongs to (SB_COMM_PUSH, SB_COMM_PULL,
     * SB_COMM_SENDRECV; SB_COMM_NKINDS: uncounted), for a device-timed communicator that
     * credits the seconds itself. */
    sb_status (*send)(struct sb_comm *c, const float *buf, size_t n, int peer,
                      enum sb_comm_kind kind);
    sb_status (*recv)(struct sb_comm *c, float *buf, size_t n, int peer,
                      enum sb_comm_kind kind);
    /* Blocking receive of n floats from whichever rank sends first; *peer
     * = that rank. NULL where unsupported (e.g. "local"). */
    sb_status (*recv_any)(struct sb_comm *c, float *buf, size_t n, int *peer,
                          enum sb_comm_kind kind);
    void (*destroy)(struct sb_comm *c);
    /* Optional (NULL: sb_comm_iallreduce runs the blocking allreduce and the
     * request is complete at issue; then test and wait are never called).
     * Non-blocking all-reduce (sum, in place) of buf (n floats): starts it
     * and returns at once, with the communicator's handle in req->impl
     * (req->done = 0), or completes it before returning and sets
     * req->done = 1. Every rank must start its non-blocking collectives on
     * one communicator in the same order. buf must not be read or written
     * until completion. */
    sb_status (*iallreduce)(struct sb_comm *c, float *buf, size_t n,
                            struct sb_comm_request *req);
    /* Polls req without blocking; *done = 1 once complete (then releases
     * req->impl and sets it to NULL), else 0. Also drives progress: Open MPI
     * advances a non-blocking collective only inside MPI calls. Not called
     * again on a completed request. */
    sb_status (*test)(struct sb_comm *c, struct sb_comm_request *req, int *done);
    /* Blocks until req is complete, then releases req->impl (sets it NULL).
     * Not called on a completed request. */
    sb_status (*wait)(struct sb_comm *c, struct sb_comm_request *req);
    /* Optional (NULL where unsupported; the wrappers then fail):
     * non-blocking reduce-scatter and all-gather, first-class operations
     * (mpi: any block sizes; stratbench's ring reduce-scatter and
     * all-gather where the blocks are the ring's, else MPI_Ireduce_scatter
     * and MPI_Iallgatherv; nccl:
     * ncclReduceScatter and ncclAllGather, which need every counts[r]
     * equal; local and staged: none). test and wait complete them.
     * ireduce_scatter: every rank passes send (sum of counts[0..size)
     * floats); rank r receives block r of the elementwise sum, counts[r]
     * floats, into recv. iallgather: rank r contributes send (counts[r]
     * floats); recv (sum of counts) receives every rank's block in rank
     * order. counts must stay valid only during the call. */
    sb_status (*ireduce_scatter)(struct sb_comm *c, const float *send, float *recv,
                                 const size_t *counts, struct sb_comm_request *req);
    sb_status (*iallgather)(struct sb_comm *c, const float *send, float *recv,
                            const size_t *counts, struct sb_comm_request *req);
    /* Optional (NULL: sb_comm_isend/sb_comm_irecv run the blocking send/recv
     * and the request is complete at issue; then test and wait are never
     * called for it). Non-blocking point-to-point send/receive of n floats
     * to/from `peer`: starts the transfer and returns at once with the
     * communicator's handle in req->impl (req->done = 0), or completes it
     * and sets req->done = 1; test and wait complete it. Messages between
     * one pair of ranks match in issue order. buf must stay alive, and
     * (receive) untouched, until completion. */
    sb_status (*isend)(struct sb_comm *c, const float *buf, size_t n, int peer,
                       struct sb_comm_request *req);
    sb_status (*irecv)(struct sb_comm *c, float *buf, size_t n, int peer,
                       struct sb_comm_request *req);
    /* Collective: the members with the same color form a new communicator
     * *out (same op set, its own counters), ranked by key (ties by rank);
     * color < 0: the members that share memory with this one (one host;
     * "nccl" refuses it with SB_ERR_USAGE: NCCL has no such split). */
    sb_status (*split)(struct sb_comm *c, int color, int key, struct sb_comm **out);
    /* 1 for a communicator whose ops return before the transfer is done
     * (nccl: enqueued on a stream): it adds each call's seconds to the
     * counter of the call's kind itself, from CUDA events around the
     * transfer, and the wrappers add calls and bytes only (host clocks
     * would time the issue, not the transfer). */
    int device_timed;
    /* Optional (NULL: sb_comm_allreduce16 fails with SB_ERR_USAGE).
     * Blocking all-reduce (sum, in place) of buf (n floats) whose wire
     * carries 16-bit values in `fmt` while every addition is in fp32 (sum
     * in fp32, round once per hop; "mpi": src/comm/mpi_allreduce16.h).
     * Every rank ends with the same values. *convert_s (may be NULL) gains
     * the seconds spent converting (the compress/decompress phase). */
    sb_status (*allreduce16)(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                             double *convert_s);
    /* Optional (NULL: sb_comm_reduce_scatter16 fails with SB_ERR_USAGE).
     * Blocking reduce-scatter (sum) of send into recv with the blocks of
     * ireduce_scatter, its wire 16-bit in `fmt`, every addition in fp32
     * ("mpi": sb_rs16_ring, src/comm/mpi_allreduce16.h). */
    sb_status (*reduce_scatter16)(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                                  float *recv, const size_t *counts, double *convert_s);
    /* Optional (NULL: sb_comm_allgather16 fails with SB_ERR_USAGE).
     * Blocking all-gather with the blocks of iallgather whose wire carries
     * send rounded to 16 bits in `fmt` (2 bytes a value); recv receives
     * every rank's block decoded (exact: a 16-bit value is a float). For
     * values that are 16-bit already (--precision's parameters) the result
     * equals the fp32 all-gather's bit for bit ("mpi": MPI_Allgatherv of
     * MPI_UINT16_T). */
    sb_status (*allgather16)(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                             float *recv, const size_t *counts, double *convert_s);
    /* Optional, all three or none (NULL: the 16-bit point-to-point
     * wrappers fail with SB_ERR_USAGE; sb_comm_has_p2p16). isend16 and
     * irecv16 are isend and irecv whose message carries the n floats
     * rounded to 16 bits in `fmt` (2 bytes a value): the send rounds buf
     * at issue (buf may change once it returns), the receive writes the
     * decoded values into buf at completion (exact: a 16-bit value is a
     * float), so a value that is 16-bit already arrives bit for bit.
     * recv_any16 is recv_any's 16-bit form (blocking). "mpi": MPI_UINT16_T
     * words on tag 0 (src/comm/mpi_p2p.c). */
    sb_status (*isend16)(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                         int peer, struct sb_comm_request *req);
    sb_status (*irecv16)(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                         int peer, struct sb_comm_request *req);
    sb_status (*recv_any16)(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                            int *peer);
};

struct sb_comm {
    const struct sb_comm_ops *ops;
    int rank;                 /* 0 .. size-1 within this communicator */
    int size;
    void *impl;
    struct sb_comm_counter counters[SB_COMM_NKINDS];
    /* --allreduce: which algorithm a communicator that runs its own ("mpi")
     * uses for iallreduce; others ignore it. sb_comm_world_create sets it
     * from cfg->allreduce; otherwise SB_ALLREDUCE_AUTO (0). */
    enum sb_allreduce_algo allreduce_algo;
    /* The non-blocking all-reduces of counters[SB_COMM_ALLREDUCE] split by
     * the algorithm that ran (req->algo); reset with the counters. */
    struct sb_comm_counter allreduce_by_algo[SB_ALLREDUCE_NALGOS];
    /* The stages of the multi-stage algorithms this communicator runs
     * (n_stages of them; set up with the algorithm, e.g. by
     * sb_comm_mpi_group_hosts); reset with the counters. */
    struct sb_comm_stage stages[SB_COMM_STAGES_MAX];
    int n_stages;
    /* What the communicator is for (comm.by_role in the report). */
    enum sb_comm_role role;
};

/* The traffic of the communicators of one role, seen from one rank:
 * `ranks` is that communicator's size (the n of its busbw factors; the
 * first one's where several of one role are summed), 0 when the role has
 * none. */
struct sb_comm_role_totals {
    int ranks;
    struct sb_comm_counter counters[SB_COMM_NKINDS];
};

/* Timed, counted wrappers: each adds one call, its bytes and its seconds
 * to c->counters[kind], and records the call in this thread's flight
 * recorder (comm/flight.h), whose entry gives the watchdog its deadline
 * (comm/watchdog.h). Errors: SB_ERR_COMM with the library's message (or the
 * watchdog's line on a timeout); SB_ERR_INTERRUPTED on SIGINT/SIGTERM. */
sb_status sb_comm_allreduce(struct sb_comm *c, float *buf, size_t n);
sb_status sb_comm_broadcast(struct sb_comm *c, float *buf, size_t n, int root);
sb_status sb_comm_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                       enum sb_comm_kind kind);
sb_status sb_comm_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                       enum sb_comm_kind kind);
/* Counted like sb_comm_recv, from any source (MPI_ANY_SOURCE); *peer = the
 * sender's rank. Errors: SB_ERR_COMM; SB_ERR_INTERNAL where the
 * communicator has no recv_any. */
sb_status sb_comm_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                           enum sb_comm_kind kind);
/* Counted non-blocking all-reduce (sum, in place) of buf (n floats) into
 * the caller's *req (see struct sb_comm_request): counts one all-reduce
 * call and 4n bytes when issued; its seconds (done_s - start_s, completion
 * as first observed by sb_comm_test or sb_comm_wait on this rank) are added
 * when completion is observed. Errors: SB_ERR_COMM. */
sb_status sb_comm_iallreduce(struct sb_comm *c, float *buf, size_t n,
                             struct sb_comm_request *req);
/* Counted non-blocking point-to-point send (isend) or receive (irecv) of n
 * floats to/from `peer`, as `kind` (SB_COMM_PUSH, SB_COMM_PULL, or
 * SB_COMM_SENDRECV for a pipeline's activations and gradients), into the
 * caller's *req: counts one call and 4n bytes of `kind` when issued (as
 * sb_comm_send/sb_comm_recv do) and its seconds when completion is observed
 * by sb_comm_test or sb_comm_wait; records a flight-recorder entry with the
 * peer ("push to rank 1"), which the watchdog names if the wait times out.
 * Several may be in flight at once; wait on each (any order). A
 * communicator without the ops sends/receives blocking at issue (then the
 * caller's issue order must be deadlock-free on its own). buf must stay
 * alive, and a receive's untouched, until completion. Sets req->index to
 * -1. Errors: SB_ERR_COMM, SB_ERR_NOMEM. */
sb_status sb_comm_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                        enum sb_comm_kind kind, struct sb_comm_request *req);
sb_status sb_comm_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                        enum sb_comm_kind kind, struct sb_comm_request *req);
/* Polls req without blocking (and lets the library progress it); *done = 1
 * once complete, recording req->done_s. Safe on a completed request.
 * Errors: SB_ERR_COMM with the library's message; on the watchdog's
 * deadline SB_ERR_COMM naming the call and the ranks that did not arrive;
 * SB_ERR_INTERRUPTED on SIGINT/SIGTERM. */
sb_status sb_comm_test(struct sb_comm *c, struct sb_comm_request *req, int *done);
/* Blocks until req is complete, recording req->done_s. Safe on a completed
 * request. Errors: those of sb_comm_test. */
sb_status sb_comm_wait(struct sb_comm *c, struct sb_comm_request *req);
/* Counted non-blocking reduce-scatter and all-gather (see the ops):
 * one call and 4 * (sum of counts) bytes when issued (the whole buffer, as
 * nccl-tests counts them), the seconds when completion is observed by
 * sb_comm_test or sb_comm_wait. Errors: SB_ERR_COMM; SB_ERR_USAGE when the
 * communicator lacks the op. */
sb_status sb_comm_ireduce_scatter(struct sb_comm *c, const float *send, float *recv,
                                  const size_t *counts, struct sb_comm_request *req);
sb_status sb_comm_iallgather(struct sb_comm *c, const float *send, float *recv,
                             const size_t *counts, struct sb_comm_request *req);

/* Counted 16-bit all-reduce (the op allreduce16; src/comm/comm.c):
 * one all-reduce call of 2n bytes (the wire's message size: half of the
 * fp32 all-reduce's 4n) and its seconds in c->counters[SB_COMM_ALLREDUCE],
 * recorded in the flight recorder like the other calls. Errors:
 * SB_ERR_USAGE when the communicator lacks the op; those of the op.
 * *convert_s (may be NULL) gains the op's conversion seconds (also
 * counted in the call's seconds). */
sb_status sb_comm_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                              double *convert_s);

/* Counted 16-bit reduce-scatter (the op reduce_scatter16; comm.c),
 * blocking, for a caller that tracks its reduce-scatters as requests
 * (zero): fills *req as a completed request (kind reduce-scatter, bytes
 * 2 x sum(counts): half of sb_comm_ireduce_scatter's, start and done
 * times), counts one call of those bytes and its seconds in
 * c->counters[SB_COMM_REDUCE_SCATTER] and records it in the flight
 * recorder. Errors: SB_ERR_USAGE when the communicator lacks the op; those
 * of the op. *convert_s (may be NULL) gains its conversion seconds. */
sb_status sb_comm_reduce_scatter16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                                   float *recv, const size_t *counts,
                                   struct sb_comm_request *req, double *convert_s);

/* Counted 16-bit all-gather (the op allgather16; comm.c), blocking, for a
 * caller that tracks its all-gathers as requests (zero's parameter
 * gathers under --precision bf16|fp16): fills *req as a completed request
 * (kind all-gather, bytes 2 x sum(counts): half of sb_comm_iallgather's),
 * counts one call of those bytes and its seconds in
 * c->counters[SB_COMM_ALLGATHER] and records it in the flight recorder.
 * Errors: SB_ERR_USAGE when the communicator lacks the op; those of the
 * op. *convert_s (may be NULL) gains its conversion seconds. */
sb_status sb_comm_allgather16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                              float *recv, const size_t *counts, struct sb_comm_request *req,
                              double *convert_s);

/* Counted 16-bit point-to-point (the ops isend16, irecv16, recv_any16;
 * comm.c): as sb_comm_isend, sb_comm_irecv and sb_comm_recv_any, one call
 * of `kind` each, but its bytes the wire's, 2n (half of the fp32 call's
 * 4n), and the values rounded to 16 bits in `fmt` on the way (exact for
 * values that are 16-bit already: --precision's gradients and
 * parameters). A receive's buf holds the values once the request
 * completes (sb_comm_wait). sb_comm_send16 and sb_comm_recv16 are the
 * blocking forms (issue, then wait). Errors: SB_ERR_USAGE when the
 * communicator lacks the ops; those of the op and of sb_comm_wait. */
sb_status sb_comm_isend16(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                          int peer, enum sb_comm_kind kind, struct sb_comm_request *req);
sb_status sb_comm_irecv16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                          int peer, enum sb_comm_kind kind, struct sb_comm_request *req);
sb_status sb_comm_send16(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                         int peer, enum sb_comm_kind kind);
sb_status sb_comm_recv16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                         int peer, enum sb_comm_kind kind);
sb_status sb_comm_recv_any16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                             int *peer, enum sb_comm_kind kind);

/* 1 when c has the 16-bit point-to-point ops ("mpi"), else 0. */
int sb_comm_has_p2p16(const struct sb_comm *c);

/* Collective over c: the members with the same color (>= 0) form a new
 * communicator *out, ranked by key (ties by rank in c), with c's role
 * (its maker may change it); color < 0: the members that share memory
 * with this one. Errors: SB_ERR_USAGE when c cannot be split,
 * SB_ERR_COMM, SB_ERR_NOMEM. (src/comm/groups.c) */
sb_status sb_comm_split(struct sb_comm *c, int color, int key, struct sb_comm **out);

/* The two levels of a job on several hosts, for hierarchical collectives
 * (src/comm/groups.c): *local = the ranks of this rank's host, *cross =
 * the ranks with this rank's local rank on every host (one per host).
 * Hosts are the ranks that share memory (MPI_COMM_TYPE_SHARED), or, with
 * ranks_per_host > 0, consecutive groups of that many ranks (to model
 * hosts inside one machine). Every host must hold the same number of
 * ranks. Collective over c. Errors: SB_ERR_USAGE (uneven hosts, or a
 * communicator without split), SB_ERR_COMM, SB_ERR_NOMEM. */
sb_status sb_comm_split_hosts(struct sb_comm *c, int ranks_per_host, struct sb_comm **local,
                              struct sb_comm **cross);

/* Uncounted point-to-point send/receive of n floats (recorded in the
 * flight recorder as "exchange"): traffic that is not training's, e.g.
 * central gathering its servers' shards for --save-params. Errors: as
 * sb_comm_send. */
sb_status sb_comm_send_uncounted(struct sb_comm *c, const float *buf, size_t n, int peer);
sb_status sb_comm_recv_uncounted(struct sb_comm *c, float *buf, size_t n, int peer);

/* 1 when c's non-blocking all-reduce returns before the transfer is done,
 * so it can overlap computation (ddp starts buckets during backward only
 * then); 0 for a communicator without the op, whose all-reduce completes
 * at issue (staged: its copies need the host between them). */
int sb_comm_overlaps(const struct sb_comm *c);

/* Sums buf (n doubles) over the communicator's members, in place. Uncounted:
 * metrics reductions are not training traffic (recorded in the flight
 * recorder as "metrics"). Errors: SB_ERR_COMM (the watchdog's deadline
 * included), SB_ERR_INTERRUPTED. */
sb_status sb_comm_allreduce_f64(struct sb_comm *c, double *buf, size_t n);

/* Report name of the algorithm `a` as run by communicator c: the
 * algorithm's name, or the communicator's ("mpi", "nccl", ...) for
 * SB_ALLREDUCE_LIBRARY. */
const char *sb_comm_algo_name(const struct sb_comm *c, enum sb_allreduce_algo a);

/* Zeroes all counters (at the end of warm-up). */
void sb_comm_reset_counters(struct sb_comm *c);

/* Frees the communicator; safe on NULL. */
void sb_comm_destroy(struct sb_comm *c);

/* Report name of a kind: "allreduce", "broadcast", "push", "pull",
 * "reduce_scatter", "allgather", "sendrecv"; "unknown" out of range. */
const char *sb_comm_kind_name(enum sb_comm_kind kind);

/* Report name of a role: "world", "dp", "tp", "pp", "host_local",
 * "cross_host"; "unknown" out of range. */
const char *sb_comm_role_name(enum sb_comm_role role);

/* Adds c's counters to t (t->ranks = c->size if t has none yet). */
void sb_comm_role_add(struct sb_comm_role_totals *t, const struct sb_comm *c);

/* Algorithm bandwidth in GB/s (10^9 bytes/s), as nccl-tests'
 * PERFORMANCE.md defines it: algbw = bytes / seconds, the message size over
 * the time of the call; 0 when seconds <= 0. busbw = algbw x
 * sb_comm_busbw_factor. */
double sb_comm_algbw_GBps(double bytes, double seconds);

/* Bus-bandwidth factor of a kind over n ranks, as nccl-tests'
 * PERFORMANCE.md defines it: all-reduce 2(n-1)/n; reduce-scatter and
 * all-gather (n-1)/n; broadcast 1; point-to-point push, pull and sendrecv
 * 1 (each byte crosses one link once; nccl-tests' sendrecv_perf). */
double sb_comm_busbw_factor(enum sb_comm_kind kind, int n);

/* Making communicators (mpi, local, staged, nccl, the --comm registry,
 * communicators over a parent's members): comm/comm_create.h, included
 * here so that a user of communicators needs one header. */
#include "comm/comm_create.h"

#endif
