/* A pipeline's measurements per stage, beside its schedule's formulas:
 * the time of each stage in forward, backward, bubble and point-to-point
 * per step, the activation slots alive at once, the point-to-point bytes,
 * summed over the measured steps and reported (describe) with the
 * formulas of schedule_formula.h evaluated with the run's own forward and
 * backward times (docs/pipeline.md). */
#ifndef SB_PIPELINE_STATS_H
#define SB_PIPELINE_STATS_H

#include <stddef.h>
#include <stdio.h>

#include "comm/comm.h"
#include "core/details.h"
#include "core/status.h"
#include "strategies/shared/schedule.h"

enum sb_pp_stat {
    SB_PP_STAT_FORWARD,  /* seconds in forward_part */
    SB_PP_STAT_BACKWARD, /* seconds in backward_part */
    SB_PP_STAT_BUBBLE,   /* seconds in blocking receives (idle until another stage delivers) */
    SB_PP_STAT_P2P,      /* seconds issuing sends and completing them */
    SB_PP_STAT_STEP,     /* seconds of this rank's own step (to its end, before the
                          * exchange of these stats and any wait for a later rank) */
    SB_PP_STAT_BYTES,    /* point-to-point bytes sent and received */
    SB_PP_STAT_PEAK,     /* activation slots alive at once, the step's most */
    SB_PP_STAT_ACT_LEDGER, /* activation bytes the ledger holds (the workload's, allocated) */
    SB_PP_STAT_ACT_SLOTS,  /* activation bytes by the slots counted alive (the strategy's
                            * formula: scratch + peak x bytes per slot) */
    SB_PP_STAT_WEIGHT,     /* seconds in backward_weight_part (zb-h1's W; BACKWARD is then
                            * its B, backward_input_part) */
    SB_PP_STAT_DRAIN,      /* seconds from this stage's last action to the pipeline's last
                            * action anywhere (sb_pp_waits_split): idle for other stages,
                            * part of the bubble as the formula defines it */
    SB_PP_STAT_SPAN,       /* seconds from this stage's step start to the pipeline's last
                            * action: the stage's share of the pipeline's step */
    SB_PP_STAT_COUNT
};

struct sb_pp_stats {
    struct sb_pp_shape shape;
    int stage;           /* this rank's stage */
    int mb;              /* samples per micro-batch */
    size_t *boundary;    /* (P*V - 1) floats per sample crossing boundary b (after vstage b) */
    double mine[SB_PP_STAT_COUNT]; /* this step, this rank */
    int live;            /* slots alive now */
    double *sum;         /* (P * SB_PP_STAT_COUNT) summed over measured steps, mean over dp */
    double *scratch;     /* (P * SB_PP_STAT_COUNT + world_size): the step's sums, then
                          * each world rank's step end */
    int world_size, world_rank;
    long steps;          /* measured steps in sum */
};

/* Prepares the stats of stage `stage` of shape with mb samples per
 * micro-batch and boundary[b] floats per sample crossing virtual-stage
 * boundary b (copied), on world rank world_rank of world_size (the
 * exchange of sb_pp_stats_end_step). Errors: SB_ERR_NOMEM. */
sb_status sb_pp_stats_init(struct sb_pp_stats *st, const struct sb_pp_shape *shape, int stage,
                           int mb, const size_t *boundary, int world_size, int world_rank);

/* Frees what init allocated (a zeroed struct is fine). */
void sb_pp_stats_free(struct sb_pp_stats *st);

/* Adds seconds to this step's `what` (FORWARD .. STEP), or bytes
 * (ACT_LEDGER, ACT_SLOTS). */
void sb_pp_stats_add(struct sb_pp_stats *st, enum sb_pp_stat what, double seconds);

/* Counts point-to-point bytes of this step (sent or received). */
void sb_pp_stats_bytes(struct sb_pp_stats *st, double bytes);

/* A slot taken (+1) or freed (-1): the step's peak is the most alive. */
void sb_pp_stats_live(struct sb_pp_stats *st, int delta);

/* Ends a step of step_s seconds that ended at end_s (s, on one clock for
 * every rank: rank 0's): sums every rank's step over `world` (each rank at
 * its stage's place, divided by the D replicas of a stage) into the
 * measured sums, clears this step's values, and sets *last_end_s to the
 * latest end_s of the world's ranks (the job's step ended there), all in
 * one all-reduce. Collective over world. Errors: the communicator's. */
sb_status sb_pp_stats_end_step(struct sb_pp_stats *st, struct sb_comm *world, int replicas,
                               double step_s, double end_s, double *last_end_s);

