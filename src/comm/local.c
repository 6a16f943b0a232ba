/* The "local" communicator: replicas that are threads of one process.
 *
 * All-reduce without copies through a staging buffer: every thread publishes
 * its buffer, then thread r sums chunk r over all buffers (in rank order, so
 * the result is deterministic) and writes the sum back into every buffer.
 * Two barriers per call; each element is read N times and written N times,
 * the minimum for N replicas that each keep a full copy.
 *
 * split makes new groups in shared memory (the first member of each makes
 * it; its members free it); point-to-point is a mailbox (local_p2p.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/local_impl.h"
#include "comm/watchdog.h"
#include "core/barrier.h"
#include "core/clock.h"

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

/* local_allreduce whose result is rounded to 16 bits in `fmt` (comm.h's
 * allreduce16): the same fp32 sums in rank order, rounded once; nothing is
 * converted for a wire (threads share memory), so *convert_s gains the
 * rounding's seconds only. */
static sb_status local_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf,
                                   size_t n, double *convert_s)
{
    struct sb_local_group *g = c->impl;
    if (g->n == 1) {
        double t0 = sb_now_s();
        sb_half_round(fmt, buf, n); /* the wire's rounding, as with several replicas */
        if (convert_s) *convert_s += sb_now_s() - t0;
        return SB_OK;
    }
    g->bufs[c->rank] = buf;
    SB_TRY(wait_all(c));
    size_t lo, hi;
    chunk(n, g->n, c->rank, &lo, &hi);
    float *sum = g->bufs[0];
    for (size_t i = lo; i < hi; i++) /* element i of replica 0 is read here only */
        for (int q = 1; q < g->n; q++) sum[i] += g->bufs[q][i];
    double t0 = sb_now_s();
    if (hi > lo) sb_half_round(fmt, sum + lo, hi - lo);
    if (convert_s) *convert_s += sb_now_s() - t0;
    for (int q = 1; q < g->n; q++) memcpy(g->bufs[q] + lo, sum + lo, (hi - lo) * sizeof *sum);
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

/* A split group is freed by its last member; a caller's group by the
 * caller (sb_local_group_destroy). */
static void local_destroy(struct sb_comm *c)
{
    struct sb_local_group *g = c->impl;
    if (g && g->owned && atomic_fetch_sub(&g->refs, 1) == 1) {
        g->owned = 0;
        sb_local_group_destroy(g);
    }
    free(c);
}

/* The members with c's color form a new group: each publishes its color
 * (< 0: every member, as all threads share memory) and key; the first of
 * each color in (key, rank) order makes the group; every member then takes
 * its place in it. Three meetings of the whole group: after publishing,
 * after making, after taking (so the next split's publishing cannot
 * overwrite what a slow member still reads). */
static sb_status local_split(struct sb_comm *c, int color, int key, struct sb_comm **out)
{
    struct sb_local_group *g = c->impl;
    *out = NULL;
    g->split_color[c->rank] = color < 0 ? -1 : color;
    g->split_key[c->rank] = key;
    SB_TRY(wait_all(c));
    int size = 0, rank = 0, first = -1;
    for (int q = 0; q < g->n; q++) {
        if (g->split_color[q] != g->split_color[c->rank]) continue;
        size++;
        int kq = g->split_key[q], kr = g->split_key[c->rank];
        if (kq < kr || (kq == kr && q < c->rank)) rank++;
        if (first < 0 || kq < g->split_key[first]) first = q;
    }
    sb_status made = SB_OK;
    if (first == c->rank) {
        struct sb_local_group *n = NULL;
        made = sb_local_group_create(size, &n);
        if (!made) {
            n->owned = 1;
            atomic_store(&n->refs, size);
        }
        g->split_made[c->rank] = n;
    }
    SB_TRY(wait_all(c));
    struct sb_local_group *n = g->split_made[first];
    sb_status st = made;
    if (!n && !st) st = sb_error(SB_ERR_COMM, "local split: another replica could not make the "
                                 "new group");
    if (!st) st = sb_comm_local_create(n, rank, out);
    if (st && n && !*out && atomic_fetch_sub(&n->refs, 1) == 1) sb_local_group_destroy(n);
    sb_status met = wait_all(c);
    return st ? st : met;
}

static const struct sb_comm_ops local_ops = {
    .name = "local",
    .allreduce = local_allreduce,
    .allreduce_f64 = local_allreduce_f64,
    .broadcast = local_broadcast,
    .send = sb_local_send,
    .recv = sb_local_recv,
    .recv_any = sb_local_recv_any,
    .destroy = local_destroy,
    /* No iallreduce: threads have no progress engine, so sb_comm_iallreduce
     * runs the blocking all-reduce and the request is complete at issue.
     * test and wait serve the point-to-point receives only. */
    .test = sb_local_test,
    .wait = sb_local_wait,
    .isend = sb_local_isend,
    .irecv = sb_local_irecv,
    .split = local_split,
    .allreduce16 = local_allreduce16,
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
    g->split_color = calloc((size_t)n, sizeof *g->split_color);
    g->split_key = calloc((size_t)n, sizeof *g->split_key);
    g->split_made = calloc((size_t)n, sizeof *g->split_made);
    sb_status st = SB_OK;
    if (!g->bufs || !g->dbufs || !g->arrived || !g->split_color || !g->split_key ||
        !g->split_made)
        st = sb_error(SB_ERR_NOMEM, "local communicator: out of memory");
    int barrier = 0, lock = 0, cond = 0;
    if (!st) barrier = sb_barrier_init(&g->barrier, n) == SB_OK;
    if (barrier) lock = pthread_mutex_init(&g->mbox_lock, NULL) == 0;
    if (lock) cond = pthread_cond_init(&g->mbox_cond, NULL) == 0;
    if (!st && !cond)
        st = sb_error(SB_ERR_COMM, "local communicator: cannot create its barrier or mailbox");
    if (st) {
        if (lock) pthread_mutex_destroy(&g->mbox_lock);
        if (barrier) sb_barrier_destroy(&g->barrier);
        free(g->bufs);
        free(g->dbufs);
        free(g->arrived);
        free(g->split_color);
        free(g->split_key);
        free(g->split_made);
        free(g);
        return st;
    }
    *out = g;
    return SB_OK;
}

void sb_local_group_destroy(struct sb_local_group *g)
{
    if (!g) return;
    sb_barrier_destroy(&g->barrier);
    sb_local_mbox_free(g);
    pthread_cond_destroy(&g->mbox_cond);
    pthread_mutex_destroy(&g->mbox_lock);
    free(g->bufs);
    free(g->dbufs);
    free(g->arrived);
    free(g->split_color);
    free(g->split_key);
    free(g->split_made);
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
