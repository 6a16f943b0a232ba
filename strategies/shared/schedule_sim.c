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

/* One shared link in the simulation. */
struct link_state {
    double end;                /* after every transfer on it, messages and tails */
    double msg_start, msg_end; /* the last message's */
    int msg;                   /* its id; -1 none */
    double tail_weight;        /* the last tail's flows per a message's */
    int act_rank;              /* the last compute action with traffic on it; -1 none */
    size_t act_g;              /* its index in the timeline */
    double act_start, act_end, act_traffic, act_weight;
    double act_extra; /* what the messages on this link added to it */
};

/* The simulation's state (sb_pp_simulate). */
struct sim {
    const struct sb_pp_schedule *s;
    const struct sb_pp_times *t;
    struct sb_pp_timeline *tl;
    double *sent_at, *arrive_at; /* (messages) NAN: not sent */
    char *consumed;              /* (messages) its receive has run */
    int *msg_links;              /* (2 messages) the links each message passed */
    double *clock, *tail_end;    /* (P) */
    int *pos, *last;             /* (P) the next action; the last compute action */
    struct link_state *links;    /* (n_links) */
    int n_links;
};

/* Processor sharing of a link by two groups of flows (Kleinrock 1976): a
 * transfer that alone takes `own` seconds, beside another group of w times
 * its flows that has `other` seconds (alone) left, takes min(other, w own)
 * longer: it gets 1 / (1 + w) of the link until one of them ends. */
static double shared_extra(double own, double other, double w)
{
    return fmin(fmax(0.0, other), fmax(0.0, w) * own);
}

/* Whether the compute action link k records is still running at `at` and
 * can still be lengthened: it is its rank's last action run (nothing after it
 * has started) and has no tail (that left at its old end). */
static int action_open(const struct sim *m, const struct link_state *k, double at)
{
    if (k->act_rank < 0 || !(k->act_start <= at && at < k->act_end)) return 0;
    int r = k->act_rank;
    return m->clock[r] == k->act_end && m->pos[r] > 0 &&
           (size_t)m->s->offset[r] + (size_t)m->pos[r] - 1 == k->act_g &&
           !(m->t->tail_s && m->pos[r] - 1 == m->last[r] && m->t->tail_s[r] > 0);
}

/* held[k] (one of a transfer's or an action's two links), or -1 where it
 * is none or the same link as held[0] (a link counts once). */
static int distinct_link(const int *held, int k)
{
    return held[k] < 0 || (k == 1 && held[1] == held[0]) ? -1 : held[k];
}

/* Whether links a and b record the same compute action. */
static int same_action(const struct link_state *a, const struct link_state *b)
{
    return a->act_rank >= 0 && a->act_rank == b->act_rank && a->act_g == b->act_g;
}

/* Adds `extra` seconds to what the messages on link k took from the running
 * compute action there; the action ends later by the largest such total
 * over its links, not their sum: a ring's traffic goes out and in at once,
 * so a message out and one in that meet it slow the same exchanges. */
static void lengthen_action(struct sim *m, struct link_state *k, double extra)
{
    double before = 0.0, after = 0.0;
    for (int l = 0; l < m->n_links; l++)
        if (same_action(&m->links[l], k)) before = fmax(before, m->links[l].act_extra);
    k->act_extra += extra;
    for (int l = 0; l < m->n_links; l++)
        if (same_action(&m->links[l], k)) after = fmax(after, m->links[l].act_extra);
    double more = after - before, old = k->act_end;
    if (!(more > 0)) return;
    for (int l = 0; l < m->n_links; l++)
        if (same_action(&m->links[l], k) && m->links[l].act_end == old)
            m->links[l].act_end = old + more;
    m->clock[k->act_rank] += more;
    m->tl->end_s[k->act_g] += more;
    m->tl->compute_s[k->act_rank] += more;
}

/* A transfer of `seconds` sent at `start` over the two links held[0] and
 * held[1] (-1: none; held NULL: free); message id `msg` (-1: a tail). A
 * message waits for the messages before it (it starts at the later of
 * `start` and their end) and shares each link with what is still passing
 * there: a tail of w = `tail_weight` times its flows (w x min(the tail's
 * rest, seconds) longer: schedule_sim.h), and a running compute action's
 * traffic (shared_extra), whose action it lengthens in turn by
 * shared_extra of its own (lengthen_action). A tail (`weight` its flows per a message's)
 * waits for the messages before it, not for other tails, whose sharing of
 * the link its time already prices (the dp axis's share, layout_links.h).
 * *end_s gets the end; the links' ends move to it. SB_ERR_INTERNAL for a
 * link outside 0 .. n_links - 1. */
