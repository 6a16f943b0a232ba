/* The --trace timeline: per-thread span buffers, clock alignment across
 * ranks, and the merged Chrome trace-event JSON; see trace.h. */
#include "trace/trace.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/nvtx.h"
#include "job/gather.h"

#define MAX_DEPTH 32
#define NAME_LEN 24
#define PINGPONG_ROUNDS 8

enum payload_kind { PAYLOAD_NONE = 0, PAYLOAD_INDEX, PAYLOAD_BYTES };

/* One closed span; plain data so that it travels as bytes. */
struct event {
    double start_s;    /* CLOCK_MONOTONIC of the recording rank */
    double dur_s;
    uint64_t payload;
    int32_t tid;
    int16_t category;
    int16_t payload_kind;
    char name[NAME_LEN];
};

struct open_span {
    const char *name;
    double start_s;
    uint64_t payload;
    int category, payload_kind, recorded;
};

/* One thread's buffer, owned by the registry (outlives the thread). */
struct tbuf {
    int tid;
    struct event *ev;
    size_t n, cap;
    struct open_span stack[MAX_DEPTH];
    int depth;
    struct tbuf *next;
};

static atomic_int active;
static atomic_int full;            /* a cap was reached: record nothing new */
#define LABEL_LEN 48
static char process_label[LABEL_LEN]; /* sb_trace_set_process_label; "" = none */
static atomic_long steps_seen;
static long max_steps_cfg;
static atomic_uint generation;     /* bumps at every start, invalidating TLS */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tbuf *registry;
static int next_tid;
static double clock_offset_s;      /* this rank's clock minus rank 0's */
static double clock_error_s;       /* bound on that offset's error, max over ranks */
static double origin_s;            /* rank 0: trace start on its clock */

static _Thread_local struct tbuf *tls;
static _Thread_local unsigned tls_generation;

/* The calling thread's buffer, registering it on first use; NULL when out
 * of memory (the thread then records nothing). */
static struct tbuf *thread_buffer(void)
{
    unsigned gen = atomic_load(&generation);
    if (tls && tls_generation == gen) return tls;
    struct tbuf *b = calloc(1, sizeof *b);
    if (b) {
        pthread_mutex_lock(&registry_lock);
        b->tid = next_tid++;
        b->next = registry;
        registry = b;
        pthread_mutex_unlock(&registry_lock);
    }
    tls = b;
    tls_generation = gen;
    return b;
}

int sb_trace_active(void) { return atomic_load_explicit(&active, memory_order_relaxed); }

void sb_trace_push(const char *name, int category, uint64_t payload, int is_bytes)
{
    if (!sb_trace_active()) return;
    struct tbuf *b = thread_buffer();
    if (!b) return;
    if (category == SB_NVTX_STEP &&
        atomic_fetch_add(&steps_seen, 1) >= max_steps_cfg)
        atomic_store(&full, 1);
    if (b->depth >= MAX_DEPTH) {
        b->depth++; /* counted so that pops stay matched; not recorded */
        return;
    }
    struct open_span *o = &b->stack[b->depth++];
    o->name = name;
    o->category = category;
    o->payload = payload;
    o->payload_kind = is_bytes ? PAYLOAD_BYTES
                               : (category == SB_NVTX_STEP || category == SB_NVTX_EPOCH)
                                     ? PAYLOAD_INDEX
                                     : PAYLOAD_NONE;
    o->recorded = !atomic_load_explicit(&full, memory_order_relaxed);
    o->start_s = sb_now_s();
}

void sb_trace_pop(void)
{
    if (!sb_trace_active()) return;
    double now = sb_now_s();
    struct tbuf *b = thread_buffer();
    if (!b || b->depth == 0) return;
    if (--b->depth >= MAX_DEPTH) return;
    const struct open_span *o = &b->stack[b->depth];
    if (!o->recorded) return;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        if (cap > SB_TRACE_MAX_EVENTS_PER_THREAD) cap = SB_TRACE_MAX_EVENTS_PER_THREAD;
        struct event *ev = cap > b->cap ? realloc(b->ev, cap * sizeof *ev) : NULL;
        if (!ev) {
            atomic_store(&full, 1);
            return;
        }
        b->ev = ev;
        b->cap = cap;
    }
    struct event *e = &b->ev[b->n++];
    memset(e, 0, sizeof *e);
    e->start_s = o->start_s;
    e->dur_s = now - o->start_s;
    e->payload = o->payload;
    e->tid = b->tid;
    e->category = (int16_t)o->category;
    e->payload_kind = (int16_t)o->payload_kind;
    snprintf(e->name, sizeof e->name, "%s", o->name ? o->name : "?");
}