/* Forgets the measured steps (the end of warm-up). */
void sb_pp_stats_reset(struct sb_pp_stats *st);

/* Adds to det, per stage (lists of P): stage_forward_ms, stage_backward_ms,
 * stage_bubble_ms, stage_p2p_ms, stage_step_ms (means per measured step),
 * stage_live_activations (the most slots alive at once, counted),
 * stage_live_activations_formula (sb_pp_live_activations),
 * stage_activation_bytes (the ledger's) and stage_activation_bytes_from_slots,
 * stage_p2p_bytes (per step, counted), stage_p2p_bytes_formula (every
 * boundary of the stage: M micro-batches x mb samples x floats x 4 bytes,
 * each direction), stage_bubble_fraction (measured bubble / step),
 * stage_drain_ms (idle from the stage's last action to the pipeline's
 * last), stage_pipeline_step_ms (from the stage's start to the pipeline's
 * last action), bubble_fraction_measured (sum of bubble + drain over the
 * sum of pipeline steps: the formula's definition, docs/pipeline.md);
 * and the formula evaluated with the run's own mean forward and backward
 * per micro-batch, exact for equal stages (sb_pp_bubble_exact_s):
 * bubble_fraction_formula (of the step),
 * bubble_over_ideal_formula, bubble_over_ideal_measured (the stages' mean
 * bubble over their mean forward + backward), and
 * stage_bubble_simulated_ms (sb_pp_simulate with each stage's own
 * measured times, no transfer time). zb-h1 also stage_weight_ms (its W;
 * stage_backward_ms is then its B), and its formulas take the run's own
 * forward, B and W. Nothing without measured steps. */
void sb_pp_stats_describe(const struct sb_pp_stats *st, const struct sb_pp_schedule *sched,
                          struct sb_strategy_details *det);

/* Prints one line to out: the pipeline's bubble (receive waits + drain) as
 * a fraction of its step, measured, each stage's own (receive waits over
 * its step) as a range, beside the schedule's formula with the run's own mean
 * forward and backward per micro-batch ("pipeline 1f1b: bubble 31.2% of
 * the step measured (stages 12.0% .. 40.1%), formula 33.3% with the run's
 * times; (p-1)/m 0.50 formula, 0.46 measured"). Nothing without measured
 * steps. */
void sb_pp_stats_print(const struct sb_pp_stats *st, FILE *out);

/* Each receive's wait of a step, split at the moment its sender posted the
 * message: per message (sb_pp_message_id) its post time on the sender and
 * the receiver's wait, all on world rank 0's clock (a rank's own clock
 * less clock_offset_s: sb_job_clock_offset). The same exchange carries
 * each stage's step start and last action's end, for the drain. */
struct sb_pp_waits {
    double *sent_at;              /* (n + 2 stages) s: the n posts, then each stage's
                                   * step start, then each stage's last action's end; 0: none */
    double *wait_begin, *wait_end; /* (n) s; 0: none this step */
    int n, stages, stage;
    double clock_offset_s;
};

/* Prepares w for n messages per step on stage `stage` of `stages`.
 * Errors: SB_ERR_NOMEM. */
sb_status sb_pp_waits_init(struct sb_pp_waits *w, int n, int stages, int stage,
                           double clock_offset_s);
void sb_pp_waits_free(struct sb_pp_waits *w);

/* This rank's step began at start_s and its last action ended at end_s
 * (its clock). */
void sb_pp_waits_span(struct sb_pp_waits *w, double start_s, double end_s);

/* Message id was posted at t_s (this rank's clock). */
void sb_pp_waits_sent(struct sb_pp_waits *w, int id, double t_s);

/* This rank waited for message id from t0 to t1 (its clock). */
void sb_pp_waits_received(struct sb_pp_waits *w, int id, double t0, double t1);

/* Ends a step: sums the posts and the stages' spans over `comm` (the
 * pipeline's stages: each message has one sender, each stage one span) in
 * the one all-reduce the split needs anyway (no extra message or sync
 * point), and sets *moved_s to the part of this rank's waits after the
 * post (transfer: point-to-point wait, not bubble), clamped to each wait
 * (clock error); *drain_s to the time from this rank's last action's end
 * to the latest stage's (idle: the drain, 0 on the stage that ends last),
 * and *span_s to the time from this rank's step start to that latest end
 * (its share of the pipeline's step); then clears the step. Without a
 * span recorded (sb_pp_waits_span) both are 0. Collective over comm.
 * Errors: the communicator's. */
sb_status sb_pp_waits_split(struct sb_pp_waits *w, struct sb_comm *comm, double *moved_s,
                            double *drain_s, double *span_s);

#endif
