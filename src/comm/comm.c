/* Timed and counted wrappers around a communicator's ops; see comm.h. */
#include "comm/comm.h"

#include <string.h>

#include "comm/flight.h"
#include "core/clock.h"
#include "core/nvtx.h"

/* The flight recorder names a counted call by its communicator kind. */
_Static_assert((int)SB_FLIGHT_ALLREDUCE == (int)SB_COMM_ALLREDUCE &&
                   (int)SB_FLIGHT_BROADCAST == (int)SB_COMM_BROADCAST &&
                   (int)SB_FLIGHT_PUSH == (int)SB_COMM_PUSH &&
                   (int)SB_FLIGHT_PULL == (int)SB_COMM_PULL &&
                   (int)SB_FLIGHT_REDUCE_SCATTER == (int)SB_COMM_REDUCE_SCATTER &&
                   (int)SB_FLIGHT_ALLGATHER == (int)SB_COMM_ALLGATHER &&
                   (int)SB_FLIGHT_SENDRECV == (int)SB_COMM_SENDRECV &&
                   (int)SB_FLIGHT_METRICS == (int)SB_COMM_NKINDS,
               "flight-recorder kinds must equal communicator kinds");

/* A counted call in progress. */
struct call {
    double t0;   /* sb_now_s() at issue */
    int64_t seq; /* its flight-recorder entry */
};

/* Opens the NVTX range `name` of a counted call of `kind` and `bytes` to or
 * from `peer` (-1 for none), records it in the flight recorder and returns
 * it. */
static struct call begin_named(const char *name, enum sb_comm_kind kind, size_t bytes, int peer,
                               int receive)
{
    sb_nvtx_push_bytes(name, SB_NVTX_COMM, bytes);
    struct call k = {sb_now_s(), sb_flight_issue((enum sb_flight_kind)kind, bytes, peer, -1)};
    if (receive) sb_flight_mark_receive();
    return k;
}

/* begin_named with the kind's own name. */
static struct call begin(enum sb_comm_kind kind, size_t bytes, int peer, int receive)
{
    return begin_named(sb_comm_kind_name(kind), kind, bytes, peer, receive);
}

/* Ends call k: adds one call, its bytes and its seconds to
 * c->counters[kind], completes its flight entry, closes the range and
 * returns the call's status. */
static sb_status end(struct sb_comm *c, enum sb_comm_kind kind, size_t bytes, struct call k,
                     sb_status st)
{
    struct sb_comm_counter *ctr = &c->counters[kind];
    ctr->calls++;
    ctr->bytes += (double)bytes;
    if (!c->ops->device_timed) ctr->seconds += sb_now_s() - k.t0;
    sb_flight_complete(k.seq, st == SB_OK);
    sb_nvtx_pop();
    return st;
}

sb_status sb_comm_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    struct call k = begin(SB_COMM_ALLREDUCE, n * sizeof(float), -1, 0);
    sb_status st = c->ops->allreduce(c, buf, n);
    return end(c, SB_COMM_ALLREDUCE, n * sizeof(float), k, st);
}

sb_status sb_comm_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    struct call k = begin(SB_COMM_BROADCAST, n * sizeof(float), root, c->rank != root);
    sb_status st = c->ops->broadcast(c, buf, n, root);
    return end(c, SB_COMM_BROADCAST, n * sizeof(float), k, st);
}

sb_status sb_comm_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                       enum sb_comm_kind kind)
{
    struct call k = begin(kind, n * sizeof(float), peer, 0);
    sb_status st = c->ops->send(c, buf, n, peer, kind);
    return end(c, kind, n * sizeof(float), k, st);
}

sb_status sb_comm_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                       enum sb_comm_kind kind)
{
    struct call k = begin(kind, n * sizeof(float), peer, 1);
    sb_status st = c->ops->recv(c, buf, n, peer, kind);
    return end(c, kind, n * sizeof(float), k, st);
}

sb_status sb_comm_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                           enum sb_comm_kind kind)
{
    if (!c->ops->recv_any)
        return sb_error(SB_ERR_INTERNAL, "%s communicator: no receive from any source",
                        c->ops->name);
    struct call k = begin(kind, n * sizeof(float), -1, 1);
    sb_status st = c->ops->recv_any(c, buf, n, peer, kind);
    struct sb_flight_entry *e = sb_flight_current();
    if (!st && e && e->seq == k.seq) e->peer = *peer;
    return end(c, kind, n * sizeof(float), k, st);
}

