/* The "local" communicator: replicas that are threads of one process.
 *
 * All-reduce without copies through a staging buffer: every thread publishes
 * its buffer, then thread r sums chunk r over all buffers (in rank order, so
 * the result is deterministic) and writes the sum back into every buffer.
 * Two barriers per call; each element is read N times and written N times,
 * the minimum for N replicas that each keep a full copy. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/watchdog.h"
#include "core/barrier.h"
#include "core/clock.h"

struct sb_local_group {
    int n;
    struct sb_barrier barrier;
    _Atomic int64_t *arrived; /* (n) flight sequence number each thread last entered */
    float **bufs;   /* (n) published float buffers */
    double **dbufs; /* (n) published double buffers */
};

/* Meets the other replica threads with the watchdog's deadline (the
 * current call's issue time + --timeout) and gives up on SIGINT/SIGTERM.
 * Errors: SB_ERR_COMM naming the call and the replicas that did not arrive;
 * SB_ERR_INTERRUPTED. */
static sb_status wait_all(struct sb_comm *c)
{
    struct sb_local_group *g = c->impl;
    struct sb_flight_entry *e = sb_flight_current();
    int64_t seq = e ? e->seq : 0;
    atomic_store(&g->arrived[c->rank], seq);
    double deadline = sb_watchdog_deadline(e ? e->start_s : sb_now_s());
    sb_status st = sb_barrier_wait_until(&g->barrier, deadline, 1);
    if (st == SB_ERR_INTERRUPTED) return sb_error(SB_ERR_INTERRUPTED, "interrupted");
    if (st == SB_OK) return SB_OK;
    char desc[160] = "an exchange", missing[256] = "";
    if (e) {
        e->state = SB_FLIGHT_TIMED_OUT;
        e->end_s = sb_now_s();
        sb_flight_describe(e, desc, sizeof desc);
    }
    size_t used = 0;
    for (int q = 0; q < g->n; q++) {
        if (atomic_load(&g->arrived[q]) >= seq) continue;
        int w = snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", q);
        if (w > 0 && (size_t)w < sizeof missing - used) used += (size_t)w;
    }
    return sb_error(SB_ERR_COMM, "watchdog: %s did not complete within %g s: replica "
                    "thread%s %s did not arrive", desc, sb_watchdog_timeout_s(),
                    strchr(missing, ',') ? "s" : "", used ? missing : "?");
}

static void chunk(size_t n, int parts, int r, size_t *lo, size_t *hi)
{
    *lo = n * (size_t)r / (size_t)parts;
    *hi = n * (size_t)(r + 1) / (size_t)parts;
}

static sb_status local_allreduce(struct sb_comm *c, float *buf, size_t n)
{
    struct sb_local_group *g = c->impl;
    if (g->n == 1) return SB_OK; /* the sum over one replica is itself */
    g->bufs[c->rank] = buf;
    SB_TRY(wait_all(c));
    size_t lo, hi;
    chunk(n, g->n, c->rank, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float s = g->bufs[0][i];
        for (int q = 1; q < g->n; q++) s += g->bufs[q][i];
        for (int q = 0; q < g->n; q++) g->bufs[q][i] = s;
    }
    return wait_all(c);
}

static sb_status local_allreduce_f64(struct sb_comm *c, double *buf, size_t n)
{
    struct sb_local_group *g = c->impl;
    g->dbufs[c->rank] = buf;
    SB_TRY(wait_all(c));
    size_t lo, hi;
    chunk(n, g->n, c->rank, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        double s = g->dbufs[0][i];
        for (int q = 1; q < g->n; q++) s += g->dbufs[q][i];
        for (int q = 0; q < g->n; q++) g->dbufs[q][i] = s;
    }
    return wait_all(c);
}

static sb_status local_broadcast(struct sb_comm *c, float *buf, size_t n, int root)
{
    struct sb_local_group *g = c->impl;
    g->bufs[c->rank] = buf;
    SB_TRY(wait_all(c));
    if (c->rank != root) memcpy(buf, g->bufs[root], n * sizeof *buf);
    return wait_all(c);
}

static sb_status local_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                           enum sb_comm_kind kind)
{
    (void)c, (void)buf, (void)n, (void)kind;
    return sb_error(SB_ERR_INTERNAL, "local communicator: send to %d not supported", peer);
}

static sb_status local_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                           enum sb_comm_kind kind)
{
    (void)c, (void)buf, (void)n, (void)kind;
    return sb_error(SB_ERR_INTERNAL, "local communicator: recv from %d not supported", peer);
}

static void local_destroy(struct sb_comm *c) { free(c); }

static const struct sb_comm_ops local_ops = {
    .name = "local",
    .allreduce = local_allreduce,
    .allreduce_f64 = local_allreduce_f64,
    .broadcast = local_broadcast,
    .send = local_send,
    .recv = local_recv,
    .destroy = local_destroy,
    /* No iallreduce: threads have no progress engine, so sb_comm_iallreduce
     * runs the blocking all-reduce and the request is complete at issue. */
};

sb_status sb_local_group_create(int n, struct sb_local_group **out)
{
    *out = NULL;
    struct sb_local_group *g = calloc(1, sizeof *g);
    if (!g) return sb_error(SB_ERR_NOMEM, "local communicator: out of memory");
    g->n = n;
    g->bufs = calloc((size_t)n, sizeof *g->bufs);
    g->dbufs = calloc((size_t)n, sizeof *g->dbufs);
    g->arrived = calloc((size_t)n, sizeof *g->arrived);
    if (!g->bufs || !g->dbufs || !g->arrived) {
        free(g->bufs);
        free(g->dbufs);
        free(g->arrived);
        free(g);
        return sb_error(SB_ERR_NOMEM, "local communicator: out of memory");
    }
    if (sb_barrier_init(&g->barrier, n) != SB_OK) {
        free(g->bufs);
        free(g->dbufs);
        free(g->arrived);
        free(g);
        return sb_error(SB_ERR_COMM, "local communicator: cannot create its barrier");
    }
    *out = g;
    return SB_OK;
}

void sb_local_group_destroy(struct sb_local_group *g)
{
    if (!g) return;
    sb_barrier_destroy(&g->barrier);
    free(g->bufs);
    free(g->dbufs);
    free(g->arrived);
    free(g);
}

sb_status sb_comm_local_create(struct sb_local_group *g, int rank, struct sb_comm **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return sb_error(SB_ERR_NOMEM, "local communicator: out of memory");
    (*out)->ops = &local_ops;
    (*out)->impl = g;
    (*out)->rank = rank;
    (*out)->size = g->n;
    return SB_OK;
}
