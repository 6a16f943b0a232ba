/* Timelines of a pipeline schedule and its printed grid (schedule_sim.h). */
#include "strategies/shared/schedule_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sb_pp_timeline_free(struct sb_pp_timeline *tl)
{
    free(tl->start_s);
    free(tl->end_s);
    free(tl->compute_s);
    free(tl->p2p_wait_s);
    free(tl->bubble_s);
    *tl = (struct sb_pp_timeline){0};
}

/* The duration of compute action a on rank r, or -1 when t lacks it. */
static double duration(const struct sb_pp_times *t, const struct sb_pp_action *a, int r)
{
    const double *d = a->op == SB_PP_FORWARD           ? t->forward_s
                      : a->op == SB_PP_BACKWARD        ? t->backward_s
                      : a->op == SB_PP_BACKWARD_INPUT  ? t->backward_input_s
                      : a->op == SB_PP_BACKWARD_WEIGHT ? t->backward_weight_s
                                                       : NULL;
    return d && isfinite(d[r]) && d[r] >= 0 ? d[r] : -1;
}

static int is_send(enum sb_pp_op op) { return op == SB_PP_SEND_ACT || op == SB_PP_SEND_GRAD; }
static int is_recv(enum sb_pp_op op) { return op == SB_PP_RECV_ACT || op == SB_PP_RECV_GRAD; }

/* Whether rank r can run its next action: it has one, and it is not a
 * receive whose message was not sent yet. */
static int can_move(const struct sb_pp_schedule *s, int r, int pos, const double *sent_at)
{
    if (pos >= sb_pp_rank_count(s, r)) return 0;
    const struct sb_pp_action *a = &sb_pp_rank_actions(s, r)[pos];
    return !is_recv(a->op) || !isnan(sent_at[sb_pp_message_id(&s->shape, a)]);
}

/* A transfer of `seconds` sent at `start` over the two links held[0] and
 * held[1] (-1: none; held NULL: free). link_free[l] is link l's end after
 * every transfer, link_free[n_links + l] after messages only, and
 * link_free[2 n_links + l] the weight of the last tail on it. A message
 * (tail 0) waits for the messages before it (it starts at the later of
 * `start` and their end) and shares the link with a tail still passing:
 * processor sharing, where the tail's flows are `weight` times the
 * message's, so the message takes weight x min(the tail's rest, seconds)
 * longer. A tail (tail 1, its weight `weight`) waits for the messages
 * before it, not for other tails, whose sharing of the link its time
 * already prices (the dp axis's share, layout_links.h). *end_s gets the
 * end; the links' ends move to it. SB_ERR_INTERNAL for a link outside
 * 0 .. n_links - 1. */
static sb_status pass_links(const struct sb_pp_times *t, const int *held, double start,
                            double seconds, int tail, double weight, double *link_free,
                            double *end_s)
{
    int n = t->n_links;
    double begin = start, shared = 0.0;
    for (int k = 0; held && k < 2; k++) {
        int l = held[k];
        if (l >= n)
            return sb_error(SB_ERR_INTERNAL, "schedule simulation: link %d of %d", l, n);
        if (l >= 0) begin = fmax(begin, link_free[n + l]);
    }
    for (int k = 0; held && !tail && k < 2; k++) {
        int l = held[k];
        if (l >= 0)
            shared = fmax(shared, link_free[2 * n + l] *
                                      fmin(fmax(0.0, link_free[l] - begin), seconds));
    }
    double end = begin + seconds + shared;
    for (int k = 0; held && k < 2; k++) {
        int l = held[k];
        if (l < 0) continue;
        link_free[l] = fmax(link_free[l], end);
        if (tail) link_free[2 * n + l] = weight;
        else link_free[n + l] = end;
    }
    *end_s = end;
    return SB_OK;
}

/* The time message a (a send of rank r at `start`) arrives: p2p seconds
 * after the later of its send and, on each link it passes (t->act_links /
 * grad_links), the end of the message before it there (link_free, which
 * gets its end). */
static sb_status transfer(const struct sb_pp_schedule *s, const struct sb_pp_times *t, int r,
                          const struct sb_pp_action *a, double start, double *link_free,
                          double *arrive)
{
    int p = s->shape.stages, link = a->op == SB_PP_SEND_ACT ? r : a->peer;
    double p2p = t->p2p_s ? t->p2p_s[link] : 0;
    if (p > 1 && !(isfinite(p2p) && p2p >= 0))
        return sb_error(SB_ERR_INTERNAL, "schedule simulation: point-to-point time of "
                        "link %d is %g", link, p2p);
    const int *held = a->op == SB_PP_SEND_ACT ? t->act_links : t->grad_links;
    return pass_links(t, held ? held + 2 * link : NULL, start, p2p, 0, 0.0, link_free, arrive);
}

/* Runs rank r's next action (can_move holds) from its clock; after its
 * compute action last_compute, its tail (*tail_end gets its end). */
