/* The layout model: a prediction of one training step of a dp x tp x pp
 * layout (with micro-batches, a pipeline schedule, a zero stage and a rank
 * order) from a measured run's compute, the model's layer table and the two
 * link classes (within a host, across hosts). `stratbench predict --layouts`
 * ranks every layout that fits by it; docs/layouts.md derives each term.
 *
 * Step time of a layout (every stage alike, the slowest stage's times):
 *   step = data + m (t_f + t_b) + bubble + dp_exposed + optimizer
 *   t_f  = forward of one micro-batch on the stage: the stage's share of the
 *          measured forward, its tp-split layers' share divided by tp (a
 *          pass's fixed part, the fraction phi the compute probe fitted at
 *          the measured batch B, by the stage's share of the parameters; the
 *          rest by its share of the work and the micro-batch's samples b:
 *          F (phi params_s / params + (1 - phi) (b / B) w_s), F the measured
 *          forward at B; docs/layouts.md, "A pass's fixed part"), plus
 *          its tp collectives (the all-reduce of every row-parallel layer's
 *          output: Megatron-LM's g; Shoeybi et al. 2019, section 3); one
 *          point-to-point message of its boundary activation per chunk
 *          (α + bytes/B on the link that boundary crosses, within a host
 *          or across: sb_grid_stages_cross_hosts; Narayanan et al. SC
 *          2021, section 3.2) occupies that link (below)
 *   t_b  = backward likewise (the all-reduce of every column-parallel
 *          layer's input gradient but the model's first layer's: Megatron-LM's
 *          f; the boundary gradient); a tp all-reduce by the algorithm the tp
 *          communicator runs (sb_allreduce_choose: recursive doubling below
 *          ~160 kB at tp 2, else the ring)
 *   an axis whose groups cross hosts gets, per stage, the cross-host link's
 *          bandwidth divided by that stage's share of the host links its
 *          flows cross with the other groups of the axis (layout_links.h:
 *          processor sharing, sum_j min(w_j, w_s) / w_s)
 *   span (ideal + bubble) of a pipeline: one replica's schedule simulated
 *          (schedule_sim.h) with every stage's own t_f and t_b and its
 *          boundaries' messages, which do not block their stage (the sends
 *          complete at the step's end) but pass their hosts' links one at a
 *          time, in the order they are sent: a crossing boundary holds its
 *          sender's host's link out and its receiver's link in, so a middle
 *          host's activations forward and gradients back take turns on its
 *          one link (docs/layouts.md, 2026-11-29); the ideal m (t_f + t_b)
 *          is the slowest stage's, the bubble the rest of the span (balanced
 *          stages on free links: the schedule's formula, schedule_formula.h)
 *   compute with shared_cores C: the measured per sample times
 *          share / min(1, C/n_eff) (a rank computing beside n - 1 others
 *          gets min(1, C/n) of a core); share the probe's own while it
 *          computed (probe_core_share: its thread CPU time over wall), else
 *          min(1, C/probe_ranks); n_eff = dp tp without a pipeline (every
 *          rank computes at once), with one the ranks computing at once
 *          averaged over the pipeline's span, dp tp busy / span (busy the
 *          replica's stages' compute summed; a fixed point, since the share
 *          sets the times: pipeline_core_scale)
 *   dp_exposed: the existing ddp (zero stage 0) or zero (stages 1, 3) model
 *          over dp ranks on the link dp crosses, for the stage's parameter
 *          bytes, its overlap window one micro-batch's backward; a dp-only
 *          ddp layout on hosts of 2+ ranks runs on the world communicator,
 *          whose auto rule takes the hierarchical all-reduce
 *          (sb_layout_world_allreduce_s)
 *   optimizer: the measured optimizer time scaled by the parameters the
 *          rank updates (its part; zero: its 1/dp shard of the part)
 * Memory per rank: with a workload and its configuration (inputs.workload,
 * model_cfg) the run's ledger entry of the largest rank, category by
 * category, from the workload's sizes (sb_layout_memory, layout_memory.h:
 * every layout, pipeline or not); else the scaled estimate: the ZeRO
 * accounting of the stage's part (the strategy's model_state_formula:
 * Rajbhandari et al., SC 2020) plus the live activation slots of the
 * schedule (sb_pp_live_activations) times one slot's activation bytes (the
 * measured run's activations scaled by the micro-batch's samples and the
 * stage's share of the activation floats, tp-split outputs divided by tp).
 * A dp-only layout of the measured replica count (tp = pp = m = 1) is
 * exactly the ddp or zero row `stratbench predict` gives (the unit tests)
 * where its groups share no host link: one rank per host, or zero; ddp on
 * hosts of 2+ ranks is the hierarchical all-reduce instead. */
