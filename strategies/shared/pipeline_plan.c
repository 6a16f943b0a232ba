/* What a pipeline plans before it runs; see pipeline_plan.h. */
#include "strategies/shared/pipeline_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm/cost_model.h"
#include "strategies/shared/replica.h"
#include "strategies/shared/schedule_formula.h"

/* first[v] = the first layer of virtual stage v of n (first[n] = layers):
 * uniform, as sb_split_range cuts them; params, each cut where the
 * parameters so far come closest to their even share, at least one layer
 * per stage. */
void sb_pp_partition(const struct sb_model *whole, int n, int by_params, int *first)
{
    int L = whole->n_layers;
    for (int v = 0; v < n; v++) {
        int f, c;
        sb_split_range(L, n, v, &f, &c);
        first[v] = f;
    }
    first[n] = L;
    if (!by_params) return;
    double total = (double)whole->n_params, sum = 0;
    int at = 0;
    for (int v = 0; v < n - 1; v++) {
        double target = total * (v + 1) / n;
        int end = at + 1; /* at least one layer */
        sum += (double)whole->layers[at].count;
        while (end < L - (n - 1 - v) &&
               fabs(sum + (double)whole->layers[end].count - target) < fabs(sum - target)) {
            sum += (double)whole->layers[end].count;
            end++;
        }
        first[v + 1] = at = end;
    }
}

void sb_pp_chunk_slots(const struct sb_pp_schedule *sc, int rank, int *slots)
{
    int now[SB_DETAIL_VALUES_MAX] = {0};
    for (int c = 0; c < sc->shape.chunks; c++) slots[c] = 0;
    const struct sb_pp_action *a = sb_pp_rank_actions(sc, rank);
    for (int i = 0; i < sb_pp_rank_count(sc, rank); i++) {
        int c = a[i].chunk;
        if (c < 0 || c >= SB_DETAIL_VALUES_MAX) continue;
        if (a[i].op == SB_PP_FORWARD && ++now[c] > slots[c]) slots[c] = now[c];
        if (a[i].op == SB_PP_BACKWARD || a[i].op == SB_PP_BACKWARD_WEIGHT) now[c]--;
    }
}

/* Checks that between every pair of ranks, per direction, the receiver
 * takes the messages in the order the sender sends them: the point-to-
 * point calls carry no tag, so a pair's messages on one communicator
 * match in issue order. */
sb_status sb_pp_check_message_order(const struct sb_pp_schedule *sc)
{
    int P = sc->shape.stages, n = sb_pp_message_count(&sc->shape);
    int *sent = malloc((size_t)n * sizeof *sent);
    if (!sent)
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    /* The position of each message among its sender's sends to that peer
     * in that direction, then the same count on the receiving side. */
    sb_status st = SB_OK;
    for (int pass = 0; pass < 2 && !st; pass++)
        for (int r = 0; r < P && !st; r++)
            for (int q = 0; q < P && !st; q++)
                for (int dir = 0; dir < 2 && !st; dir++) {
                    int k = 0;
                    const struct sb_pp_action *a = sb_pp_rank_actions(sc, r);
                    for (int i = 0; i < sb_pp_rank_count(sc, r); i++) {
                        enum sb_pp_op op = a[i].op;
                        int is_send = op == SB_PP_SEND_ACT || op == SB_PP_SEND_GRAD;
                        int is_grad = op == SB_PP_SEND_GRAD || op == SB_PP_RECV_GRAD;
                        if (a[i].peer != q || is_grad != dir || is_send != (pass == 0) ||
                            sb_pp_message_id(&sc->shape, &a[i]) < 0)
                            continue;
                        int id = sb_pp_message_id(&sc->shape, &a[i]);
                        if (pass == 0) sent[id] = k++;
                        else if (sent[id] != k++)
                            st = sb_error(SB_ERR_INTERNAL, "pipeline: rank %d receives message "
                                          "%d from rank %d out of its send order", r, id, q);
                    }
                }
    free(sent);
    return st;
}

/* The NVTX and trace name of a compute action ("F3", "B3"; interleaved
 * "F3a", "B3b": the chunk as a letter); names live as long as the run. */
