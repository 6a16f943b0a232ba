/* What strategies/pipeline.c shares with its pieces: the state of one
 * rank of a pipeline (struct pipeline, its model chunks struct chunk), the
 * executor of a schedule's actions (pipeline_exec.c: compute, receive and
 * send on activation slots, docs/pipeline.md's timing split), and the
 * chunks' construction and the gather of the whole model
 * (pipeline_chunks.c). Internal to the pipeline strategy. */
#ifndef SB_PIPELINE_EXEC_H
#define SB_PIPELINE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "comm/grid.h"
#include "strategies/shared/dp_sync.h"
#include "strategies/shared/pipeline_stats.h"
#include "strategies/shared/replica.h"
#include "strategies/shared/schedule.h"
#include "strategies/shared/tp_ops.h"
#include "strategies/shared/zero_sync.h"
#include "strategies/strategy.h"

/* One model chunk of this rank: virtual stage `vstage` of the pipeline. */
struct chunk {
    struct sb_replica *r; /* the part (its layers), its optimizer, batch slots */
    struct sb_dp_sync *sync; /* its gradients over the dp communicator (D > 1) */
    struct sb_zero_sync *zsync; /* instead, --zero-stage 1: ZeRO stage 1 over dp (D > 1) */
    int vstage, first_layer, n_layers;
    size_t in_floats, out_floats; /* per sample at its input and output */
    int first, last;              /* holds the model's first / last layer */
    int *slot_of;                 /* (M) micro-batch -> activation slot, -1 */
    int *free_slot, n_free;       /* the slots not holding a micro-batch */
    float *act_in;   /* (slots, mb, in_floats) received input activations */
    float *grad_in;  /* (M, mb, in_floats) input gradients, sent back: one per micro-batch,
                      * so that no backward waits for an earlier send to be received */
    float *grad_out; /* (mb, out_floats) the received output gradient */
    struct sb_comm_request *send_act, *send_grad; /* (slots), (M): sends in flight */
    int backwards;   /* backwards (zb-h1: input halves B) of this step so far */
    int weights;     /* zb-h1's weight halves W of this step so far */
    int live, peak;  /* slots holding a micro-batch now, and the step's most */
    double per_slot, scratch; /* the workload's activation bytes per slot and besides */
};

struct pipeline {
    struct sb_grid *grid;
    struct sb_comm *world, *act, *grad, *gather; /* act/grad: the pp axis per direction */
    struct sb_pp_schedule sched;
    int P, M, V, D, stage, mb;
    struct chunk *chunk; /* (V) */
    int *layer_first;    /* (P*V + 1) virtual stage -> its first layer */
    struct sb_replica *whole; /* world rank 0: the whole model (evaluation, read_params) */
    struct sb_pp_stats stats; /* per stage, summed since the end of warm-up */
    size_t whole_n_params;
    struct sb_pp_waits waits; /* each receive's wait, split at its sender's post */
    double step_s;            /* the last step's time on this rank (its stage's figure) */
    double step_end_s;        /* when it ended (sb_now_s, this rank's clock) */
    double after_step_s;      /* pipeline_after_step's time since warm-up, and its calls */
    long after_steps;
    double test_delay_ms[3]; /* STRATBENCH_TEST_PP_DELAY_MS: added to each F, B, W */
    double comm_bytes; /* the receive and send buffers of every chunk */
    /* --tp T: every chunk is tp rank tp_rank's shard of its layers, its
     * hook (Megatron-LM's f and g) summing over grid->tp_comm; the tp ranks
     * of the last stage compute the same loss, tp rank 0's counts
     * (loss_scratch takes the others'). T = 1: whole layers, no hook. */
    int T, tp_rank;
    int sp; /* --sequence-parallel: each chunk's shard keeps the stream sharded by tokens */
    int zero_stage; /* 0: dp_sync's all-reduce; 1: zero_sync's stage 1 */
    struct sb_tp_ops tp;
    double *loss_scratch;
    struct sb_comm *gather_world; /* T > 1: the world again, uncounted: the gather */
    struct sb_model *chunk_whole; /* T > 1: the whole model's tables (1 sample), every rank */
};

/* The test-only hook STRATBENCH_TEST_PP_DELAY_MS=F:B:W[:STAGE]: every
 * forward, backward (zb-h1: B) and zb-h1's W on stage STAGE (every stage
 * when left out) takes F, B, W ms longer, waited inside the action's
 * timing, so that a test knows the stages' times (equal or unbalanced)
 * whatever the machine's load; the results are unchanged. Sets ms[3] on
 * the stages it names, else zeros. Errors: SB_ERR_USAGE naming the
 * variable when it is not three numbers in 0..60000 and an optional
 * STAGE in 0..stages-1. */
sb_status sb_pp_test_delay_hook(int stage, int stages, double ms[3]);

/* Completes a send in flight, if req holds one. */
sb_status sb_pp_finish_send(struct sb_comm *comm, struct sb_comm_request *req);

/* Splits each receive's wait of this step at the moment its sender posted
 * the message (the senders' times summed over the pp communicator: each
 * message has one sender): before it the stage idled for another stage's
 * compute (bubble), after it for the transfer (point-to-point wait, moved
 * to the comm phase); and adds the stage's drain (idle from its last
 * action to the pipeline's last) and its share of the pipeline's step to
 * its stats, from the same exchange. Collective over the pp communicator. */
sb_status sb_pp_split_waits(struct pipeline *p, struct sb_step_result *out);

/* Runs action a of this rank's list (mine: this dp replica's batch of
 * sample indices). zb-h1's B runs the workload's backward_input_part and
 * sends its input gradient; its W runs backward_weight_part (accumulating
 * in the order the W's run: micro-batch order) and frees the slot, which
 * holds its activations and B's kept gradients until then. Errors:
 * SB_ERR_INTERNAL for an action not run here or more micro-batches in
 * flight than slots;
 * the communicator's and the workload's errors. */
sb_status sb_pp_run_action(struct sb_strategy *s, struct pipeline *p,
                           const struct sb_pp_action *a, const int32_t *mine,
                           struct sb_step_result *out);

/* Builds this rank's chunks: virtual stages stage, stage + P, ...
 * (slots: (V) activation slots per chunk). Errors: SB_ERR_NOMEM, the
 * workload's and the backend's. */
sb_status sb_pp_make_chunks(struct sb_strategy *s, struct pipeline *p, const int *slots);

/* With --tp: per stage (its chunks together) the tp collectives per step
 * into det, by tp_ops.h's formulas for each stage's tp rank 0 shard (built
 * once, 1 sample): the all-reduces and their bytes
 * (stage_tp_allreduce_calls_per_step, _bytes_per_step); with
 * --sequence-parallel the blocks, all-gathers and reduce-scatters as well
 * (stage_tp_blocks, stage_tp_allgather_calls_per_step,
 * stage_tp_reduce_scatter_calls_per_step; the all-reduces then the
 * LayerNorms'). World rank 0's counters (comm.by_role.tp) are stage 0's. */
void sb_pp_describe_tp(const struct sb_strategy *s, const struct pipeline *p,
                       struct sb_strategy_details *det);

/* Copies every virtual stage's parameters into the whole model on world
 * rank 0 (dp replica 0's stages, over the uncounted gather communicator). */
sb_status sb_pp_gather_whole(struct sb_strategy *s, struct pipeline *p);

#endif
