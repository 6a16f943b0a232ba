/* Per-thread rings of recent communication calls; see flight.h. */
#include "comm/flight.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Threads whose ring may be read by sb_flight_snapshot: mirrored uses one
 * per replica; more than this many threads are recorded but not listed. */
#define MAX_RINGS 256

struct ring {
    struct sb_flight_entry e[SB_FLIGHT_CAPACITY];
    int64_t next_seq;                /* sequence number of the next call */
    struct sb_flight_entry *current; /* the call being waited for, or NULL */
    int registered;
};

/* Each thread's ring is on the heap and outlives the thread (a few KiB per
 * thread, never freed), so that a snapshot taken after a replica thread
 * ended reads valid memory. A thread whose ring cannot be allocated uses
 * `spare` (not listed). */
static _Thread_local struct ring *me;
static _Thread_local struct ring spare;
static struct ring *rings[MAX_RINGS];
static atomic_int n_rings;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long current_step = -1;
static _Atomic double epoch_s;

static struct ring *my_ring(void)
{
    if (!me) {
        struct ring *r = calloc(1, sizeof *r);
        me = r ? r : &spare;
        me->registered = 1;
        me->next_seq = 1;
        double zero = 0.0;
        atomic_compare_exchange_strong(&epoch_s, &zero, sb_now_s());
        pthread_mutex_lock(&rings_lock);
        int n = atomic_load(&n_rings);
        if (r && n < MAX_RINGS) {
            rings[n] = r;
            atomic_store(&n_rings, n + 1);
        }
        pthread_mutex_unlock(&rings_lock);
    }
    return me;
}

int64_t sb_flight_issue(enum sb_flight_kind kind, size_t bytes, int peer, int index)
{
    struct ring *r = my_ring();
    int64_t seq = r->next_seq++;
    struct sb_flight_entry *e = &r->e[seq % SB_FLIGHT_CAPACITY];
    e->seq = seq;
    e->step = atomic_load_explicit(&current_step, memory_order_relaxed);
    e->bytes = (int64_t)bytes;
    e->kind = kind;
    e->state = SB_FLIGHT_ISSUED;
    e->peer = peer;
    e->index = index;
    e->receive = 0;
    e->unused = 0;
    e->start_s = sb_now_s();
    e->end_s = 0.0;
    r->current = e;
    return seq;
}

void sb_flight_mark_receive(void)
{
    struct ring *r = my_ring();
    if (r->current) r->current->receive = 1;
}

static struct sb_flight_entry *find(int64_t seq)
{
    struct sb_flight_entry *e = &my_ring()->e[seq % SB_FLIGHT_CAPACITY];
    return seq > 0 && e->seq == seq ? e : NULL;
}

void sb_flight_complete(int64_t seq, int ok)
{
    struct sb_flight_entry *e = find(seq);
    if (e) {
        if (e->state == SB_FLIGHT_ISSUED) e->state = ok ? SB_FLIGHT_COMPLETED : SB_FLIGHT_FAILED;
        if (e->end_s == 0.0) e->end_s = sb_now_s();
    }
    struct ring *r = my_ring();
    if (r->current == e) r->current = NULL;
}

void sb_flight_enter(int64_t seq) { my_ring()->current = find(seq); }

void sb_flight_leave(void) { my_ring()->current = NULL; }

struct sb_flight_entry *sb_flight_current(void) { return me ? me->current : NULL; }

void sb_flight_set_step(long step)
{
    atomic_store_explicit(&current_step, step, memory_order_relaxed);
}

long sb_flight_step(void) { return atomic_load_explicit(&current_step, memory_order_relaxed); }

const char *sb_flight_kind_name(int kind)
{
    static const char *const names[SB_FLIGHT_NKINDS] = {
        "allreduce", "broadcast", "push", "pull", "reduce_scatter", "allgather", "sendrecv",
        "metrics", "exchange"};
    return kind >= 0 && kind < SB_FLIGHT_NKINDS ? names[kind] : "unknown";
}

const char *sb_flight_state_name(int state)
{
    static const char *const names[] = {"issued", "completed", "timed_out", "failed"};
    return state >= 0 && state <= SB_FLIGHT_FAILED ? names[state] : "unknown";
}

void sb_flight_describe(const struct sb_flight_entry *e, char *buf, size_t len)
{
    char what[96];
    switch (e->kind) {
    case SB_FLIGHT_ALLREDUCE:
        if (e->index >= 0) snprintf(what, sizeof what, "all-reduce of bucket %d", (int)e->index);
        else snprintf(what, sizeof what, "all-reduce");
        break;
    case SB_FLIGHT_REDUCE_SCATTER:
    case SB_FLIGHT_ALLGATHER:
        snprintf(what, sizeof what, "%s", e->kind == SB_FLIGHT_ALLGATHER ? "all-gather"
                                                                         : "reduce-scatter");
        if (e->index >= 0)
            snprintf(what + strlen(what), sizeof what - strlen(what), " of bucket %d",
                     (int)e->index);
        break;
    case SB_FLIGHT_BROADCAST:
        snprintf(what, sizeof what, "broadcast from rank %d", (int)e->peer);
        break;
    case SB_FLIGHT_PUSH:
    case SB_FLIGHT_PULL:
    case SB_FLIGHT_SENDRECV:
        if (e->peer < 0) /* a receive from any source not yet matched */
            snprintf(what, sizeof what, "%s from any rank", sb_flight_kind_name(e->kind));
        else
            snprintf(what, sizeof what, "%s %s rank %d", sb_flight_kind_name(e->kind),
                     e->receive ? "from" : "to", (int)e->peer);
        break;
    case SB_FLIGHT_METRICS:
        snprintf(what, sizeof what, "all-reduce of metrics");
        break;
    default:
        if (e->peer >= 0) snprintf(what, sizeof what, "exchange with rank %d", (int)e->peer);
        else snprintf(what, sizeof what, "exchange");
        break;
    }
    snprintf(buf, len, "%s (call %lld, step %lld)", what, (long long)e->seq,
             (long long)e->step);
}

int sb_flight_snapshot(struct sb_flight_entry *out, int max)
{
    int n = 0;
    int nr = atomic_load(&n_rings);
    /* Take every valid entry, then keep the `max` latest by issue time. */
    static _Thread_local struct sb_flight_entry all[4 * SB_FLIGHT_CAPACITY];
    int cap = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < nr && n < cap; i++)
        for (int k = 0; k < SB_FLIGHT_CAPACITY && n < cap; k++)
            if (rings[i]->e[k].seq > 0) all[n++] = rings[i]->e[k];
    /* Insertion sort by start time (at most a few hundred entries). */
    for (int i = 1; i < n; i++) {
        struct sb_flight_entry x = all[i];
        int j = i - 1;
        while (j >= 0 && all[j].start_s > x.start_s) {
            all[j + 1] = all[j];
            j--;
        }
        all[j + 1] = x;
    }
    int first = n > max ? n - max : 0;
    memcpy(out, all + first, (size_t)(n - first) * sizeof *out);
    return n - first;
}

double sb_flight_epoch_s(void)
{
    double t = atomic_load(&epoch_s);
    return t > 0.0 ? t : sb_now_s();
}