static sb_status pass_links(struct sim *m, const int *held, double start, double seconds,
                            int msg, double weight, double *end_s)
{
    int n = m->n_links;
    double begin = start, extra = 0.0;
    for (int k = 0; held && k < 2; k++) {
        int l = held[k];
        if (l >= n)
            return sb_error(SB_ERR_INTERNAL, "schedule simulation: link %d of %d", l, n);
        if (l >= 0) begin = fmax(begin, m->links[l].msg_end);
    }
    for (int k = 0; held && msg >= 0 && k < 2; k++) {
        int l = held[k];
        if (l < 0) continue;
        struct link_state *q = &m->links[l];
        extra = fmax(extra, q->tail_weight * fmin(fmax(0.0, q->end - begin), seconds));
        if (action_open(m, q, begin)) {
            double rest = q->act_traffic * (q->act_end - begin) / (q->act_end - q->act_start);
            double w = q->act_weight;
            extra = fmax(extra, shared_extra(seconds, rest, w));
            lengthen_action(m, q, shared_extra(rest, seconds, w > 0 ? 1.0 / w : INFINITY));
        }
    }
    double end = begin + seconds + extra;
    for (int k = 0; held && k < 2; k++) {
        int l = distinct_link(held, k);
        if (l < 0) continue;
        struct link_state *q = &m->links[l];
        q->end = fmax(q->end, end);
        if (msg < 0) {
            q->tail_weight = weight;
        } else {
            q->msg_start = begin;
            q->msg_end = end;
            q->msg = msg;
        }
    }
    *end_s = end;
    return SB_OK;
}

/* Sends message a of rank r at `start`: it arrives p2p seconds after the
 * later of its send and, on each link it passes (t->act_links /
 * grad_links), the end of the message before it there (pass_links). */
static sb_status transfer(struct sim *m, int r, const struct sb_pp_action *a, double start)
{
    const struct sb_pp_times *t = m->t;
    int p = m->s->shape.stages, link = a->op == SB_PP_SEND_ACT ? r : a->peer;
    int k = sb_pp_message_id(&m->s->shape, a);
    double p2p = t->p2p_s ? t->p2p_s[link] : 0;
    if (p > 1 && !(isfinite(p2p) && p2p >= 0))
        return sb_error(SB_ERR_INTERNAL, "schedule simulation: point-to-point time of "
                        "link %d is %g", link, p2p);
    const int *held = a->op == SB_PP_SEND_ACT ? t->act_links : t->grad_links;
    held = held ? held + 2 * link : NULL;
    m->msg_links[2 * k] = held ? held[0] : -1;
    m->msg_links[2 * k + 1] = held ? held[1] : -1;
    m->sent_at[k] = start;
    return pass_links(m, held, start, p2p, k, 0.0, &m->arrive_at[k]);
}

/* The seconds of compute action a (of `d` seconds) of rank r on the links
 * (sb_pp_times' compute_link_s; zb-h1's B carries the backward's up to
 * its own time, W the rest). */
static double action_traffic(const struct sim *m, const struct sb_pp_action *a, int r, double d)
{
    const struct sb_pp_times *t = m->t;
    int p = m->s->shape.stages;
    if (!t->compute_link_s || !t->compute_links) return 0.0;
    double f = t->compute_link_s[r], b = t->compute_link_s[p + r], c = 0.0;
    double half = t->backward_input_s ? t->backward_input_s[r] : 0.0;
    if (a->op == SB_PP_FORWARD) c = f;
    else if (a->op == SB_PP_BACKWARD) c = b;
    else if (a->op == SB_PP_BACKWARD_INPUT) c = fmin(b, half);
    else if (a->op == SB_PP_BACKWARD_WEIGHT) c = b - fmin(b, half);
    return c > 0 ? fmin(c, d) : 0.0; /* finite, >= 0: sb_pp_simulate checked */
}

/* A compute action of rank r from `start`, `d` seconds with `c` of them
 * on its links (timeline index g): a message still passing one of those
 * links shares it, so the action takes shared_extra longer and the message
 * (while its receive has not run, and no later message queues behind it)
 * arrives later by shared_extra of its own. The action is then the link's
 * running one. Returns its end. */