static sb_status move(const struct sb_pp_schedule *s, const struct sb_pp_times *t, int r,
                      int last_compute, int *pos, double *clock, double *sent_at,
                      double *arrive_at, double *link_free, double *tail_end,
                      struct sb_pp_timeline *tl)
{
    const struct sb_pp_action *a = &sb_pp_rank_actions(s, r)[*pos];
    size_t g = (size_t)s->offset[r] + (size_t)*pos;
    double start = *clock, end = start;
    if (is_send(a->op)) {
        size_t k = (size_t)sb_pp_message_id(&s->shape, a);
        sent_at[k] = start;
        SB_TRY(transfer(s, t, r, a, start, link_free, &arrive_at[k]));
    } else if (is_recv(a->op)) {
        size_t k = (size_t)sb_pp_message_id(&s->shape, a);
        end = fmax(start, arrive_at[k]);
        double idle = fmax(0, sent_at[k] - start);
        tl->bubble_s[r] += idle;
        tl->p2p_wait_s[r] += end - start - idle;
    } else {
        double d = duration(t, a, r);
        if (d < 0)
            return sb_error(SB_ERR_INTERNAL, "schedule simulation: no valid %s time for "
                            "stage %d", sb_pp_op_name(a->op), r);
        end = start + d;
        tl->compute_s[r] += d;
        if (*pos == last_compute && t->tail_s) {
            double tail = t->tail_s[r];
            if (!(isfinite(tail) && tail >= 0))
                return sb_error(SB_ERR_INTERNAL, "schedule simulation: tail of stage %d is %g",
                                r, tail);
            double w = t->tail_weight ? t->tail_weight[r] : 1.0;
            if (!(isfinite(w) && w >= 0))
                return sb_error(SB_ERR_INTERNAL, "schedule simulation: tail weight of stage "
                                "%d is %g", r, w);
            SB_TRY(pass_links(t, t->tail_links ? t->tail_links + 2 * r : NULL, end, tail, 1, w,
                              link_free, tail_end));
        }
    }
    tl->start_s[g] = start;
    tl->end_s[g] = end;
    *clock = end;
    (*pos)++;
    return SB_OK;
}

sb_status sb_pp_simulate(const struct sb_pp_schedule *s, const struct sb_pp_times *t,
                         struct sb_pp_timeline *out)
{
    int p = s->shape.stages, n = s->offset[p];
    size_t n_msg = (size_t)sb_pp_message_count(&s->shape) + 1;
    /* every link array numbers the same links: the tails' alone as well */
    size_t n_links = t->act_links || t->grad_links || t->tail_links
                         ? (size_t)(t->n_links > 0 ? t->n_links : 0) : 0;
    *out = (struct sb_pp_timeline){0};
    out->start_s = calloc((size_t)n + 1, sizeof(double));
    out->end_s = calloc((size_t)n + 1, sizeof(double));
    out->compute_s = calloc((size_t)p, sizeof(double));
    out->p2p_wait_s = calloc((size_t)p, sizeof(double));
    out->bubble_s = calloc((size_t)p, sizeof(double));
    double *sent_at = malloc(n_msg * sizeof(double)), *arrive_at = malloc(n_msg * sizeof(double));
    double *clock = calloc((size_t)p, sizeof(double));
    double *tail_end = calloc((size_t)p, sizeof(double));
    double *link_free = calloc(3 * n_links + 1, sizeof(double));
    int *pos = calloc((size_t)p, sizeof(int)), *last = calloc((size_t)p, sizeof(int));
    sb_status st = SB_OK;
    if (!out->start_s || !out->end_s || !out->compute_s || !out->p2p_wait_s || !out->bubble_s ||
        !sent_at || !arrive_at || !clock || !tail_end || !link_free || !pos || !last)
        st = sb_error(SB_ERR_NOMEM, "schedule simulation: out of memory");
    for (size_t k = 0; !st && k < n_msg; k++) sent_at[k] = NAN;
    for (int r = 0; !st && r < p; r++) { /* each rank's last compute action */
        last[r] = -1;
        for (int i = 0; i < sb_pp_rank_count(s, r); i++)
            if (sb_pp_rank_actions(s, r)[i].peer < 0) last[r] = i;
    }
    /* Time order: the earliest rank that can move runs its next action.
     * Every later send is then no earlier than this one (a rank that waits
     * resumes at an arrival, after its message's send), so the links serve
     * messages in the order they are sent. */
    while (!st) {
        int next = -1;
        for (int r = 0; r < p; r++)
            if (can_move(s, r, pos[r], sent_at) && (next < 0 || clock[r] < clock[next]))
                next = r;
        if (next < 0) break;
        st = move(s, t, next, last[next], &pos[next], &clock[next], sent_at, arrive_at,
                  link_free, &tail_end[next], out);
    }
    for (int r = 0; !st && r < p; r++) {
        if (pos[r] < sb_pp_rank_count(s, r))
            st = sb_error(SB_ERR_INTERNAL, "schedule simulation: stage %d waits forever at "
                          "action %d (run sb_pp_check)", r, pos[r]);
        out->step_s = fmax(out->step_s, fmax(clock[r], tail_end[r]));
    }
    /* Idle is everything that is neither compute nor transfer: the waits for
     * another stage counted above, and the rank's tail after its last action. */
    for (int r = 0; !st && r < p; r++)
        out->bubble_s[r] = out->step_s - out->compute_s[r] - out->p2p_wait_s[r];
    free(sent_at);
    free(arrive_at);
    free(clock);
    free(tail_end);
    free(link_free);
    free(pos);
    free(last);
    if (st) sb_pp_timeline_free(out);
    return st;
}