/* Marks req complete now and adds its seconds to its kind's counter (and,
 * for an all-reduce, to its algorithm's). */
static void complete(struct sb_comm *c, struct sb_comm_request *req)
{
    req->done = 1;
    req->done_s = sb_now_s();
    if (!c->ops->device_timed) { /* a device-timed communicator adds its own seconds */
        c->counters[req->kind].seconds += req->done_s - req->start_s;
        if (req->kind == SB_COMM_ALLREDUCE && (unsigned)req->algo < SB_ALLREDUCE_NALGOS)
            c->allreduce_by_algo[req->algo].seconds += req->done_s - req->start_s;
    }
}

/* Counts one call of `kind` and `bytes` to or from `peer` (-1 for none)
 * now, records it in the flight recorder and starts req's clock. */
static void request_begin_peer(struct sb_comm *c, enum sb_comm_kind kind, size_t bytes,
                               int peer, struct sb_comm_request *req)
{
    req->impl = NULL;
    req->bytes = bytes;
    req->done = 0;
    req->done_s = 0.0;
    req->kind = kind;
    req->algo = SB_ALLREDUCE_LIBRARY;
    req->start_s = sb_now_s();
    req->seq = sb_flight_issue((enum sb_flight_kind)kind, bytes, peer, req->index);
    c->counters[kind].calls++;
    c->counters[kind].bytes += (double)bytes;
}

static void request_begin(struct sb_comm *c, enum sb_comm_kind kind, size_t bytes,
                          struct sb_comm_request *req)
{
    request_begin_peer(c, kind, bytes, -1, req);
}

/* After issuing req with status st: completes its flight entry if it is
 * done (or failed), else leaves it in flight for sb_comm_test/wait. */
static void request_issued(struct sb_comm *c, struct sb_comm_request *req, sb_status st)
{
    if (st == SB_OK && req->done) complete(c, req);
    if (st || req->done) sb_flight_complete(req->seq, st == SB_OK);
    else sb_flight_leave();
}

sb_status sb_comm_iallreduce(struct sb_comm *c, float *buf, size_t n,
                             struct sb_comm_request *req)
{
    request_begin(c, SB_COMM_ALLREDUCE, n * sizeof(float), req);
    sb_nvtx_push_bytes("allreduce.issue", SB_NVTX_COMM, req->bytes);
    sb_status st;
    if (c->ops->iallreduce) {
        st = c->ops->iallreduce(c, buf, n, req);
    } else { /* a communicator without the op: blocking, complete at issue */
        st = c->ops->allreduce(c, buf, n);
        req->done = 1;
    }
    if ((unsigned)req->algo < SB_ALLREDUCE_NALGOS) {
        c->allreduce_by_algo[req->algo].calls++;
        c->allreduce_by_algo[req->algo].bytes += (double)req->bytes;
    }
    sb_nvtx_pop();
    request_issued(c, req, st);
    return st;
}

/* Issues a point-to-point send of `send` (recv NULL) or receive into
 * `recv` of n floats through the communicator's isend/irecv, or, without
 * them, its blocking send/recv (complete at issue). */
static sb_status issue_p2p(struct sb_comm *c, const float *send, float *recv, size_t n,
                           int peer, enum sb_comm_kind kind, struct sb_comm_request *req)
{
    int receive = recv != NULL;
    req->index = -1;
    request_begin_peer(c, kind, n * sizeof(float), peer, req);
    if (receive) sb_flight_mark_receive();
    sb_nvtx_push_bytes(sb_comm_kind_name(kind), SB_NVTX_COMM, n * sizeof(float));
    sb_status st;
    if (receive && c->ops->irecv) {
        st = c->ops->irecv(c, recv, n, peer, req);
    } else if (!receive && c->ops->isend) {
        st = c->ops->isend(c, send, n, peer, req);
    } else { /* a communicator without the op: blocking, complete at issue */
        st = receive ? c->ops->recv(c, recv, n, peer, kind) : c->ops->send(c, send, n, peer, kind);
        req->done = 1;
    }
    sb_nvtx_pop();
    request_issued(c, req, st);
    return st;
}

/* Issues a 16-bit point-to-point send of `send` (recv NULL) or receive
 * into `recv` of n floats through the communicator's isend16/irecv16,
 * counted as `kind` with the wire's 2n bytes. */
