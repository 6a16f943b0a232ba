/* Pipeline schedules as data: each rank's ordered list of actions.
 *
 * A pipeline cuts the model into P stages, one per rank (interleaved: V model
 * chunks per rank, P*V virtual stages, chunk c of rank r being virtual stage
 * c*P + r, round-robin as Megatron-LM assigns them), and streams M
 * micro-batches through them. A schedule is the order in which each rank runs
 * its forwards and backwards, with the point-to-point transfers between them:
 *
 *   gpipe        all forwards, then all backwards (Huang et al., "GPipe",
 *                NeurIPS 2019);
 *   1f1b         min(P-1-i, M) warm-up forwards on stage i, then one forward
 *                and one backward alternately, then the remaining backwards
 *                (PipeDream-Flush: Narayanan et al., "Memory-Efficient
 *                Pipeline-Parallel DNN Training", ICML 2021);
 *   interleaved  1f1b over V chunks per rank with 2(P-1-i) + (V-1)P warm-up
 *                forwards (Narayanan et al., "Efficient Large-Scale Language
 *                Model Training on GPU Clusters Using Megatron-LM", SC 2021);
 *   zb-h1        1f1b with each backward split into its input-gradient half
 *                B and its weight-gradient half W; stage i runs W of a
 *                micro-batch i micro-batches late, so every stage holds
 *                min(P, M) in flight, as 1f1b's first stage does (Qi et al.,
 *                "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.1).
 *
 * The executor (the pipeline strategy) walks a rank's list in order: compute
 * actions run the rank's part; SEND_* actions are non-blocking (MPI_Isend,
 * completed at the end of the step); RECV_* actions block until the message
 * has arrived (MPI_Recv). Every message is tagged with its direction,
 * micro-batch and virtual stage, so a receive matches exactly its own send.
 * sb_pp_check proves, under exactly these semantics, that the lists cannot
 * hang. Micro-batches and chunks count from 0. */
#ifndef SB_SCHEDULE_H
#define SB_SCHEDULE_H

#include <stdio.h>

#include "core/status.h"

enum sb_pp_kind {
    SB_PP_GPIPE,
    SB_PP_1F1B,
    SB_PP_INTERLEAVED,
    SB_PP_ZBH1,
    SB_PP_KIND_COUNT
};

enum sb_pp_op {
    SB_PP_FORWARD,         /* forward of (micro-batch, chunk); keeps its activations */
    SB_PP_BACKWARD,        /* full backward: input and weight gradients; frees them */
    SB_PP_BACKWARD_INPUT,  /* zb-h1's B: the input gradient only */
    SB_PP_BACKWARD_WEIGHT, /* zb-h1's W: the weight gradient; frees the activations */
    SB_PP_SEND_ACT,        /* this chunk's output activation to the next virtual stage */
    SB_PP_RECV_ACT,        /* this chunk's input activation from the previous one */
    SB_PP_SEND_GRAD,       /* this chunk's input gradient to the previous virtual stage */
    SB_PP_RECV_GRAD,       /* this chunk's output gradient from the next one */
    SB_PP_OP_COUNT
};

/* One action of a rank's list. */
struct sb_pp_action {
    enum sb_pp_op op;
    int microbatch; /* 0 .. M-1 */
    int chunk;      /* this rank's model chunk, 0 .. V-1 (0 unless interleaved) */
    int stage;      /* the virtual stage: chunk * P + rank */
    int peer;       /* the other rank of a send or receive; -1 for compute */
};

/* The shape of a schedule: what the flags ask for. */
struct sb_pp_shape {
    enum sb_pp_kind kind;
    int stages;       /* P: ranks in the pipeline */
    int microbatches; /* M: micro-batches per step */
    int chunks;       /* V: model chunks per rank (1 unless interleaved) */
};

/* Every rank's list: rank r's actions are actions[offset[r] .. offset[r+1]). */
struct sb_pp_schedule {
    struct sb_pp_shape shape;
    struct sb_pp_action *actions;
    int *offset; /* (P + 1) */
};

/* The name of a schedule ("gpipe", "1f1b", "interleaved", "zb-h1"), and the
 * kind of a name; sb_pp_kind_parse returns SB_PP_KIND_COUNT for an unknown one. */
