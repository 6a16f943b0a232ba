/* Pipeline schedules: flag validation and each rank's action list
 * (schedule.h). The compute order of each schedule is built first, as a
 * list of (op, micro-batch, chunk) per rank; the point-to-point actions are
 * then put around each compute action that has a neighbouring stage. */
#include "strategies/shared/schedule.h"

#include <stdlib.h>
#include <string.h>

/* Bounds that keep every count of a schedule (P * V * M * 9 actions) far
 * below INT_MAX; far above any pipeline worth running. */
#define SB_PP_MAX_STAGES 1024
#define SB_PP_MAX_MICROBATCHES 65536
#define SB_PP_MAX_CHUNKS 64
#define SB_PP_MAX_ACTIONS 50000000L

static const char *const KIND_NAME[SB_PP_KIND_COUNT] = {"gpipe", "1f1b", "interleaved", "zb-h1"};

const char *sb_pp_kind_name(enum sb_pp_kind kind)
{
    return kind >= 0 && kind < SB_PP_KIND_COUNT ? KIND_NAME[kind] : "?";
}

enum sb_pp_kind sb_pp_kind_parse(const char *name)
{
    for (int k = 0; k < SB_PP_KIND_COUNT; k++)
        if (name && strcmp(name, KIND_NAME[k]) == 0) return (enum sb_pp_kind)k;
    return SB_PP_KIND_COUNT;
}

const char *sb_pp_op_name(enum sb_pp_op op)
{
    static const char *const name[SB_PP_OP_COUNT] = {
        "F", "B", "B", "W", "send_act", "recv_act", "send_grad", "recv_grad"};
    return op >= 0 && op < SB_PP_OP_COUNT ? name[op] : "?";
}

sb_status sb_pp_validate(enum sb_pp_kind kind, int stages, int microbatches, int chunks_given,
                         int n_layers, int can_split_backward, struct sb_pp_shape *shape)
{
    if (kind < 0 || kind >= SB_PP_KIND_COUNT)
        return sb_error(SB_ERR_USAGE, "--schedule: expected gpipe, 1f1b, interleaved or zb-h1");
    if (stages < 1 || stages > SB_PP_MAX_STAGES)
        return sb_error(SB_ERR_USAGE, "--stages: %d is not between 1 and %d", stages,
                        SB_PP_MAX_STAGES);
    if (microbatches < 1 || microbatches > SB_PP_MAX_MICROBATCHES)
        return sb_error(SB_ERR_USAGE, "--microbatches: %d is not between 1 and %d", microbatches,
                        SB_PP_MAX_MICROBATCHES);
    if (chunks_given && kind != SB_PP_INTERLEAVED)
        return sb_error(SB_ERR_USAGE, "--chunks: only the interleaved schedule has model chunks "
                        "(--schedule %s has one per stage)", sb_pp_kind_name(kind));
    if (chunks_given && (chunks_given < 2 || chunks_given > SB_PP_MAX_CHUNKS))
        return sb_error(SB_ERR_USAGE, "--chunks: %d is not between 2 and %d (1 chunk per stage "
                        "is --schedule 1f1b)", chunks_given, SB_PP_MAX_CHUNKS);
    int chunks = kind == SB_PP_INTERLEAVED ? (chunks_given ? chunks_given : 2) : 1;
    if (kind == SB_PP_INTERLEAVED && stages < 2)
        return sb_error(SB_ERR_USAGE, "--stages: the interleaved schedule needs at least 2 stages");
    if ((long)stages * chunks > n_layers && chunks > 1)
        return sb_error(SB_ERR_USAGE, "--stages: %d stages x %d chunks is more parts than the "
                        "model's %d layers", stages, chunks, n_layers);
    if (stages > n_layers)
        return sb_error(SB_ERR_USAGE, "--stages: %d stages is more than the model's %d layers",
                        stages, n_layers);
    if (kind == SB_PP_INTERLEAVED && microbatches % stages != 0)
        return sb_error(SB_ERR_USAGE, "--microbatches: the interleaved schedule needs a multiple "
                        "of --stages (%d), as Megatron-LM's; got %d", stages, microbatches);
    if (kind == SB_PP_ZBH1 && !can_split_backward)
        return sb_error(SB_ERR_USAGE, "--schedule: zb-h1 splits each backward into its input- and "
                        "weight-gradient halves, which this workload cannot compute apart");
    if ((long)stages * chunks * microbatches * 9 > SB_PP_MAX_ACTIONS)
        return sb_error(SB_ERR_USAGE, "--microbatches: %d micro-batches x %d stages x %d chunks "
                        "is too large a schedule", microbatches, stages, chunks);
    *shape = (struct sb_pp_shape){.kind = kind, .stages = stages, .microbatches = microbatches,
                                  .chunks = chunks};
    return SB_OK;
}