static sb_status issue_p2p16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                             float *recv, size_t n, int peer, enum sb_comm_kind kind,
                             struct sb_comm_request *req)
{
    int receive = recv != NULL;
    if (!sb_comm_has_p2p16(c))
        return sb_error(SB_ERR_USAGE, "the %s communicator has no 16-bit point-to-point",
                        c->ops->name);
    size_t bytes = n * sizeof(uint16_t);
    req->index = -1;
    request_begin_peer(c, kind, bytes, peer, req);
    if (receive) sb_flight_mark_receive();
    sb_nvtx_push_bytes(receive ? "recv16" : "send16", SB_NVTX_COMM, bytes);
    sb_status st = receive ? c->ops->irecv16(c, fmt, recv, n, peer, req)
                           : c->ops->isend16(c, fmt, send, n, peer, req);
    sb_nvtx_pop();
    request_issued(c, req, st);
    return st;
}

sb_status sb_comm_isend16(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                          int peer, enum sb_comm_kind kind, struct sb_comm_request *req)
{
    return issue_p2p16(c, fmt, buf, NULL, n, peer, kind, req);
}

sb_status sb_comm_irecv16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                          int peer, enum sb_comm_kind kind, struct sb_comm_request *req)
{
    static float none; /* a receive needs a non-NULL pointer here, even for n = 0 */
    return issue_p2p16(c, fmt, NULL, buf ? buf : &none, n, peer, kind, req);
}

sb_status sb_comm_send16(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                         int peer, enum sb_comm_kind kind)
{
    struct sb_comm_request req;
    SB_TRY(sb_comm_isend16(c, fmt, buf, n, peer, kind, &req));
    return sb_comm_wait(c, &req);
}

sb_status sb_comm_recv16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                         int peer, enum sb_comm_kind kind)
{
    struct sb_comm_request req;
    SB_TRY(sb_comm_irecv16(c, fmt, buf, n, peer, kind, &req));
    return sb_comm_wait(c, &req);
}

sb_status sb_comm_recv_any16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                             int *peer, enum sb_comm_kind kind)
{
    if (!sb_comm_has_p2p16(c))
        return sb_error(SB_ERR_USAGE, "the %s communicator has no 16-bit point-to-point",
                        c->ops->name);
    size_t bytes = n * sizeof(uint16_t);
    struct call k = begin_named("recv_any16", kind, bytes, -1, 1);
    sb_status st = c->ops->recv_any16(c, fmt, buf, n, peer);
    struct sb_flight_entry *e = sb_flight_current();
    if (!st && e && e->seq == k.seq) e->peer = *peer;
    return end(c, kind, bytes, k, st);
}

int sb_comm_has_p2p16(const struct sb_comm *c)
{
    return c->ops->isend16 && c->ops->irecv16 && c->ops->recv_any16;
}

sb_status sb_comm_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                        enum sb_comm_kind kind, struct sb_comm_request *req)
{
    return issue_p2p(c, buf, NULL, n, peer, kind, req);
}

sb_status sb_comm_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                        enum sb_comm_kind kind, struct sb_comm_request *req)
{
    static float none; /* a receive needs a non-NULL pointer here, even for n = 0 */
    return issue_p2p(c, NULL, buf ? buf : &none, n, peer, kind, req);
}

/* Issues a reduce-scatter or all-gather through `op` (NULL: unsupported). */
static sb_status issue_blocks(struct sb_comm *c, enum sb_comm_kind kind,
                              sb_status (*op)(struct sb_comm *, const float *, float *,
                                              const size_t *, struct sb_comm_request *),
                              const float *send, float *recv, const size_t *counts,
                              struct sb_comm_request *req)
{
    if (!op)
        return sb_error(SB_ERR_USAGE, "the %s communicator has no non-blocking %s",
                        c->ops->name, sb_comm_kind_name(kind));
    size_t n = 0;
    for (int r = 0; r < c->size; r++) n += counts[r];
    request_begin(c, kind, n * sizeof(float), req);
    sb_nvtx_push_bytes(kind == SB_COMM_REDUCE_SCATTER ? "reduce_scatter.issue" : "allgather.issue",
                       SB_NVTX_COMM, req->bytes);
    sb_status st = op(c, send, recv, counts, req);
    sb_nvtx_pop();
    request_issued(c, req, st);
    return st;
}

sb_status sb_comm_ireduce_scatter(struct sb_comm *c, const float *send, float *recv,
                                  const size_t *counts, struct sb_comm_request *req)
{
    return issue_blocks(c, SB_COMM_REDUCE_SCATTER, c->ops->ireduce_scatter, send, recv, counts,
                        req);
}

sb_status sb_comm_iallgather(struct sb_comm *c, const float *send, float *recv,
                             const size_t *counts, struct sb_comm_request *req)
{
    return issue_blocks(c, SB_COMM_ALLGATHER, c->ops->iallgather, send, recv, counts, req);
}