static double run_on_links(struct sim *m, int r, size_t g, double start, double d, double c)
{
    const int *on = m->t->compute_links + 2 * r;
    double w = m->t->compute_weight ? m->t->compute_weight[r] : 1.0, extra = 0.0;
    double on_link[2] = {0.0, 0.0};
    for (int k = 0; k < 2 && c > 0; k++) {
        int l = distinct_link(on, k); /* in range: sb_pp_simulate checked */
        if (l < 0) continue;
        struct link_state *q = &m->links[l];
        int msg = q->msg;
        if (msg < 0 || m->consumed[msg] || !(q->msg_end > start && q->msg_start < start + d))
            continue;
        double from = fmax(start, q->msg_start);
        double mine = c * (start + d - from) / d, theirs = q->msg_end - from;
        on_link[k] = shared_extra(mine, theirs, w > 0 ? 1.0 / w : INFINITY);
        extra = fmax(extra, on_link[k]);
        int last_on_both = 1;
        for (int j = 0; j < 2; j++) {
            int h = m->msg_links[2 * msg + j];
            if (h >= 0 && m->links[h].msg != msg) last_on_both = 0;
        }
        if (!last_on_both) continue;
        double later = shared_extra(theirs, mine, w);
        m->arrive_at[msg] += later;
        for (int j = 0; j < 2; j++) {
            int h = m->msg_links[2 * msg + j];
            if (h < 0) continue;
            m->links[h].msg_end += later;
            m->links[h].end = fmax(m->links[h].end, m->links[h].msg_end);
        }
    }
    double end = start + d + extra;
    for (int k = 0; k < 2 && c > 0; k++) {
        int l = distinct_link(on, k);
        if (l < 0) continue;
        struct link_state *q = &m->links[l];
        q->act_rank = r;
        q->act_g = g;
        q->act_start = start;
        q->act_end = end;
        q->act_traffic = c;
        q->act_weight = w;
        q->act_extra = on_link[k];
    }
    return end;
}

/* Runs rank r's next action from its clock (a receive: once its message
 * was sent); after its last compute action, its tail. */
static sb_status move(struct sim *m, int r)
{
    const struct sb_pp_schedule *s = m->s;
    const struct sb_pp_times *t = m->t;
    struct sb_pp_timeline *tl = m->tl;
    const struct sb_pp_action *a = &sb_pp_rank_actions(s, r)[m->pos[r]];
    size_t g = (size_t)s->offset[r] + (size_t)m->pos[r];
    double start = m->clock[r], end = start;
    if (is_send(a->op)) {
        SB_TRY(transfer(m, r, a, start));
    } else if (is_recv(a->op)) {
        int k = sb_pp_message_id(&s->shape, a);
        end = fmax(start, m->arrive_at[k]);
        m->consumed[k] = 1;
        double idle = fmax(0, m->sent_at[k] - start);
        tl->bubble_s[r] += idle;
        tl->p2p_wait_s[r] += end - start - idle;
    } else {
        double d = duration(t, a, r);
        if (d < 0)
            return sb_error(SB_ERR_INTERNAL, "schedule simulation: no valid %s time for "
                            "stage %d", sb_pp_op_name(a->op), r);
        double c = action_traffic(m, a, r, d);
        end = c > 0 ? run_on_links(m, r, g, start, d, c) : start + d;
        tl->compute_s[r] += end - start;
    }
    tl->start_s[g] = start;
    tl->end_s[g] = end;
    m->clock[r] = end;
    m->pos[r]++;
    if (a->peer < 0 && m->pos[r] - 1 == m->last[r] && t->tail_s) {
        double tail = t->tail_s[r];
        if (!(isfinite(tail) && tail >= 0))
            return sb_error(SB_ERR_INTERNAL, "schedule simulation: tail of stage %d is %g", r,
                            tail);
        double w = t->tail_weight ? t->tail_weight[r] : 1.0;
        if (!(isfinite(w) && w >= 0))
            return sb_error(SB_ERR_INTERNAL, "schedule simulation: tail weight of stage %d "
                            "is %g", r, w);
        SB_TRY(pass_links(m, t->tail_links ? t->tail_links + 2 * r : NULL, end, tail, -1, w,
                          &m->tail_end[r]));
    }
    return SB_OK;
}

/* When rank r's next action can run: its clock, or for a receive the later
 * of its clock and its message's arrival; -1 when it has no next action or
 * waits for a message not sent yet. */
static double ready_at(const struct sim *m, int r)
{
    if (m->pos[r] >= sb_pp_rank_count(m->s, r)) return -1;
    const struct sb_pp_action *a = &sb_pp_rank_actions(m->s, r)[m->pos[r]];
    if (!is_recv(a->op)) return m->clock[r];
    int k = sb_pp_message_id(&m->s->shape, a);
    return isnan(m->sent_at[k]) ? -1 : fmax(m->clock[r], m->arrive_at[k]);
}