/* How core/nvtx.c reaches the trace without depending on it. */
static const struct sb_nvtx_hook nvtx_hook = {.push = sb_trace_push, .pop = sb_trace_pop};

sb_status sb_trace_start(const struct sb_job *job, long max_steps)
{
    sb_trace_stop();
    max_steps_cfg = max_steps > 0 ? max_steps : SB_TRACE_DEFAULT_MAX_STEPS;
    atomic_store(&steps_seen, 0);
    atomic_store(&full, 0);
    atomic_fetch_add(&generation, 1);
    /* Cristian's method against rank 0; the largest error bound over the
     * ranks goes into the trace (otherData). */
    SB_TRY(sb_job_clock_offset(job, PINGPONG_ROUNDS, &clock_offset_s, &clock_error_s));
    origin_s = sb_now_s();
    if (!thread_buffer()) return sb_error(SB_ERR_NOMEM, "trace: out of memory");
    atomic_store(&active, 1);
    sb_nvtx_set_hook(&nvtx_hook);
    return SB_OK;
}

void sb_trace_stop(void)
{
    process_label[0] = '\0';
    sb_nvtx_set_hook(NULL);
    atomic_store(&active, 0);
    pthread_mutex_lock(&registry_lock);
    for (struct tbuf *b = registry, *next; b; b = next) {
        next = b->next;
        free(b->ev);
        free(b);
    }
    registry = NULL;
    next_tid = 0;
    pthread_mutex_unlock(&registry_lock);
    tls = NULL;
}

/* This process's events as one array on rank 0's clock; NULL, 0 when none
 * (*fail set on out of memory). */
static struct event *collect_local(size_t *n_out, int *fail)
{
    *n_out = 0;
    *fail = 0;
    pthread_mutex_lock(&registry_lock);
    size_t n = 0;
    for (const struct tbuf *b = registry; b; b = b->next) n += b->n;
    struct event *all = malloc((n ? n : 1) * sizeof *all);
    if (all) {
        size_t k = 0;
        for (const struct tbuf *b = registry; b; b = b->next)
            for (size_t i = 0; i < b->n; i++) {
                all[k] = b->ev[i];
                all[k++].start_s -= clock_offset_s;
            }
        *n_out = n;
    } else {
        *fail = 1;
    }
    pthread_mutex_unlock(&registry_lock);
    return all;
}

void sb_trace_set_process_label(const char *label)
{
    snprintf(process_label, sizeof process_label, "%s", label ? label : "");
}

int sb_trace_truncated(void) { return atomic_load(&full); }

/* Adds the metadata events naming process `pid` ("rank N", or "LABEL (rank
 * N)" when `label` is not empty) and its threads 0..max_tid ("main",
 * "thread k"). */
static void add_names(cJSON *events, int pid, const char *label_of_pid, int max_tid, int *fail)
{
    for (int t = -1; t <= max_tid && !*fail; t++) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(events, m)) {
            cJSON_Delete(m);
            *fail = 1;
            return;
        }
        char label[LABEL_LEN + 24];
        if (t < 0 && label_of_pid && label_of_pid[0])
            snprintf(label, sizeof label, "%s (rank %d)", label_of_pid, pid);
        else if (t < 0) snprintf(label, sizeof label, "rank %d", pid);
        else if (t == 0) snprintf(label, sizeof label, "main");
        else snprintf(label, sizeof label, "thread %d", t);
        cJSON *args = NULL;
        int ok = cJSON_AddStringToObject(m, "name", t < 0 ? "process_name" : "thread_name") &&
                 cJSON_AddStringToObject(m, "ph", "M") && cJSON_AddNumberToObject(m, "pid", pid) &&
                 cJSON_AddNumberToObject(m, "tid", t < 0 ? 0 : t) &&
                 (args = cJSON_AddObjectToObject(m, "args")) &&
                 cJSON_AddStringToObject(args, "name", label);
        if (!ok) *fail = 1;
    }
}