/* The NVTX range of a poll (wait = 0) or a wait (wait = 1) on a request of
 * `kind` (docs/profiling.md's table). */
static const char *range_name(enum sb_comm_kind kind, int wait)
{
    static const char *const names[SB_COMM_NKINDS][2] = {
        [SB_COMM_ALLREDUCE] = {"allreduce.test", "allreduce.wait"},
        [SB_COMM_BROADCAST] = {"broadcast.test", "broadcast.wait"},
        [SB_COMM_PUSH] = {"push.test", "push.wait"},
        [SB_COMM_PULL] = {"pull.test", "pull.wait"},
        [SB_COMM_REDUCE_SCATTER] = {"reduce_scatter.test", "reduce_scatter.wait"},
        [SB_COMM_ALLGATHER] = {"allgather.test", "allgather.wait"},
        [SB_COMM_SENDRECV] = {"sendrecv.test", "sendrecv.wait"}};
    return (unsigned)kind < SB_COMM_NKINDS ? names[kind][wait != 0] : wait ? "wait" : "test";
}

sb_status sb_comm_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    *done = req->done;
    if (req->done) return SB_OK;
    /* A poll moves data: a ring's next step or a hierarchical all-reduce's
     * next stage is posted from here (during backward, for ddp's buckets). */
    sb_nvtx_push_bytes(range_name(req->kind, 0), SB_NVTX_COMM, req->bytes);
    sb_flight_enter(req->seq);
    sb_status st = c->ops->test(c, req, done);
    sb_nvtx_pop();
    if (st || *done) sb_flight_complete(req->seq, st == SB_OK);
    else sb_flight_leave();
    SB_TRY(st);
    if (*done) complete(c, req);
    return SB_OK;
}

sb_status sb_comm_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    if (req->done) return SB_OK;
    sb_nvtx_push_bytes(range_name(req->kind, 1), SB_NVTX_COMM, req->bytes);
    sb_flight_enter(req->seq);
    sb_status st = c->ops->wait(c, req);
    sb_flight_complete(req->seq, st == SB_OK);
    sb_nvtx_pop();
    if (st == SB_OK) complete(c, req);
    return st;
}

sb_status sb_comm_send_uncounted(struct sb_comm *c, const float *buf, size_t n, int peer)
{
    int64_t seq = sb_flight_issue(SB_FLIGHT_EXCHANGE, n * sizeof(float), peer, -1);
    sb_status st = c->ops->send(c, buf, n, peer, SB_COMM_NKINDS);
    sb_flight_complete(seq, st == SB_OK);
    return st;
}

sb_status sb_comm_recv_uncounted(struct sb_comm *c, float *buf, size_t n, int peer)
{
    int64_t seq = sb_flight_issue(SB_FLIGHT_EXCHANGE, n * sizeof(float), peer, -1);
    sb_flight_mark_receive();
    sb_status st = c->ops->recv(c, buf, n, peer, SB_COMM_NKINDS);
    sb_flight_complete(seq, st == SB_OK);
    return st;
}

int sb_comm_overlaps(const struct sb_comm *c)
{
    return c->ops->iallreduce != NULL;
}

sb_status sb_comm_allreduce_f64(struct sb_comm *c, double *buf, size_t n)
{
    sb_nvtx_push_bytes("allreduce_f64", SB_NVTX_COMM, n * sizeof(double));
    int64_t seq = sb_flight_issue(SB_FLIGHT_METRICS, n * sizeof(double), -1, -1);
    sb_status st = c->ops->allreduce_f64(c, buf, n);
    sb_flight_complete(seq, st == SB_OK);
    sb_nvtx_pop();
    return st;
}

void sb_comm_reset_counters(struct sb_comm *c)
{
    memset(c->counters, 0, sizeof c->counters);
    memset(c->allreduce_by_algo, 0, sizeof c->allreduce_by_algo);
    for (int i = 0; i < c->n_stages; i++) memset(&c->stages[i].counter, 0, sizeof c->stages[i].counter);
}

const char *sb_comm_algo_name(const struct sb_comm *c, enum sb_allreduce_algo a)
{
    return a == SB_ALLREDUCE_LIBRARY ? c->ops->name : sb_allreduce_algo_name(a);
}

void sb_comm_destroy(struct sb_comm *c)
{
    if (c) c->ops->destroy(c);
}

