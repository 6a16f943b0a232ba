/* The hierarchical all-reduce of the "mpi" communicator; see mpi_hier.h. */
#include "comm/mpi_hier.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Where an all-reduce is: a stage in flight (or just completed), or done. */
enum stage { REDUCE_SCATTER = 0, CROSS_ALLREDUCE, ALLGATHER, DONE };

struct sb_hier {
    struct sb_comm *local;    /* stage 1: this host's ranks */
    struct sb_comm *cross;    /* stage 2: this local rank on every host */
    struct sb_comm *local_ag; /* stage 3: this host's ranks again */
    struct sb_hier_op *head;  /* all-reduces in flight, in issue order */
};

struct sb_hier_op {
    struct sb_hier_op *next;
    float *buf;
    enum stage stage;
    int stage_done;                /* the stage in flight completed */
    struct sb_comm_request sub;    /* the stage's request on its communicator */
    double stage_start_s;
    struct sb_comm_stage *ctr;     /* (3) the stages' counters */
    size_t *counts;                /* (L) floats of shard i */
    float *shard;                  /* (counts[local rank]) this rank's shard */
};

int sb_hier_hosts(const struct sb_hier *h) { return h->cross->size; }
struct sb_comm *sb_hier_local(const struct sb_hier *h) { return h->local; }
struct sb_comm *sb_hier_cross(const struct sb_hier *h) { return h->cross; }

void sb_hier_destroy(struct sb_hier *h)
{
    if (!h) return;
    while (h->head) { /* abandoned after an error: the job is ending */
        struct sb_hier_op *op = h->head;
        h->head = op->next;
        free(op);
    }
    sb_comm_destroy(h->local_ag);
    sb_comm_destroy(h->cross);
    sb_comm_destroy(h->local);
    free(h);
}

sb_status sb_hier_create(struct sb_comm *c, int ranks_per_host, struct sb_hier **out)
{
    *out = NULL;
    struct sb_hier *h = calloc(1, sizeof *h);
    if (!h) return sb_error(SB_ERR_NOMEM, "hierarchical all-reduce: out of memory");
    sb_status st = sb_comm_split_hosts(c, ranks_per_host, &h->local, &h->cross);
    if (!st) st = sb_comm_split(h->local, 0, h->local->rank, &h->local_ag);
    if (st) {
        sb_hier_destroy(h);
        return st;
    }
    static const char *const names[3] = {"intra_host_reduce_scatter", "inter_host_allreduce",
                                         "intra_host_allgather"};
    static const enum sb_comm_kind kinds[3] = {SB_COMM_REDUCE_SCATTER, SB_COMM_ALLREDUCE,
                                               SB_COMM_ALLGATHER};
    for (int i = 0; i < 3; i++)
        c->stages[i] = (struct sb_comm_stage){names[i], SB_ALLREDUCE_HIERARCHICAL, kinds[i],
                                              i == 1 ? h->cross->size : h->local->size,
                                              {0, 0.0, 0.0}};
    c->n_stages = 3;
    *out = h;
    return SB_OK;
}

static struct sb_comm *stage_comm(const struct sb_hier *h, enum stage st)
{
    return st == REDUCE_SCATTER ? h->local : st == CROSS_ALLREDUCE ? h->cross : h->local_ag;
}

/* Issues stage `st` of op on its communicator (the ops directly: op's own
 * request on the world communicator is the one the wrappers count and the
 * flight recorder tracks) and counts the call and this rank's bytes. */
static sb_status issue(struct sb_hier *h, struct sb_hier_op *op, enum stage st)
{
    struct sb_comm *c = stage_comm(h, st);
    size_t total = 0, mine = op->counts[h->local->rank];
    for (int i = 0; i < h->local->size; i++) total += op->counts[i];
    memset(&op->sub, 0, sizeof op->sub);
    op->sub.index = -1;
    op->stage = st;
    op->stage_done = 0;
    op->stage_start_s = sb_now_s();
    struct sb_comm_counter *k = &op->ctr[st].counter;
    k->calls++;
    k->bytes += (double)(st == CROSS_ALLREDUCE ? mine : total) * sizeof(float);
    sb_status s;
    if (st == REDUCE_SCATTER)
        s = c->ops->ireduce_scatter(c, op->buf, op->shard, op->counts, &op->sub);
    else if (st == CROSS_ALLREDUCE)
        s = c->ops->iallreduce(c, op->shard, mine, &op->sub);
    else
        s = c->ops->iallgather(c, op->shard, op->buf, op->counts, &op->sub);
    return s;
}