/* Adds one "X" (complete) event; ts and dur in µs since rank 0's start. */
static void add_event(cJSON *events, const struct event *e, int pid, int *fail)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(events, o)) {
        cJSON_Delete(o);
        *fail = 1;
        return;
    }
    char name[NAME_LEN + 1];
    memcpy(name, e->name, NAME_LEN);
    name[NAME_LEN] = '\0';
    double ts_us = 1e6 * (e->start_s - origin_s);
    int ok = cJSON_AddStringToObject(o, "name", name) &&
             cJSON_AddStringToObject(o, "cat", sb_nvtx_category_name(e->category)) &&
             cJSON_AddStringToObject(o, "ph", "X") && cJSON_AddNumberToObject(o, "ts", ts_us) &&
             cJSON_AddNumberToObject(o, "dur", e->dur_s > 0 ? 1e6 * e->dur_s : 0.0) &&
             cJSON_AddNumberToObject(o, "pid", pid) && cJSON_AddNumberToObject(o, "tid", e->tid);
    if (ok && e->payload_kind != PAYLOAD_NONE) {
        cJSON *args = cJSON_AddObjectToObject(o, "args");
        const char *key = e->payload_kind == PAYLOAD_BYTES ? "bytes"
                          : e->category == SB_NVTX_EPOCH   ? "epoch"
                                                           : "step";
        ok = args && cJSON_AddNumberToObject(args, key, (double)e->payload);
    }
    if (!ok) *fail = 1;
}

/* Builds the document from the gathered blocks (events of rank r in block r)
 * and the ranks' labels (LABEL_LEN bytes each, NULL: none). */
static sb_status write_json(const char *path, const char *blocks, const long long *bytes,
                            const char *labels, int size)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *events = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
    int fail = !events;
    const char *p = blocks;
    for (int r = 0; r < size && !fail; r++) {
        size_t n = (size_t)bytes[r] / sizeof(struct event);
        int max_tid = 0;
        for (size_t i = 0; i < n && !fail; i++) {
            struct event e;
            memcpy(&e, p + i * sizeof e, sizeof e); /* blocks are byte-aligned */
            if (e.tid > max_tid) max_tid = e.tid;
            add_event(events, &e, r, &fail);
        }
        add_names(events, r, labels ? labels + (size_t)r * LABEL_LEN : NULL, max_tid, &fail);
        p += bytes[r];
    }
    if (!fail && !cJSON_AddStringToObject(root, "displayTimeUnit", "ms")) fail = 1;
    cJSON *other = fail ? NULL : cJSON_AddObjectToObject(root, "otherData");
    if (!fail && !(other && cJSON_AddStringToObject(other, "clock", "CLOCK_MONOTONIC, rank 0") &&
                   cJSON_AddNumberToObject(other, "clock_error_us", 1e6 * clock_error_s) &&
                   cJSON_AddNumberToObject(other, "max_steps", (double)max_steps_cfg) &&
                   cJSON_AddNumberToObject(other, "max_events_per_thread",
                                           SB_TRACE_MAX_EVENTS_PER_THREAD) &&
                   cJSON_AddBoolToObject(other, "truncated", atomic_load(&full))))
        fail = 1;
    char *text = fail ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return sb_error(SB_ERR_NOMEM, "trace %s: out of memory building JSON", path);
    sb_status st = sb_write_text_atomic("trace", path, text);
    cJSON_free(text);
    return st;
}

sb_status sb_trace_write(const char *path, const struct sb_job *job)
{
    size_t n = 0;
    int fail = 0;
    struct event *mine = collect_local(&n, &fail);
    long long bytes = (long long)(n * sizeof *mine);
    if (fail) {
        sb_error(SB_ERR_NOMEM, "trace: out of memory");
        bytes = -1;
    }
    int rank = job->rank, size = job->size;
    if (!job->mpi || size <= 1) {
        sb_status st = fail ? SB_ERR_NOMEM
                            : write_json(path, (const char *)mine, &bytes, process_label, 1);
        free(mine);
        return st;
    }
    /* A rank that truncated makes the whole trace say so. */
    int full_any = atomic_load(&full);
    if (sb_job_max_int(job, &full_any) != SB_OK)
        full_any = atomic_load(&full); /* not fatal: only the flag is lost */
    atomic_store(&full, full_any);
    /* Every rank's track label, to rank 0 (not fatal: the labels are lost). */
    char *labels = NULL;
    long long *label_counts = NULL;
    if (sb_gather_bytes_to_root(job, process_label, LABEL_LEN, &labels, &label_counts) != SB_OK)
        labels = NULL; /* gather frees what it made on failure */
    free(label_counts);
    char *all = NULL;
    long long *counts = NULL;
    sb_status st = sb_gather_bytes_to_root(job, mine, bytes, &all, &counts);
    free(mine);
    if (!st && rank == 0) st = write_json(path, all, counts, labels, size);
    free(labels);
    free(all);
    free(counts);
    return st;
}
