/* Megatron-LM's conjugate operators over a tp communicator, counted, and
 * the formulas of their traffic; see tp_ops.h. */
#include "strategies/shared/tp_ops.h"

void sb_tp_ops_install(struct sb_tp_ops *t, struct sb_model *m, struct sb_comm *comm)
{
    t->comm = comm;
    t->st = SB_OK;
    m->tp_allreduce = sb_tp_ops_allreduce;
    if (m->part.sequence_parallel) {
        m->tp_allgather = sb_tp_ops_allgather;
        m->tp_reduce_scatter = sb_tp_ops_reduce_scatter;
    }
    m->tp_ctx = t;
}

/* Sets every block of t->counts to `count` floats. */
static void equal_blocks(struct sb_tp_ops *t, size_t count)
{
    for (int r = 0; r < t->comm->size && r < SB_TP_MAX; r++) t->counts[r] = count;
}

void sb_tp_ops_allgather(void *ctx, const float *shard, float *whole, size_t count)
{
    struct sb_tp_ops *t = ctx;
    if (t->st || count == 0) return;
    equal_blocks(t, count);
    struct sb_comm_request req = {0};
    t->st = sb_comm_iallgather(t->comm, shard, whole, t->counts, &req);
    if (!t->st) t->st = sb_comm_wait(t->comm, &req);
}

void sb_tp_ops_reduce_scatter(void *ctx, const float *whole, float *shard, size_t count)
{
    struct sb_tp_ops *t = ctx;
    if (t->st || count == 0) return;
    equal_blocks(t, count);
    struct sb_comm_request req = {0};
    t->st = sb_comm_ireduce_scatter(t->comm, whole, shard, t->counts, &req);
    if (!t->st) t->st = sb_comm_wait(t->comm, &req);
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

struct sb_tp_traffic sb_tp_model_traffic(const struct sb_model *m, double b, int micro_batches)
{
    struct sb_tp_traffic t = {0};
    int in_column_run = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const struct sb_tensor_desc *d = &m->tensors[i];
        const struct sb_layer_desc *L = &m->layers[d->layer];
        if (d->tp_split == SB_TP_ROW) {
            t.forward_calls++;
            t.forward_floats += b * (double)L->out_floats;
        }
        int column = d->tp_split == SB_TP_COLUMN;
        if (column && !in_column_run && m->part.first_layer + d->layer > 0) {
            t.backward_calls++;
            t.backward_floats += b * (double)L->in_floats;
        }
        in_column_run = column;
    }
    t.forward_calls *= micro_batches;
    t.backward_calls *= micro_batches;
    t.forward_floats *= micro_batches;
    t.backward_floats *= micro_batches;
    return t;
}

struct sb_tp_traffic sb_tp_block_traffic(int blocks, double b, double s, double h,
                                         int micro_batches)
{
    double calls = 2.0 * micro_batches * blocks;
    struct sb_tp_traffic t = {(long)calls, (long)calls, calls * b * s * h, calls * b * s * h};
    return t;
}

struct sb_tp_sp_traffic sb_tp_sp_block_traffic(int blocks, double b, double s, double h,
                                               int micro_batches)
{
    double bsh = b * s * h, m = micro_batches;
    struct sb_tp_sp_traffic t = {
        .allgather_calls = (long)(m * (4.0 * blocks + 2)),
        .reduce_scatter_calls = (long)(m * 4.0 * blocks),
        .allreduce_calls = (long)(m * 2.0 * blocks),
        .allgather_floats = m * (4.0 * blocks + 2) * bsh,
        .reduce_scatter_floats = m * 4.0 * blocks * bsh,
        .allreduce_floats = m * 2.0 * blocks * 2 * h,
    };
    return t;
}

void sb_tp_sp_blocks(const struct sb_model *m, int *blocks, double *tokens, double *width)
{
    *blocks = 0;
    *tokens = *width = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const struct sb_layer_desc *L = &m->layers[l];
        int split = 0;
        for (int i = L->first_tensor; i < L->first_tensor + L->n_tensors; i++)
            split |= m->tensors[i].tp_split != SB_TP_REPLICATED;
        if (split && L->in_shape[1] > 1) {
            (*blocks)++;
            *tokens = L->in_shape[0];
            *width = L->in_shape[1];
        }
    }
}

double sb_tp_traffic_seconds(const struct sb_tp_traffic *t, const struct sb_link *link, int tp,
                             enum sb_allreduce_algo algo)
{
    long calls = t->forward_calls + t->backward_calls;
    if (tp <= 1 || calls == 0) return 0.0;
    double bytes = 4.0 * (t->forward_floats + t->backward_floats) / (double)calls;
    if (algo == SB_ALLREDUCE_AUTO) algo = sb_allreduce_choose((size_t)bytes, tp);
    return (double)calls * sb_cost_allreduce_s(link, algo, tp, bytes);
}