/* Moves op on: tests (with block, waits for) its stage in flight and
 * issues the next one once it is done and op's predecessor `prev` (NULL:
 * none in flight) has issued that stage already. *moved = 1 when a stage
 * completed. */
static sb_status advance(struct sb_hier *h, struct sb_hier_op *op, const struct sb_hier_op *prev,
                         int block, int *moved)
{
    for (;;) {
        if (op->stage == DONE) return SB_OK;
        if (!op->stage_done) {
            struct sb_comm *c = stage_comm(h, op->stage);
            int done = op->sub.done;
            if (!done && block) {
                SB_TRY(c->ops->wait(c, &op->sub));
                done = 1;
            } else if (!done) {
                SB_TRY(c->ops->test(c, &op->sub, &done));
            }
            if (!done) return SB_OK;
            op->stage_done = 1;
            *moved = 1;
            op->ctr[op->stage].counter.seconds += sb_now_s() - op->stage_start_s;
            if (op->stage == ALLGATHER) {
                op->stage = DONE;
                return SB_OK;
            }
        }
        if (prev && prev->stage <= op->stage) return SB_OK; /* prev issues the next stage first */
        SB_TRY(issue(h, op, op->stage + 1));
    }
}

/* One non-blocking pass over every all-reduce in flight, in issue order;
 * unlinks the finished ones (their owners free them). */
static sb_status advance_all(struct sb_hier *h, int *moved)
{
    struct sb_hier_op *prev = NULL;
    for (struct sb_hier_op **link = &h->head; *link;) {
        struct sb_hier_op *op = *link;
        SB_TRY(advance(h, op, prev, 0, moved));
        if (op->stage == DONE) {
            *link = op->next;
        } else {
            prev = op;
            link = &op->next;
        }
    }
    return SB_OK;
}

sb_status sb_hier_start(struct sb_hier *h, float *buf, size_t n, struct sb_comm_stage *stages,
                        struct sb_hier_op **out)
{
    *out = NULL;
    int l = h->local->size, rank = h->local->rank;
    size_t base = n / (size_t)l, extra = n % (size_t)l;
    size_t mine = base + ((size_t)rank < extra ? 1 : 0);
    struct sb_hier_op *op = calloc(1, sizeof *op + (size_t)l * sizeof(size_t) +
                                          (mine ? mine : 1) * sizeof(float));
    if (!op) return sb_error(SB_ERR_NOMEM, "hierarchical all-reduce: out of memory");
    op->counts = (size_t *)(void *)(op + 1);
    op->shard = (float *)(void *)(op->counts + l);
    for (int i = 0; i < l; i++) op->counts[i] = base + ((size_t)i < extra ? 1 : 0);
    op->buf = buf;
    op->ctr = stages;
    struct sb_hier_op **tail = &h->head;
    while (*tail) tail = &(*tail)->next;
    *tail = op;
    *out = op;
    return issue(h, op, REDUCE_SCATTER);
}

sb_status sb_hier_progress(struct sb_hier *h, struct sb_hier_op *op, int block, int *done)
{
    *done = 0;
    for (;;) {
        int moved = 0;
        SB_TRY(advance_all(h, &moved));
        if (op->stage == DONE) {
            free(op);
            *done = 1;
            return SB_OK;
        }
        if (!block) return SB_OK;
        /* Nothing moved: block on the oldest all-reduce in flight (none
         * before it, so it can always go on to its next stage). */
        if (!moved) SB_TRY(advance(h, h->head, NULL, 1, &moved));
    }
}