/* A rank's list under construction. */
struct list {
    struct sb_pp_action *a;
    int n;
    int rank;
    const struct sb_pp_shape *shape;
};

static void push(struct list *l, enum sb_pp_op op, int mb, int chunk, int peer)
{
    l->a[l->n++] = (struct sb_pp_action){.op = op, .microbatch = mb, .chunk = chunk,
                                         .stage = chunk * l->shape->stages + l->rank,
                                         .peer = peer};
}

/* Appends compute action (op, mb, chunk) with its receive before it and its
 * send after it, where the virtual stage has that neighbour. */
static void push_compute(struct list *l, enum sb_pp_op op, int mb, int chunk)
{
    int p = l->shape->stages, last = p * l->shape->chunks - 1;
    int vs = chunk * p + l->rank, prev = (l->rank + p - 1) % p, next = (l->rank + 1) % p;
    switch (op) {
    case SB_PP_FORWARD:
        if (vs > 0) push(l, SB_PP_RECV_ACT, mb, chunk, prev);
        push(l, op, mb, chunk, -1);
        if (vs < last) push(l, SB_PP_SEND_ACT, mb, chunk, next);
        break;
    case SB_PP_BACKWARD:
    case SB_PP_BACKWARD_INPUT:
        if (vs < last) push(l, SB_PP_RECV_GRAD, mb, chunk, next);
        push(l, op, mb, chunk, -1);
        if (vs > 0) push(l, SB_PP_SEND_GRAD, mb, chunk, prev);
        break;
    default: push(l, op, mb, chunk, -1); break;
    }
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* GPipe: every forward, then every backward, micro-batches in order (the
 * order of single's gradient accumulation). */
static void build_gpipe(struct list *l)
{
    int m = l->shape->microbatches;
    for (int k = 0; k < m; k++) push_compute(l, SB_PP_FORWARD, k, 0);
    for (int k = 0; k < m; k++) push_compute(l, SB_PP_BACKWARD, k, 0);
}

/* 1F1B (PipeDream-Flush) and ZB-H1. Stage i runs w = min(P-1-i, M) warm-up
 * forwards, then M-w times a forward and the oldest backward, then the w
 * remaining backwards. ZB-H1 splits each backward into B and W and runs
 * W(k) right after B(k+i), so that i more micro-batches are in flight than
 * in 1F1B (P in all); the W's still owed run after the last B. */
static void build_1f1b(struct list *l, int zero_bubble)
{
    int p = l->shape->stages, m = l->shape->microbatches, i = l->rank;
    int warmup = min_int(p - 1 - i, m), next_w = 0;
    enum sb_pp_op backward = zero_bubble ? SB_PP_BACKWARD_INPUT : SB_PP_BACKWARD;
    for (int k = 0; k < warmup; k++) push_compute(l, SB_PP_FORWARD, k, 0);
    for (int k = 0; k < m; k++) {
        if (k + warmup < m) push_compute(l, SB_PP_FORWARD, k + warmup, 0);
        push_compute(l, backward, k, 0);
        if (zero_bubble && k - i >= 0) push_compute(l, SB_PP_BACKWARD_WEIGHT, next_w++, 0);
    }
    while (zero_bubble && next_w < m) push_compute(l, SB_PP_BACKWARD_WEIGHT, next_w++, 0);
}

/* The k-th forward (or backward) of an interleaved rank runs micro-batch
 * group*P + (k mod P) of chunk (k mod P*V) / P, groups of P micro-batches
 * passing through every chunk in turn; backwards visit the chunks from the
 * last (Narayanan et al. SC 2021, section 2.2; Megatron-LM's
 * get_model_chunk_id). */
static void interleaved_unit(const struct sb_pp_shape *s, int k, int forward, int *mb, int *chunk)
{
    int p = s->stages, v = s->chunks, in_group = k % (p * v);
    *chunk = in_group / p;
    if (!forward) *chunk = v - 1 - *chunk;
    *mb = k / (p * v) * p + in_group % p;
}

/* Interleaved 1F1B: w = min(2(P-1-i) + (V-1)P, M*V) warm-up forwards on
 * rank i, then forward and backward alternately, then the rest backward. */
static void build_interleaved(struct list *l)
{
    const struct sb_pp_shape *s = l->shape;
    int p = s->stages, total = s->microbatches * s->chunks, i = l->rank;
    int warmup = min_int(2 * (p - 1 - i) + (s->chunks - 1) * p, total), mb, chunk;
    for (int k = 0; k < warmup; k++) {
        interleaved_unit(s, k, 1, &mb, &chunk);
        push_compute(l, SB_PP_FORWARD, mb, chunk);
    }
    for (int k = 0; k < total; k++) {
        if (k + warmup < total) {
            interleaved_unit(s, k + warmup, 1, &mb, &chunk);
            push_compute(l, SB_PP_FORWARD, mb, chunk);
        }
        interleaved_unit(s, k, 0, &mb, &chunk);
        push_compute(l, SB_PP_BACKWARD, mb, chunk);
    }
}

sb_status sb_pp_schedule_build(const struct sb_pp_shape *shape, struct sb_pp_schedule *out)
{
    *out = (struct sb_pp_schedule){0};
    struct sb_pp_shape check;
    int chunks_given = shape->kind == SB_PP_INTERLEAVED ? shape->chunks : 0;
    if (shape->chunks != 1 && shape->kind != SB_PP_INTERLEAVED)
        return sb_error(SB_ERR_INTERNAL, "schedule: %d chunks for %s", shape->chunks,
                        sb_pp_kind_name(shape->kind));
    if (sb_pp_validate(shape->kind, shape->stages, shape->microbatches, chunks_given,
                       shape->stages * shape->chunks, 1, &check) != SB_OK)
        return sb_error(SB_ERR_INTERNAL, "schedule: an unchecked shape: %s", sb_error_message());
    int p = shape->stages;
    size_t per_rank = 9 * (size_t)shape->microbatches * (size_t)shape->chunks;
    out->shape = *shape;
    out->actions = malloc(per_rank * (size_t)p * sizeof *out->actions);
    out->offset = malloc(((size_t)p + 1) * sizeof *out->offset);
    struct list l = {.a = out->actions, .shape = shape};
    if (!out->actions || !out->offset) {
        sb_pp_schedule_free(out);
        return sb_error(SB_ERR_NOMEM, "schedule: out of memory for %d stages x %d micro-batches",
                        p, shape->microbatches);
    }
    for (int r = 0; r < p; r++) {
        out->offset[r] = l.n;
        l.rank = r;
        switch (shape->kind) {
        case SB_PP_GPIPE: build_gpipe(&l); break;
        case SB_PP_1F1B: build_1f1b(&l, 0); break;
        case SB_PP_ZBH1: build_1f1b(&l, 1); break;
        case SB_PP_INTERLEAVED: build_interleaved(&l); break;
        default: break;
        }
    }
    out->offset[p] = l.n;
    return SB_OK;
}

void sb_pp_schedule_free(struct sb_pp_schedule *s)
{
    free(s->actions);
    free(s->offset);
    *s = (struct sb_pp_schedule){0};
}

int sb_pp_rank_count(const struct sb_pp_schedule *s, int rank)
{
    return s->offset[rank + 1] - s->offset[rank];
}

const struct sb_pp_action *sb_pp_rank_actions(const struct sb_pp_schedule *s, int rank)
{
    return s->actions + s->offset[rank];
}

int sb_pp_message_id(const struct sb_pp_shape *s, const struct sb_pp_action *a)
{
    int grad = a->op == SB_PP_SEND_GRAD || a->op == SB_PP_RECV_GRAD;
    int to_next = a->op == SB_PP_SEND_ACT || a->op == SB_PP_RECV_GRAD;
    if (a->peer < 0) return -1;
    int boundary = to_next ? a->stage : a->stage - 1;
    return (grad * s->microbatches + a->microbatch) * (s->stages * s->chunks - 1) + boundary;
}

int sb_pp_message_count(const struct sb_pp_shape *s)
{
    return 2 * s->microbatches * (s->stages * s->chunks - 1);
}

void sb_pp_action_describe(const struct sb_pp_action *a, char *buf, size_t size)
{
    static const char *const long_name[SB_PP_OP_COUNT] = {
        "forward", "backward", "backward_input", "backward_weight",
        "send_act", "recv_act", "send_grad", "recv_grad"};
    const char *name = a->op >= 0 && a->op < SB_PP_OP_COUNT ? long_name[a->op] : "?";
    if (a->peer < 0)
        snprintf(buf, size, "%s mb %d chunk %d", name, a->microbatch, a->chunk);
    else
        snprintf(buf, size, "%s mb %d chunk %d %s rank %d", name, a->microbatch, a->chunk,
                 a->op == SB_PP_SEND_ACT || a->op == SB_PP_SEND_GRAD ? "to" : "from", a->peer);
}
