/* Megatron-LM's conjugate operators over a tp communicator, counted, and
 * the formulas of their traffic; see tp_ops.h. */
#include "strategies/shared/tp_ops.h"

void sb_tp_ops_install(struct sb_tp_ops *t, struct sb_model *m, struct sb_comm *comm)
{
    t->comm = comm;
    t->st = SB_OK;
    m->tp_allreduce = sb_tp_ops_allreduce;
    m->tp_ctx = t;
}

void sb_tp_ops_allreduce(void *ctx, float *buf, size_t count)
{
    struct sb_tp_ops *t = ctx;
    if (t->st || count == 0) return;
    /* The communicator's own algorithm (--allreduce: ring, recursive
     * doubling, the library's), issued and waited for at once: the next
     * layer needs the sum. */
    struct sb_comm_request req = {0};
    t->st = sb_comm_iallreduce(t->comm, buf, count, &req);
    if (!t->st) t->st = sb_comm_wait(t->comm, &req);
}

sb_status sb_tp_ops_take_error(struct sb_tp_ops *t)
{
    sb_status st = t->st;
    t->st = SB_OK;
    return st;
}

void sb_tp_mlp_traffic(int pairs, const int *row_out, const int *col_in, double b,
                       int micro_batches, struct sb_tp_traffic *out, double *forward_floats,
                       double *backward_floats)
{
    double fwd = 0.0, bwd = 0.0;
    for (int i = 0; i < pairs; i++) {
        fwd += b * row_out[i];
        if (i > 0) bwd += b * col_in[i];
    }
    out->forward_calls = (long)micro_batches * pairs;
    out->backward_calls = (long)micro_batches * (pairs > 0 ? pairs - 1 : 0);
    long calls = out->forward_calls + out->backward_calls;
    out->floats_per_call = calls ? micro_batches * (fwd + bwd) / calls : 0.0;
    if (forward_floats) *forward_floats = micro_batches * fwd;
    if (backward_floats) *backward_floats = micro_batches * bwd;
}

struct sb_tp_traffic sb_tp_block_traffic(int blocks, double b, double s, double h,
                                         int micro_batches)
{
    struct sb_tp_traffic t = {
        .forward_calls = 2L * micro_batches * blocks,
        .backward_calls = 2L * micro_batches * blocks,
        .floats_per_call = b * s * h,
    };
    return t;
}

double sb_tp_traffic_seconds(const struct sb_tp_traffic *t, const struct sb_link *link, int tp)
{
    double one = sb_cost_ring_allreduce_s(link, tp, 4.0 * t->floats_per_call);
    return (double)(t->forward_calls + t->backward_calls) * one;
}
