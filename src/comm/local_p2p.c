/* Point-to-point between the replica threads of one "local" group (see
 * local.c): a mailbox in the group. A send copies its floats into a
 * message appended to the mailbox and returns, so isend is complete at
 * issue and two threads that both send first cannot deadlock; a receive
 * takes the first message from its peer to it (messages between one pair
 * match in send order, as MPI's do), waiting on a condition variable with
 * the watchdog's deadline and the interrupt check. irecv takes the message
 * at once if it is there, else leaves a pending receive that test polls
 * and wait completes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/local_impl.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/interrupt.h"

/* A receive left pending by irecv. */
struct local_pending {
    float *buf;
    size_t n;
    int peer; /* -1: any sender */
};

sb_status sb_local_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                        enum sb_comm_kind kind)
{
    (void)kind;
    struct sb_local_group *g = c->impl;
    if (peer < 0 || peer >= g->n)
        return sb_error(SB_ERR_INTERNAL, "local communicator: no replica %d of %d", peer, g->n);
    struct sb_local_msg *m = malloc(sizeof *m + n * sizeof(float));
    if (!m) return sb_error(SB_ERR_NOMEM, "local communicator: out of memory (send)");
    m->next = NULL;
    m->src = c->rank;
    m->dst = peer;
    m->n = n;
    if (n) memcpy(m->data, buf, n * sizeof(float));
    pthread_mutex_lock(&g->mbox_lock);
    if (g->tail) g->tail->next = m;
    else g->head = m;
    g->tail = m;
    pthread_cond_broadcast(&g->mbox_cond);
    pthread_mutex_unlock(&g->mbox_lock);
    return SB_OK;
}

/* Unlinks and returns the first message from `src` (-1: any) to `dst`, or
 * NULL; call with mbox_lock held. */
static struct sb_local_msg *take_locked(struct sb_local_group *g, int src, int dst)
{
    struct sb_local_msg *prev = NULL;
    for (struct sb_local_msg *m = g->head; m; prev = m, m = m->next) {
        if (m->dst != dst || (src >= 0 && m->src != src)) continue;
        if (prev) prev->next = m->next;
        else g->head = m->next;
        if (g->tail == m) g->tail = prev;
        return m;
    }
    return NULL;
}

/* Copies message m into buf (n floats expected), sets *peer (may be NULL)
 * and frees m. Errors: SB_ERR_COMM when the sizes differ. */
static sb_status deliver(struct sb_local_msg *m, float *buf, size_t n, int *peer)
{
    sb_status st = SB_OK;
    if (m->n != n)
        st = sb_error(SB_ERR_COMM, "local communicator: replica %d sent %zu floats, replica %d "
                      "expected %zu", m->src, m->n, m->dst, n);
    else if (n)
        memcpy(buf, m->data, n * sizeof(float));
    if (peer) *peer = m->src;
    free(m);
    return st;
}

/* The message from `src` (-1: any) to this member into buf: at once when
 * `block` is 0 (*found = 0 if none is there), else waiting until it comes,
 * the deadline of this thread's current call passes (SB_ERR_COMM) or a
 * signal arrives (SB_ERR_INTERRUPTED; checked every 50 ms). */
static sb_status take(struct sb_comm *c, int src, float *buf, size_t n, int block, int *peer,
                      int *found)
{
    struct sb_local_group *g = c->impl;
    struct sb_flight_entry *e = sb_flight_current();
    double deadline = sb_watchdog_deadline(e ? e->start_s : sb_now_s());
    pthread_mutex_lock(&g->mbox_lock);
    struct sb_local_msg *m = take_locked(g, src, c->rank);
    while (!m && block) {
        if (sb_interrupted()) {
            pthread_mutex_unlock(&g->mbox_lock);
            return sb_error(SB_ERR_INTERRUPTED, "interrupted");
        }
        if (sb_now_s() >= deadline) {
            pthread_mutex_unlock(&g->mbox_lock);
            char desc[160] = "a receive";
            if (e) {
                e->state = SB_FLIGHT_TIMED_OUT;
                e->end_s = sb_now_s();
                sb_flight_describe(e, desc, sizeof desc);
            }
            if (src < 0)
                return sb_error(SB_ERR_COMM, "watchdog: %s did not complete within %g s: no "
                                "replica thread sent to it", desc, sb_watchdog_timeout_s());
            return sb_error(SB_ERR_COMM, "watchdog: %s did not complete within %g s: replica "
                            "thread %d did not send", desc, sb_watchdog_timeout_s(), src);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->mbox_cond, &g->mbox_lock, &ts);
        m = take_locked(g, src, c->rank);
    }
    pthread_mutex_unlock(&g->mbox_lock);
    *found = m != NULL;
    return m ? deliver(m, buf, n, peer) : SB_OK;
}

sb_status sb_local_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                        enum sb_comm_kind kind)
{
    (void)kind;
    int found;
    return take(c, peer, buf, n, 1, NULL, &found);
}

sb_status sb_local_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                            enum sb_comm_kind kind)
{
    (void)kind;
    int found;
    return take(c, -1, buf, n, 1, peer, &found);
}

sb_status sb_local_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                         struct sb_comm_request *req)
{
    SB_TRY(sb_local_send(c, buf, n, peer, req->kind));
    req->impl = NULL;
    req->done = 1; /* copied into the mailbox: the buffer is free */
    return SB_OK;
}

sb_status sb_local_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                         struct sb_comm_request *req)
{
    int found = 0;
    SB_TRY(take(c, peer, buf, n, 0, NULL, &found));
    req->impl = NULL;
    req->done = found;
    if (found) return SB_OK;
    struct local_pending *p = malloc(sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "local communicator: out of memory (receive)");
    *p = (struct local_pending){buf, n, peer};
    req->impl = p;
    return SB_OK;
}

/* Polls (block 0) or waits for (block 1) the pending receive of req. */
static sb_status progress(struct sb_comm *c, struct sb_comm_request *req, int block, int *done)
{
    struct local_pending *p = req->impl;
    if (!p) return sb_error(SB_ERR_COMM, "local communicator: a receive that already failed");
    sb_status st = take(c, p->peer, p->buf, p->n, block, NULL, done);
    if (st || *done) { /* nothing is in flight on a thread's behalf: free it either way */
        free(p);
        req->impl = NULL;
    }
    return st;
}

sb_status sb_local_test(struct sb_comm *c, struct sb_comm_request *req, int *done)
{
    return progress(c, req, 0, done);
}

sb_status sb_local_wait(struct sb_comm *c, struct sb_comm_request *req)
{
    int done = 0;
    return progress(c, req, 1, &done);
}

void sb_local_mbox_free(struct sb_local_group *g)
{
    while (g->head) {
        struct sb_local_msg *m = g->head;
        g->head = m->next;
        free(m);
    }
    g->tail = NULL;
}