#ifndef SB_LAYOUT_MODEL_H
#define SB_LAYOUT_MODEL_H

#include "comm/cost_model.h"
#include "comm/grid.h"
#include "core/memory.h"
#include "core/config.h"
#include "core/status.h"
#include "strategies/shared/schedule.h"
#include "workloads/workload.h"

struct sb_strategy_ops;

/* A layout: data, as the report's `layout` object and predict name it. */
struct sb_layout {
    int dp, tp, pp;          /* replicas, tensor-parallel ranks, pipeline stages */
    int microbatches;        /* m: micro-batches per step (1: none) */
    enum sb_pp_kind schedule; /* the pipeline schedule (gpipe when pp = 1) */
    int chunks;              /* v: model chunks per rank (interleaved), else 1 */
    int zero_stage;          /* 0 (ddp's all-reduce) .. 3 */
    enum sb_rank_order order;
};

/* What the model is given. */
struct sb_layout_inputs {
    const struct sb_layer_summary *layers;
    int n_layers;
    int global_batch;              /* samples per step, all replicas together */
    double data_s_per_sample;      /* measured data + h2d, s per sample */
    double forward_s_per_sample;   /* measured forward of the whole model, s per sample */
    double backward_s_per_sample;  /* measured backward, s per sample */
    int probe_batch;               /* samples per replica of the measured run (0: unknown) */
    double forward_fixed_fraction; /* of the measured forward at probe_batch, the part
                                    * that does not grow with the batch (the compute
                                    * probe's fit, predict_layouts.c; 0: none, every
                                    * second per sample) */
    double backward_fixed_fraction; /* likewise, the backward */
    double optimizer_s_per_param;  /* measured optimizer step, s per parameter updated */
    double activation_bytes_per_sample; /* measured activation bytes of the whole model per
                                         * sample (0: 8 bytes per activation float: the
                                         * activation and its gradient, fp32) */
    int ranks_per_host;            /* R: hosts hold R consecutive ranks */
    int shared_cores;              /* C: the cores every rank of the job shares (the
                                    * one-machine cluster; 0: each rank has a core) */
    int probe_ranks;               /* ranks of the measured run, all computing at once */
    double probe_core_share;       /* the share of a core the measured run's compute had
                                    * (its thread CPU time over wall: report 1.16's
                                    * noise_by_rank); 0: not measured, taken as
                                    * min(1, C / probe_ranks) */
    struct sb_link_classes links;
    enum sb_optimizer_kind optimizer;
    int overlap;                   /* dp's gradient sync overlaps backward (1/0) */
    const double *bucket_bytes;    /* the measured buckets (used when a stage is the
                                    * whole model), or NULL */
    int n_buckets;
    /* The strategies whose cost model and ZeRO accounting the dp sync uses:
     * [0] for zero stage 0 (ddp), [1] for stages 1-3 (zero); resolved by the
     * caller (the command line knows the names). */
    const struct sb_strategy_ops *dp_sync[2];
    /* Optional (NULL: the scaled estimate above): the workload and a
     * configuration of its model (the report's: hidden widths, transformer
     * shape, precision, eval batch), whose size and part_size ops give every
     * layout's ledger as the run allocates it (layout_memory.h). */
    const struct sb_workload_ops *workload;
    const struct sb_config *model_cfg;
    /* 1: the measured run's --sequence-parallel, which layouts without a
     * pipeline and with tp > 1 (the tensor strategy's) keep: their shards'
     * memory is sized with it (layout_memory.h); the step time does not
     * model it. 0: whole residual streams. */
    int sequence_parallel;
};

