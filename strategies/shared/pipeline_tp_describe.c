/* The pipeline's tensor-parallel traffic per stage for its report
 * (strategy_details), by tp_ops.h's formulas: see sb_pp_describe_tp in
 * pipeline_exec.h. */
#include "core/details.h"
#include "strategies/shared/pipeline_exec.h"
#include "strategies/shared/tp_ops.h"

/* With --tp: per stage (its chunks together), the tp all-reduces per step
 * and their bytes by tp_ops.h's formula (sb_tp_model_traffic of the
 * stage's shard: a row-parallel layer's output forward, a run of
 * column-parallel tensors' input backward, M micro-batches of mb
 * samples); the report's comm.by_role.tp (world rank 0: stage 0) must
 * equal stage 0's. With --sequence-parallel instead the all-gathers,
 * reduce-scatters and LayerNorm all-reduces per step of each stage's blocks
 * (sb_tp_sp_block_traffic: per block and micro-batch 4 all-gathers and 4
 * reduce-scatters of mb x tokens x width floats, 2 all-reduces of 2 width;
 * per chunk and micro-batch one all-gather more each way: the whole stream
 * out of the chunk, or the head's class token, forward; the input
 * gradient, or the embedding's, backward); their bytes are the calls times
 * 4 mb tokens width (the report's comm.by_role.tp; the details hold at most
 * SB_DETAILS_MAX keys). Builds each stage's tp rank 0 shard (1 sample) once. */
void sb_pp_describe_tp(const struct sb_strategy *s, const struct pipeline *p,
                       struct sb_strategy_details *det)
{
    double calls[64] = {0}, bytes[64] = {0}, ag[64] = {0}, rs[64] = {0}, blocks_of[64] = {0};
    int n = p->P < 64 ? p->P : 64;
    for (int vs = 0; vs < p->P * p->V; vs++) {
        int first = p->layer_first[vs];
        struct sb_part part = {first, p->layer_first[vs + 1] - first, 0, p->T, 1, p->sp, 0, 0};
        struct sb_model *m = NULL;
        if (vs % p->P >= n ||
            s->env->workload->create_part(s->env->cfg, s->env->be, 1, &part, &m) != SB_OK)
            continue;
        int st = vs % p->P;
        if (p->sp) {
            int blocks = 0;
            double tokens = 0, width = 0;
            sb_tp_sp_blocks(m, &blocks, &tokens, &width);
            if (!tokens) { /* a chunk of no block (the embedding, the head): its stream */
                const struct sb_layer_desc *L = &m->layers[0];
                tokens = L->out_shape[0];
                width = L->out_shape[1];
                if (width <= 1) {
                    tokens = L->in_shape[0];
                    width = L->in_shape[1];
                }
            }
            struct sb_tp_sp_traffic sp = sb_tp_sp_block_traffic(blocks, p->mb, tokens, width,
                                                                 p->M);
            ag[st] += (double)sp.allgather_calls;
            rs[st] += (double)sp.reduce_scatter_calls;
            calls[st] += (double)sp.allreduce_calls;
            bytes[st] += 4.0 * sp.allreduce_floats;
            blocks_of[st] += blocks;
        } else {
            struct sb_tp_traffic tr = sb_tp_model_traffic(m, p->mb, p->M);
            calls[st] += (double)(tr.forward_calls + tr.backward_calls);
            bytes[st] += 4.0 * (tr.forward_floats + tr.backward_floats);
        }
        m->ops->destroy(m);
    }
    double t = p->T;
    sb_details_add(det, "tp", 0, &t, 1);
    sb_details_add_bool(det, "sequence_parallel", p->sp);
    sb_details_add(det, "stage_tp_allreduce_calls_per_step", 1, calls, n);
    sb_details_add(det, "stage_tp_allreduce_bytes_per_step", 1, bytes, n);
    if (!p->sp) return;
    sb_details_add(det, "stage_tp_blocks", 1, blocks_of, n);
    sb_details_add(det, "stage_tp_allgather_calls_per_step", 1, ag, n);
    sb_details_add(det, "stage_tp_reduce_scatter_calls_per_step", 1, rs, n);
}