const char *sb_pp_action_label(const struct sb_pp_action *a, int chunks)
{
    enum { MB = 256, CH = 8 };
    static char names[3][MB][CH][16];
    int kind = a->op == SB_PP_FORWARD ? 0 : a->op == SB_PP_BACKWARD_WEIGHT ? 2 : 1;
    if (a->microbatch >= MB || a->chunk >= CH) return kind ? "backward" : "forward";
    char *nm = names[kind][a->microbatch][a->chunk];
    if (!nm[0]) {
        if (chunks > 1) snprintf(nm, 16, "%c%d%c", "FBW"[kind], a->microbatch, 'a' + a->chunk);
        else snprintf(nm, 16, "%c%d", "FBW"[kind], a->microbatch);
    }
    return nm;
}

/* The variants stratbench predict shows: (schedule, stages, chunks) at
 * M = 8 micro-batches. */
static const struct {
    enum sb_pp_kind kind;
    int stages, chunks;
    const char *name;
} predict_variants[] = {
    {SB_PP_1F1B, 2, 1, "1f1b P2"},
    {SB_PP_1F1B, 4, 1, "1f1b P4"},
    {SB_PP_INTERLEAVED, 2, 2, "interleaved P2 V2"},
    {SB_PP_INTERLEAVED, 4, 2, "interleaved P4 V2"},
};

/* stratbench predict's pipeline rows (none for a run's own report: the
 * query's cfg set). A pipeline of P stages and M = 8 micro-batches per
 * replica: each stage computes 1/P of the measured compute (the uniform
 * partition, stages assumed equal); the bubble is the schedule's formula
 * over that (sb_pp_bubble_over_ideal: (p-1)/m for 1f1b, (p-1)/(vm)
 * interleaved); a point-to-point message of a micro-batch's boundary
 * activation costs α + b/B (b = the mean cut's bytes per sample × batch/M)
 * and the fill and the drain put 2(P-1)V of them on the step's critical
 * path (the steady state's overlap compute); with n > 1 replicas each
 * stage's gradients (1/P of the parameters) are ring all-reduced over its
 * n replicas after the drain. comm_s: the point-to-point time of a middle
 * stage (4M messages; 2M with P = 2) plus the all-reduce; exposed_s: the
 * pipeline's step less the measured compute of one replica, so predict's
 * step (compute + exposed) is the pipeline's step (negative where the
 * stages' split compute outweighs the bubble). */
int sb_pp_predict_rows(const struct sb_comm_model_query *q,
                               struct sb_comm_model_row *rows, int cap)
{
    if (q->cfg || !(q->compute_s > 0) || !(q->boundary_bytes > 0) || q->batch < 8 ||
        q->layers < 2)
        return 0;
    int k = 0, m = 8;
    double b = q->boundary_bytes * q->batch / m, msg = sb_cost_message_s(&q->link, b);
    for (size_t i = 0; i < sizeof predict_variants / sizeof predict_variants[0] && k < cap; i++) {
        int p = predict_variants[i].stages, v = predict_variants[i].chunks;
        if (p * v > q->layers) continue;
        struct sb_pp_shape shape = {predict_variants[i].kind, p, m, v};
        double ideal = q->compute_s / p;
        struct sb_pp_stage_times t = {ideal / m / 2, ideal / m / 2, 0};
        double bubble = sb_pp_bubble_over_ideal(&shape, &t) * ideal;
        double sync = sb_cost_ring_allreduce_s(&q->link, q->replicas, q->bytes / p);
        double step = ideal + bubble + 2.0 * (p - 1) * v * msg + sync;
        rows[k++] = (struct sb_comm_model_row){
            .variant = predict_variants[i].name,
            .formula_name = "pipeline",
            .formula = "compute/P (1 + bubble/ideal) + 2(P-1)V (a + b/B) + ring over the stage's "
                       "share",
            .comm_s = (p > 2 ? 4.0 : 2.0) * m * v * msg + sync,
            .exposed_s = step - q->compute_s,
        };
        snprintf(rows[k - 1].legend, sizeof rows[k - 1].legend,
                 "pipeline compute/P per stage + the schedule's bubble + 2(P-1)V transfers "
                 "a + b/B (b: %.0f B/sample at a cut) + ring of 1/P, M = 8;", q->boundary_bytes);
    }
    return k;
}