const char *sb_comm_kind_name(enum sb_comm_kind kind)
{
    static const char *const names[SB_COMM_NKINDS] = {"allreduce", "broadcast", "push", "pull",
                                                      "reduce_scatter", "allgather", "sendrecv"};
    return (unsigned)kind < SB_COMM_NKINDS ? names[kind] : "unknown";
}

const char *sb_comm_role_name(enum sb_comm_role role)
{
    static const char *const names[SB_COMM_NROLES] = {"world", "dp", "tp", "pp", "host_local",
                                                      "cross_host"};
    return (unsigned)role < SB_COMM_NROLES ? names[role] : "unknown";
}

void sb_comm_role_add(struct sb_comm_role_totals *t, const struct sb_comm *c)
{
    if (t->ranks == 0) t->ranks = c->size;
    for (int k = 0; k < SB_COMM_NKINDS; k++) {
        t->counters[k].calls += c->counters[k].calls;
        t->counters[k].bytes += c->counters[k].bytes;
        t->counters[k].seconds += c->counters[k].seconds;
    }
}

double sb_comm_algbw_GBps(double bytes, double seconds)
{
    return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

double sb_comm_busbw_factor(enum sb_comm_kind kind, int n)
{
    /* nccl-tests PERFORMANCE.md: a ring all-reduce moves 2(n-1)/n of the
     * buffer through each rank's link; broadcast and point-to-point move it
     * once. */
    if (kind == SB_COMM_ALLREDUCE) return n > 1 ? 2.0 * (n - 1) / n : 0.0;
    if (kind == SB_COMM_REDUCE_SCATTER || kind == SB_COMM_ALLGATHER)
        return n > 1 ? (double)(n - 1) / n : 0.0;
    return 1.0;
}

/* Gradient compression's 16-bit collectives: the same counters as every
 * other call, their bytes the wire's (2 a value), their NVTX ranges named
 * apart ("allreduce16", "reduce_scatter16"). */
sb_status sb_comm_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                              double *convert_s)
{
    if (!c->ops->allreduce16)
        return sb_error(SB_ERR_USAGE, "the %s communicator has no 16-bit all-reduce",
                        c->ops->name);
    size_t bytes = n * sizeof(uint16_t);
    struct call k = begin_named("allreduce16", SB_COMM_ALLREDUCE, bytes, -1, 0);
    sb_status st = c->ops->allreduce16(c, fmt, buf, n, convert_s);
    return end(c, SB_COMM_ALLREDUCE, bytes, k, st);
}

/* The op of a blocking 16-bit collective over a counts-split buffer. */
typedef sb_status (*half_counts_op)(struct sb_comm *c, enum sb_half_format fmt,
                                    const float *send, float *recv, const size_t *counts,
                                    double *convert_s);

/* Runs a blocking 16-bit collective `op` (NULL: SB_ERR_USAGE naming `what`)
 * counted as `kind` with the wire's bytes (2 a value over every rank's
 * count), under the NVTX range `name`; req completes at issue. */
static sb_status blocking16(struct sb_comm *c, half_counts_op op, const char *name,
                            const char *what, enum sb_comm_kind kind, enum sb_half_format fmt,
                            const float *send, float *recv, const size_t *counts,
                            struct sb_comm_request *req, double *convert_s)
{
    if (!op)
        return sb_error(SB_ERR_USAGE, "the %s communicator has no 16-bit %s", c->ops->name,
                        what);
    size_t n = 0;
    for (int r = 0; r < c->size; r++) n += counts[r];
    size_t bytes = n * sizeof(uint16_t);
    sb_nvtx_push_bytes(name, SB_NVTX_COMM, bytes);
    request_begin(c, kind, bytes, req);
    sb_status st = op(c, fmt, send, recv, counts, convert_s);
    req->done = 1; /* blocking: complete at issue */
    request_issued(c, req, st);
    sb_nvtx_pop();
    return st;
}

sb_status sb_comm_allgather16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                              float *recv, const size_t *counts, struct sb_comm_request *req,
                              double *convert_s)
{
    return blocking16(c, c->ops->allgather16, "allgather16", "all-gather", SB_COMM_ALLGATHER,
                      fmt, send, recv, counts, req, convert_s);
}

sb_status sb_comm_reduce_scatter16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                                   float *recv, const size_t *counts,
                                   struct sb_comm_request *req, double *convert_s)
{
    return blocking16(c, c->ops->reduce_scatter16, "reduce_scatter16", "reduce-scatter",
                      SB_COMM_REDUCE_SCATTER, fmt, send, recv, counts, req, convert_s);
}