sb_status sb_pp_simulate_units(const struct sb_pp_schedule *s, struct sb_pp_timeline *out)
{
    int p = s->shape.stages;
    double *d = malloc(5 * (size_t)p * sizeof *d);
    if (!d) return sb_error(SB_ERR_NOMEM, "schedule simulation: out of memory");
    for (int r = 0; r < p; r++) {
        d[r] = 1;             /* forward */
        d[p + r] = 2;         /* backward */
        d[2 * p + r] = 1;     /* B */
        d[3 * p + r] = 1;     /* W */
        d[4 * p + r] = 0;     /* point-to-point */
    }
    struct sb_pp_times t = {.forward_s = d, .backward_s = d + p, .backward_input_s = d + 2 * p,
                            .backward_weight_s = d + 3 * p, .p2p_s = d + 4 * p};
    sb_status st = sb_pp_simulate(s, &t, out);
    free(d);
    return st;
}

/* The grid cell of compute action a: "F3", "B3", "W3", "F3a" (chunk 0 of
 * several), "F3.30" (chunk 30 of more than 26). */
static void cell_label(const struct sb_pp_schedule *s, const struct sb_pp_action *a, char *buf,
                       size_t size)
{
    char op = a->op == SB_PP_FORWARD ? 'F' : a->op == SB_PP_BACKWARD_WEIGHT ? 'W' : 'B';
    if (s->shape.chunks > 26)
        snprintf(buf, size, "%c%d.%d", op, a->microbatch, a->chunk);
    else if (s->shape.chunks > 1)
        snprintf(buf, size, "%c%d%c", op, a->microbatch, 'a' + a->chunk);
    else
        snprintf(buf, size, "%c%d", op, a->microbatch);
}

/* Writes the cells of the grid's rows: labels[r * slots + t], "" idle. */
static void fill_cells(const struct sb_pp_schedule *s, const struct sb_pp_timeline *tl,
                       int slots, char (*labels)[16])
{
    for (int r = 0; r < s->shape.stages; r++)
        for (int i = 0; i < sb_pp_rank_count(s, r); i++) {
            const struct sb_pp_action *a = &sb_pp_rank_actions(s, r)[i];
            if (a->peer >= 0) continue;
            int g = s->offset[r] + i;
            int end = (int)lround(tl->end_s[g]);
            for (int u = (int)lround(tl->start_s[g]); u < end && u < slots; u++)
                cell_label(s, a, labels[(size_t)r * slots + u], sizeof labels[0]);
        }
}

sb_status sb_pp_print_grid(const struct sb_pp_schedule *s, FILE *out)
{
    struct sb_pp_timeline tl;
    SB_TRY(sb_pp_simulate_units(s, &tl));
    int p = s->shape.stages, slots = (int)lround(tl.step_s);
    char (*labels)[16] = calloc((size_t)p * (size_t)(slots > 0 ? slots : 1), sizeof *labels);
    if (!labels) {
        sb_pp_timeline_free(&tl);
        return sb_error(SB_ERR_NOMEM, "schedule grid: out of memory");
    }
    fill_cells(s, &tl, slots, labels);
    int width = 1;
    for (size_t k = 0; k < (size_t)p * slots; k++)
        if ((int)strlen(labels[k]) > width) width = (int)strlen(labels[k]);
    int zb = s->shape.kind == SB_PP_ZBH1;
    fprintf(out, "# %s: %d stages, %d micro-batches", sb_pp_kind_name(s->shape.kind), p,
            s->shape.microbatches);
    if (s->shape.chunks > 1) fprintf(out, ", %d chunks per stage", s->shape.chunks);
    fprintf(out, "; slots: forward 1, %s\n",
            zb ? "B (input gradient) 1, W (weight gradient) 1" : "backward 2");
    for (int r = 0; r < p; r++) {
        fprintf(out, "stage %d:", r);
        int last = slots - 1; /* the last cell printed: no trailing idle padding */
        for (int u = 0; u < slots; u++) {
            const char *c = labels[(size_t)r * slots + u];
            fprintf(out, " %-*s", u == last ? 0 : width, c[0] ? c : ".");
        }
        fputc('\n', out);
    }
    free(labels);
    sb_pp_timeline_free(&tl);
    if (ferror(out)) return sb_error(SB_ERR_IO, "schedule grid: could not write: an output error");
    return SB_OK;
}