const char *sb_pp_kind_name(enum sb_pp_kind kind);
enum sb_pp_kind sb_pp_kind_parse(const char *name);

/* The short name of an op: "F", "B", "B" (input half), "W", "send_act", ... */
const char *sb_pp_op_name(enum sb_pp_op op);

/* Checks the flags of a pipeline before any work. chunks_given is the value
 * of --chunks, or 0 when it was not given (interleaved then uses 2);
 * n_layers is the number of layers of the model; can_split_backward says
 * whether the workload computes input and weight gradients separately.
 * On success *shape is filled (chunks = 1 unless interleaved). Errors, one
 * line naming the flag: SB_ERR_USAGE for stages < 1 or more than n_layers
 * (with chunks: stages x chunks, --stages), microbatches < 1
 * (--microbatches), --chunks with any schedule but interleaved or below 2
 * (--chunks), interleaved with fewer than 2 stages (--stages) or with M not
 * a multiple of P (--microbatches: Megatron-LM's requirement for its
 * interleaved schedule), zb-h1 on a workload that cannot split its backward
 * (--schedule). */
sb_status sb_pp_validate(enum sb_pp_kind kind, int stages, int microbatches, int chunks_given,
                         int n_layers, int can_split_backward, struct sb_pp_shape *shape);

/* Builds every rank's list for a validated shape (sb_pp_validate): the
 * compute order of the schedule (see the top of this file) with a RECV_ACT
 * before each forward and a RECV_GRAD before each backward (or B) that has
 * a neighbour, and a SEND_ACT after each forward and a SEND_GRAD after each
 * backward (or B) that has one. Errors: SB_ERR_INTERNAL for a shape that
 * sb_pp_validate would refuse, SB_ERR_NOMEM. Free with sb_pp_schedule_free. */
sb_status sb_pp_schedule_build(const struct sb_pp_shape *shape, struct sb_pp_schedule *out);

/* Frees the lists of sb_pp_schedule_build (a zeroed schedule is fine). */
void sb_pp_schedule_free(struct sb_pp_schedule *s);

/* Number of actions of rank r, and its actions. */
int sb_pp_rank_count(const struct sb_pp_schedule *s, int rank);
const struct sb_pp_action *sb_pp_rank_actions(const struct sb_pp_schedule *s, int rank);

/* Proves that the lists run to their end under the executor's semantics:
 * sends are non-blocking, receives block until the matching message (same
 * direction, micro-batch and virtual stage, from the rank that owns the
 * neighbouring virtual stage) has been sent. Simulates all ranks, each
 * advancing until it reaches a receive whose message was not sent yet,
 * until none can advance. Also checks that each rank's compute actions do
 * every micro-batch's forward and backward (or B and W) exactly once per
 * chunk, a backward after its own forward and a W after its B, and that no
 * message is sent twice or left unreceived, and that a send or receive
 * names the rank of the neighbouring virtual stage. Errors: SB_ERR_INTERNAL
 * with one line naming the rank, the action index and the action: "1f1b
 * schedule: rank 1 action 9 (recv_grad mb 1 chunk 0 from rank 2): waits
 * forever: rank 2 ends its list without sending it", "...: waits forever:
 * a deadlock, rank 1 waits in turn at its action 0 (recv_act mb 0 chunk 0
 * from rank 0)", "...: its input was not received", "...: is never
 * received"; SB_ERR_NOMEM. */
sb_status sb_pp_check(const struct sb_pp_schedule *s);

/* The message of send or receive a, shared by a send and its matching
 * receive and by no other message of the step: with direction 0 for an
 * activation and 1 for a gradient and b the boundary between virtual
 * stages b and b+1, ((direction * M) + micro-batch) * (P*V - 1) + b, in
 * [0, sb_pp_message_count). The executor can use it as the MPI tag (MPI
 * guarantees tags up to 32767: enough while 2 M (P*V - 1) <= 32768).
 * -1 for a compute action. */
int sb_pp_message_id(const struct sb_pp_shape *s, const struct sb_pp_action *a);

/* Number of distinct messages of a step: 2 M (P*V - 1). */
int sb_pp_message_count(const struct sb_pp_shape *s);

/* Formats action a as "recv_act mb 3 chunk 0 from rank 1" into buf. */
void sb_pp_action_describe(const struct sb_pp_action *a, char *buf, size_t size);

#endif