sb_status sb_pp_simulate(const struct sb_pp_schedule *s, const struct sb_pp_times *t,
                         struct sb_pp_timeline *out)
{
    int p = s->shape.stages, n = s->offset[p];
    size_t n_msg = (size_t)sb_pp_message_count(&s->shape) + 1;
    /* every link array numbers the same links: the tails' alone as well */
    int n_links = t->act_links || t->grad_links || t->tail_links || t->compute_links
                      ? (t->n_links > 0 ? t->n_links : 0) : 0;
    *out = (struct sb_pp_timeline){0};
    out->start_s = calloc((size_t)n + 1, sizeof(double));
    out->end_s = calloc((size_t)n + 1, sizeof(double));
    out->compute_s = calloc((size_t)p, sizeof(double));
    out->p2p_wait_s = calloc((size_t)p, sizeof(double));
    out->bubble_s = calloc((size_t)p, sizeof(double));
    struct sim m = {.s = s, .t = t, .tl = out, .n_links = n_links};
    m.sent_at = malloc(n_msg * sizeof(double));
    m.arrive_at = calloc(n_msg, sizeof(double));
    m.consumed = calloc(n_msg, 1);
    m.msg_links = calloc(2 * n_msg, sizeof(int));
    m.clock = calloc((size_t)p, sizeof(double));
    m.tail_end = calloc((size_t)p, sizeof(double));
    m.pos = calloc((size_t)p, sizeof(int));
    m.last = calloc((size_t)p, sizeof(int));
    m.links = calloc((size_t)n_links + 1, sizeof *m.links);
    sb_status st = SB_OK;
    if (!out->start_s || !out->end_s || !out->compute_s || !out->p2p_wait_s || !out->bubble_s ||
        !m.sent_at || !m.arrive_at || !m.consumed || !m.msg_links || !m.clock || !m.tail_end ||
        !m.pos || !m.last || !m.links)
        st = sb_error(SB_ERR_NOMEM, "schedule simulation: out of memory");
    for (size_t k = 0; !st && k < n_msg; k++) m.sent_at[k] = NAN;
    for (int l = 0; !st && l < n_links; l++) m.links[l].msg = m.links[l].act_rank = -1;
    for (int l = 0; !st && t->compute_links && l < 2 * p; l++)
        if (t->compute_links[l] >= n_links)
            st = sb_error(SB_ERR_INTERNAL, "schedule simulation: link %d of %d",
                          t->compute_links[l], n_links);
    for (int l = 0; !st && t->compute_links && t->compute_link_s && l < 2 * p; l++)
        if (!(isfinite(t->compute_link_s[l]) && t->compute_link_s[l] >= 0))
            st = sb_error(SB_ERR_INTERNAL, "schedule simulation: traffic of stage %d's %s is "
                          "%g", l % p, l < p ? "forward" : "backward", t->compute_link_s[l]);
    for (int r = 0; !st && t->compute_weight && r < p; r++)
        if (!(isfinite(t->compute_weight[r]) && t->compute_weight[r] >= 0))
            st = sb_error(SB_ERR_INTERNAL, "schedule simulation: traffic weight of stage %d "
                          "is %g", r, t->compute_weight[r]);
    for (int r = 0; !st && r < p; r++) { /* each rank's last compute action */
        m.last[r] = -1;
        for (int i = 0; i < sb_pp_rank_count(s, r); i++)
            if (sb_pp_rank_actions(s, r)[i].peer < 0) m.last[r] = i;
    }
    /* Time order: the rank whose next action can run earliest runs it (a
     * receive at its message's arrival). Every later send is then no
     * earlier than this one, so the links serve messages in the order they
     * are sent; and a message's receive runs after whatever starts on its
     * links while it passes, which may still lengthen it. */
    while (!st) {
        int next = -1;
        double when = 0.0;
        for (int r = 0; r < p; r++) {
            double at = ready_at(&m, r);
            if (at >= 0 && (next < 0 || at < when)) next = r, when = at;
        }
        if (next < 0) break;
        st = move(&m, next);
    }
    for (int r = 0; !st && r < p; r++) {
        if (m.pos[r] < sb_pp_rank_count(s, r))
            st = sb_error(SB_ERR_INTERNAL, "schedule simulation: stage %d waits forever at "
                          "action %d (run sb_pp_check)", r, m.pos[r]);
        out->step_s = fmax(out->step_s, fmax(m.clock[r], m.tail_end[r]));
    }
    /* Idle is everything that is neither compute nor transfer: the waits for
     * another stage counted above, and the rank's tail after its last action. */
    for (int r = 0; !st && r < p; r++)
        out->bubble_s[r] = out->step_s - out->compute_s[r] - out->p2p_wait_s[r];
    free(m.sent_at);
    free(m.arrive_at);
    free(m.consumed);
    free(m.msg_links);
    free(m.clock);
    free(m.tail_end);
    free(m.pos);
    free(m.last);
    free(m.links);
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