/* The prediction of one layout. Times in seconds per step, bytes per rank
 * per step (communication: the bytes one rank passes to the collective or
 * sends). */
struct sb_layout_prediction {
    double step_s;
    double data_s, compute_s;   /* data + h2d; m (t_f + t_b) without communication */
    double bubble_s, bubble_share; /* the schedule's idle; bubble / (ideal + bubble) */
    double optimizer_s;
    double tp_comm_s, pp_comm_s, dp_comm_s, dp_exposed_s; /* per axis */
    double tp_bytes, pp_bytes, dp_bytes;
    int tp_cross, pp_cross, dp_cross; /* the axis's groups span hosts (1/0) */
    double model_state_bytes, activation_bytes, memory_bytes; /* the largest rank's:
                                 * activation_bytes all besides the model state */
    struct sb_memory_entry ledger; /* the largest rank's ledger entry by category
                                 * (sb_layout_memory); all zeros for the scaled estimate */
    int first_layer[64];        /* stage s holds layers [first_layer[s], first_layer[s+1]) */
    double ranks_computing;     /* with shared cores: the ranks taken to compute at once,
                                 * whose count sets each one's share of a core (0: no
                                 * shared cores) */
    double cores_s;             /* with shared cores: every rank's compute of a step at a
                                 * whole core over the C cores; step_s is at least data +
                                 * this + optimizer, a pipeline's + its exposed dp sync
                                 * too (0: no shared cores) */
};

#define SB_LAYOUT_MAX_STAGES 63

/* Checks layout l against the model and the hosts: dp tp pp = hosts x R
 * (world_size, given by the caller), tp dividing every split width, the
 * stages' uniform cuts (sb_split_range's: the first n % (p v) virtual stages
 * one layer more) not separating a column-parallel layer from its
 * row-parallel partner when tp > 1, the schedule valid (sb_pp_validate),
 * m dividing the batch of a replica, zero stages 2-3 refused with pp > 1
 * (docs/layouts.md: they would reduce-scatter the gradients once per
 * micro-batch). Errors: SB_ERR_USAGE with one line saying why. */
sb_status sb_layout_check(const struct sb_layout *l, const struct sb_layout_inputs *in,
                          int world_size);

/* Predicts layout l (checked by sb_layout_check) into *out (formulas at the
 * top of this file). Errors: those of sb_layout_check; SB_ERR_INPUT when a
 * dp_sync strategy has no cost model. */
sb_status sb_layout_predict(const struct sb_layout *l, const struct sb_layout_inputs *in,
                            int world_size, struct sb_layout_prediction *out);

/* The bytes of the tp collectives one micro-batch of b samples runs on a
 * stage holding layers [first, end): 4 b (sum of tp_row x out_floats)
 * forward and 4 b (sum of tp_column x in_floats) backward, the model's
 * first layer (layer 0) left out backward: it computes no input gradient,
 * so it has no all-reduce of one (workloads/dense.c) (Shoeybi et al.
 * 2019: two all-reduces of b s h forward and two backward per transformer
 * block, one each per column/row pair of the mlp). */
void sb_layout_tp_bytes(const struct sb_layout_inputs *in, int first, int end, double b,
                        double *forward_bytes, double *backward_bytes);

/* "dp2-tp2-pp2-m4-1f1b-z1-tp-dp-pp" style name of a layout (interleaved adds
 * "-v2"), into buf. */
void sb_layout_name(const struct sb_layout *l, char *buf, size_t size);

#endif
