/* The strategy interface: how replicas are placed and kept in sync.
 *
 * A strategy owns its replicas (model, optimizer state, batch buffers) and
 * its communicators. The harness drives it step by step and never knows
 * which strategy it runs; strategies reach models only through
 * workloads/workload.h and other replicas only through src/comm. A new
 * strategy is one file plus one line in strategies/registry.c. */
#ifndef SB_STRATEGY_H
#define SB_STRATEGY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/placement.h"
#include "comm/comm.h"
#include "comm/cost_model.h"
#include "core/config.h"
#include "core/details.h"
#include "core/memory.h"
#include "core/phase.h"
#include "core/status.h"
#include "data/mnist.h"
#include "job/job.h"
#include "workloads/workload.h"

struct sb_layout; /* layout_model.h, included at the end */

/* What one process did in one step. */
struct sb_step_result {
    double phase_ms[SB_PHASE_COUNT]; /* this process's (replica 0's) phases */
    double loss_sum;                 /* sum of per-sample losses computed here */
    long samples;                    /* samples computed here */
    /* The host path's forward and backward calls of replica 0 (replica_host.c):
     * their wall time and the CPU time its thread used in them, s (0, 0: not
     * measured: a device path, or a strategy that times its passes itself).
     * cpu / wall is the share of a core the replica's compute had
     * (layout_model.h's shared cores: the probe's own share). */
    double compute_wall_s, compute_cpu_s;
    /* Set by the after_step op (0 without one): how long after this rank's
     * own end the job's step ended (the last rank's end, learned in the
     * op's exchange), ms. Step time, not measurement: the harness adds it
     * to this rank's step and to its wait phase (idle at a synchronisation
     * point for the slowest rank), so that the phases still add up to the
     * step, and keeps it in the epoch's time. */
    double end_wait_ms;
};

/* What the harness gives a strategy; valid for the strategy's lifetime. */
struct sb_strategy_env {
    const struct sb_config *cfg;
    const struct sb_mnist *data;
    const struct sb_backend_ops *be;
    const struct sb_workload_ops *workload;
    /* Where this process's replicas run (backend/placement.h), decided by
     * the harness before init: the one placement of the job. */
    const struct sb_placement *placement;
    const struct sb_job *job; /* the MPI job (job/job.h), NULL without MPI */
};

/* A flag that belongs to one strategy (e.g. central's --servers). Its value
 * lives in the strategy's own options struct, stored in cfg->strategy_opts
 * (SB_STRATEGY_OPTS_BYTES); the CLI parses it from this table, the usage
 * text lists it, and the report's "config" writes it under report_key (at
 * its default when another strategy runs, so every report has the same
 * keys). */
enum sb_option_kind {
    SB_OPTION_INT,    /* int field, "--flag N" */
    SB_OPTION_NUMBER, /* double field, "--flag X" */
    SB_OPTION_SWITCH, /* int field set to `set` by "--flag" (no value) */
    SB_OPTION_CHOICE, /* int field, "--flag NAME": the index of NAME in `choices` */
};
struct sb_strategy_option {
    const char *flag;       /* long name without "--"; NULL ends a table */
    const char *metavar;    /* value name in the usage text ("K"); NULL for a switch */
    enum sb_option_kind kind;
    size_t offset;          /* offsetof the field in the options struct */
    double lo, hi;          /* accepted range (INT, NUMBER) */
    double def;             /* default (a switch: the value without the flag) */
    double set;             /* SWITCH: the value the flag stores */
    const char *report_key; /* key in the report's config object; NULL: not
                             * written there (state it in describe instead) */
    int report_bool;        /* written as true/false */
    const char *help;       /* one line of usage text */
    const char *const *choices; /* CHOICE: the names, NULL-terminated (lo, hi unused;
                                 * def is an index; report_key must be NULL) */
};

/* What a strategy's comm_model op (below) is asked. */
struct sb_comm_model_query {
    struct sb_link link; /* every link's α and B (the probed one, or given) */
    int replicas;        /* n: replicas that train */
    double bytes;        /* M: parameter (= gradient) bytes of the model */
    double backward_s;   /* one backward pass, s (the window an overlap hides comm in) */
    /* The run's configuration: predict the variant the run ran (its own
     * options, --allreduce), one row; `details` is what its describe
     * stated (e.g. ddp's bucket plan). NULL: every variant worth comparing
     * (stratbench predict), from the two fields below. */
    const struct sb_config *cfg;
    const struct sb_strategy_details *details;
    const double *bucket_bytes; /* cfg NULL: the measured run's gradient buckets (launch
                                 * order, summing to bytes), or NULL: the strategy's default */
    int n_buckets;
    int overlap;                /* cfg NULL: the measured run overlapped backward (1/0) */
    int layers;                 /* cfg NULL: the model's layers (zero stage 3's units),
                                 * 0: not known */
    /* cfg NULL, for a strategy that splits the model (pipeline): the
     * measured run's compute per step of one replica (s), its batch per
     * replica, and the bytes per sample of an activation at a cut between
     * two layers (the mean over the model's cuts); 0: not known. */
    double compute_s;
    int batch;
    double boundary_bytes;
};

struct sb_replica;

#define SB_STRATEGY_COMMS_MAX 4

struct sb_strategy {
    const struct sb_strategy_ops *ops;
    const struct sb_strategy_env *env;
    void *impl;
    /* Set by init, used by the shared defaults (strategies/shared/common.c) for
     * the ops a strategy leaves NULL: */
    struct sb_replica *replica; /* this process's (first) replica */
    /* The communicators the report counts, summed (comms[0]'s size is the
     * ranks of the report's busbw factors); n_comms = 0: none. */
    struct sb_comm *comms[SB_STRATEGY_COMMS_MAX];
    int n_comms;
    /* The communicator across this job's processes, for sums of metrics
     * (sb_strategy_reduce_sum); NULL: one process (mirrored, single),
     * whose step results already cover every replica. */
    struct sb_comm *world;
};

struct sb_strategy_ops {
    const char *name;
    const char *summary;  /* one line for --help */
    int uses_mpi;         /* one process per replica (and server), via mpirun */
    int max_replicas;     /* 0 = any; 1 for a strategy of one replica */
    int baseline;         /* the reference of speedup and efficiency (sweep) */
    int cuda_graph;       /* --cuda-graph: can replay its step as a CUDA graph */
    /* The all-reduce algorithm this entry runs (the CLI sets --allreduce
     * to it and refuses another); SB_ALLREDUCE_AUTO: --allreduce's. */
    enum sb_allreduce_algo allreduce;
    int grad_sync;        /* takes --grad-compression and --local-sgd
                           * (strategies/shared/grad_sync.h) */
    int predict_methods;  /* predict models the gradient methods on its rows: its
                           * comm_model's rows all-reduce the gradient buckets
                           * (src/cli/predict.c, docs/cost-model.md) */
    /* Its own flags (NULL-terminated; NULL = none) and the size of the
     * options struct they fill (at most SB_STRATEGY_OPTS_BYTES). */
    const struct sb_strategy_option *options;
    size_t options_size;
    /* Keys the strategy may add to the report's "comm" object (NULL-
     * terminated, or NULL); written as null in other strategies' reports. */
    const char *const *comm_keys;
    /* 1 when the strategy measures its own wait and bubble phases (a
     * pipeline, whose stages idle for each other by design: that is its
     * bubble, not a straggler's wait); the harness then keeps what its
     * steps reported. 0: the harness derives every rank's wait from the
     * ranks' compute times (sb_rank_timings_fill_wait) and the bubble is
     * what the strategy reported (0). */
    int owns_wait;
    /* The replicas <-> world mapping (sb_strategy_world_size and
     * sb_strategy_replicas_of_world call these or their defaults).
     * world_size: the processes the strategy needs for cfg (optional;
     * NULL: cfg->replicas if uses_mpi, else 1); e.g. replicas + servers
     * (central), replicas x stages (a pipeline: --replicas D --stages P
     * needs D*P ranks). replicas_of_world: the replica count that makes
     * world_size(cfg) equal `world` with cfg's other flags, or 0 when none
     * does (optional; NULL: `world` if uses_mpi, else cfg->replicas). The
     * two must round-trip: replicas_of_world(cfg, world_size(cfg)) ==
     * cfg->replicas (tests/unit/test_strategy_world.c). */
    int (*world_size)(const struct sb_config *cfg);
    int (*replicas_of_world)(const struct sb_config *cfg, int world);
    /* Optional: checks the combination of cfg's values that only this
     * strategy knows (e.g. --async on cuda needs --comm mpi). Errors:
     * SB_ERR_USAGE with one line naming the flag. */
    sb_status (*validate)(const struct sb_config *cfg);
    /* Creates replicas and communicators and makes every replica hold rank
     * 0's initial parameters (a broadcast where replicas are separate). */
    sb_status (*init)(struct sb_strategy *s);
    /* One synchronous step on the global batch `global_idx`
     * (replicas * batch training-set indices; replica r takes slice r):
     * forward, backward, synchronise, update. Fills `out` for this
     * process. */
    sb_status (*step)(struct sb_strategy *s, long step, const int32_t *global_idx,
                      struct sb_step_result *out);
    /* Optional (NULL: nothing to do): the strategy's own measurement of the
     * step just ended, where it needs collectives that the training does
     * not (a pipeline's: when each sender posted its messages, and the
     * stages' timings summed over the world). The harness calls it after
     * every step, outside the step's timed span and the epoch's training
     * time (as the consistency check), before it records `out`, which the
     * op may still correct (e.g. a receive's wait moved from bubble to
     * point-to-point) and whose end_wait_ms it sets where the job's step
     * ended after this rank's (that part of the op's time is step time).
     * Collective over the ranks that stepped. Errors: the communicator's
     * (SB_ERR_COMM). */
    sb_status (*after_step)(struct sb_strategy *s, long step, struct sb_step_result *out);
    /* Test accuracy (0..1) of the current parameters over the whole test
     * set; valid on world rank 0 (other ranks may return anything). */
    sb_status (*evaluate)(struct sb_strategy *s, double *accuracy);
    /* Optional (NULL: s->replica's parameters): copies the current
     * parameters (n_params floats, layout order) to host memory at any
     * point between steps, for strategies whose parameters live elsewhere
     * (central: on its servers). Collective: every process calls it;
     * `host` is valid on world rank 0. */
    sb_status (*read_params)(struct sb_strategy *s, float *host);
    /* Optional (NULL: dp = --replicas, tp = pp = 1, one micro-batch, no
     * schedule, zero stage 0, Megatron-LM's rank order). The run's layout
     * (struct sb_layout, layout_model.h: dp x tp x pp, micro-batches,
     * schedule, chunks, zero stage, rank order) from its configuration, the
     * defaults of its flags applied (interleaved's 2 chunks when --chunks is
     * not given): the report's `layout`. `out` arrives holding the NULL
     * op's values. Pure: no strategy instance is needed. */
    void (*layout)(const struct sb_config *cfg, struct sb_layout *out);
    /* Optional (NULL: none): the largest point-to-point message one rank
     * of cfg's run sends or receives, in bytes (a pipeline's boundary
     * activation or gradient of one micro-batch), from the configuration
     * alone, before MPI_Init: Open MPI's TCP eager limit is chosen from it
     * (job/launcher.h). Collectives do not count. Errors: the workload's
     * (building its layer table), SB_ERR_USAGE as validate. */
    sb_status (*p2p_max_bytes)(const struct sb_config *cfg, size_t *bytes);
    /* Optional (may be NULL): adds what the strategy states about itself
     * (e.g. ddp's bucket count and sizes, central's staleness, central's
     * server link bytes per step into d's comm section) to `d`.
     * measured_steps: the steps after warm-up, over which the
     * communicator counters ran since the harness last reset them. */
    void (*describe)(const struct sb_strategy *s, long measured_steps,
                     struct sb_strategy_details *d);
    /* Optional (may be NULL): zeroes counters the strategy keeps beside its
     * communicators' (e.g. ddp's gradient-compression hook: logical bytes
     * per step), when the harness resets the communicators' at the end of
     * warm-up (sb_strategy_reset_comm_counters). */
    void (*reset_counters)(struct sb_strategy *s);
    /* Optional (may be NULL: no consistency check): sets *n to the number
     * of replicas this process holds whose parameters must agree with
     * every other replica's at a step boundary (0 for a server-only rank,
     * or where they may differ by design, e.g. central --async), and
     * returns replica i's parameter buffer (n_params floats, backend
     * memory), NULL when i >= *n. For the check of harness/consistency.h. */
    float *(*replica_params)(struct sb_strategy *s, int i, int *n);
    /* Optional (NULL: 0 on every rank, so the whole world is one group):
     * this process's consistency group. Ranks that return the same value
     * hold the same part of the model (e.g. a pipeline stage) and the
     * check compares their replicas with each other only (the dp group:
     * the colour its dp communicator was split with); every replica of a
     * process belongs to the process's group. Values >= 0. */
    int (*consistency_group)(const struct sb_strategy *s);
    /* Optional (NULL: s->replica's model's n_params): the parameters of the
     * whole model (the report's model.n_params, --save-params' size), for a
     * strategy whose ranks hold parts of it. */
    size_t (*model_n_params)(const struct sb_strategy *s);
    /* Optional (NULL: the report's comm.model is null and stratbench
     * predict has no rows for it): the α–β prediction of its communication
     * per step (src/comm/cost_model.h). With q->cfg, the variant the run
     * ran (one row, for the report's comm.model); without, every variant
     * worth comparing (stratbench predict's rows at q->replicas). Fills
     * rows[0..cap) and returns how many it filled. Pure: no strategy
     * instance is needed. */
    int (*comm_model)(const struct sb_comm_model_query *q, struct sb_comm_model_row *rows,
                      int cap);
    /* Optional (NULL: every rank holds a full replica: parameters and
     * gradients 4Ψ bytes each, optimizer state 4sΨ, s =
     * sb_optimizer_state_floats). The model-state bytes of one rank for
     * Ψ = n_params parameters, in the ZeRO paper's accounting for fp32
     * training (Rajbhandari et al., SC 2020, sections 3.1 and 5; docs/zero.md):
     * `server` 0 for a replica or worker, 1 for a server rank. Pure:
     * callable before anything is allocated. */
    void (*model_state_formula)(const struct sb_config *cfg, double n_params, int server,
                                struct sb_model_state *out);
    /* Optional (NULL: one "replica" entry for s->replica: its parameters,
     * gradients, optimizer state, no communication buffers, the
     * workload's activations). This process's memory ledger: fills out
     * [0, cap) with what it allocated per replica or server and the
     * formula beside it, returns the count. rank and the peaks are the
     * harness's to fill. */
    int (*memory)(const struct sb_strategy *s, struct sb_memory_entry *out, int cap);
    /* Optional (NULL: "rank N" for every rank): the trace track's name of
     * world rank `rank` (e.g. central's "server"), or NULL for the default. */
    const char *(*trace_label)(const struct sb_config *cfg, int rank);
    /* Optional (NULL: s->replica's scaler): this process's fp16 loss scale
     * S and the steps (or pushes) its scaler skipped, for the report's
     * precision section, where one replica's scaler does not say it (e.g.
     * central --async's servers, which drive one scaler per worker). */
    void (*precision_state)(const struct sb_strategy *s, double *loss_scale, long *skipped);
    void (*destroy)(struct sb_strategy *s);
};

/* The strategy registered under `name`, or NULL. */
const struct sb_strategy_ops *sb_strategy_find(const char *name);

/* Names of all strategies joined by `sep` (", " or " | "), for usage
 * texts and errors; a static buffer, valid until the next call. */
const char *sb_strategy_names_joined(const char *sep);

/* Comma-separated names of all strategies: sb_strategy_names_joined(", "). */
const char *sb_strategy_names(void);

/* Number of registered strategies and the i-th (for --help listings). */
int sb_strategy_count(void);
const struct sb_strategy_ops *sb_strategy_at(int i);

/* --- calls the harness makes (strategies/shared/common.c): the op, or the
 * shared default where the strategy leaves it NULL --- */

/* The job's placement for this process (backend/placement.h), asked once
 * by the harness before init and handed to the strategy as
 * env->placement: the replicas this process runs (1 for a strategy whose
 * ranks each run one, uses_mpi; cfg->replicas threads otherwise), the
 * backend's memory, the communicator's GPU-per-member need, the visible
 * GPUs and where this process sits on its host. Errors: those of
 * sb_placement_decide; free *out with sb_placement_free. */
sb_status sb_strategy_place(const struct sb_strategy_ops *ops, const struct sb_config *cfg,
                            int local_rank, int local_size, struct sb_placement *out);

/* Number of parameters of the whole model: the model_n_params op, else
 * s->replica's (every rank holds the whole model). */
size_t sb_strategy_n_params(const struct sb_strategy *s);

/* The layer table of the whole model (the report's model.layers) into
 * out[0, cap), from s->replica's model when it holds the whole model (every
 * layer, no tp shard); returns how many, 0 when this rank holds a part. */
int sb_strategy_layer_summaries(const struct sb_strategy *s, struct sb_layer_summary *out,
                                int cap);
/* Number of parameters this process's replicas hold (s->replica's model:
 * the whole model, or the part a rank of a model-parallel strategy
 * holds). */
size_t sb_strategy_local_n_params(const struct sb_strategy *s);
/* This process's consistency group (the consistency_group op, else 0). */
int sb_strategy_consistency_group(const struct sb_strategy *s);

/* The largest point-to-point message of cfg's run in bytes (ops'
 * p2p_max_bytes op; 0 without one). Errors: the op's. */
sb_status sb_strategy_p2p_max_bytes(const struct sb_strategy_ops *ops,
                                    const struct sb_config *cfg, size_t *bytes);

/* The processes ops needs for cfg (its world_size op, or the default:
 * cfg->replicas if uses_mpi, else 1). */
int sb_strategy_world_size(const struct sb_strategy_ops *ops, const struct sb_config *cfg);
/* The replicas a world of `world` processes holds under cfg's other flags
 * (its replicas_of_world op, or the default: `world` if uses_mpi, else
 * cfg->replicas); 0 when no replica count fits. */
int sb_strategy_replicas_of_world(const struct sb_strategy_ops *ops, const struct sb_config *cfg,
                                  int world);
/* The strategy's after_step op on the step just ended (SB_OK without
 * one); the harness calls it outside the step's time. Errors: the op's. */
sb_status sb_strategy_after_step(struct sb_strategy *s, long step, struct sb_step_result *out);
/* vals (n) = sum over the job's processes (over s->world; as they are
 * without one). Errors: the communicator's. */
sb_status sb_strategy_reduce_sum(struct sb_strategy *s, double *vals, int n);
/* Copies the current parameters (n_params floats, layout order) into `host`
 * (host memory of n_params floats): the strategy's read_params op where it
 * has one (collective: every process calls it; `host` valid on world rank
 * 0), else its replica's parameters downloaded from the backend. Errors:
 * the op's (SB_ERR_COMM), the backend's download (SB_ERR_DEVICE). */
sb_status sb_strategy_read_params(struct sb_strategy *s, float *host);
/* This process's communication since the last reset, summed over
 * s->comms: per kind (out), by all-reduce algorithm (by_algo, with each
 * algorithm's report name in names, NULL where it never ran) and the
 * stages of multi-stage algorithms (stages, *n_stages); *ranks = comms[0]'s
 * size (1 without communicators). Any output may be NULL. */
void sb_strategy_comm_counters(const struct sb_strategy *s,
                               struct sb_comm_counter out[SB_COMM_NKINDS], int *ranks);
/* The same counters per communicator role (s->comms[i]->role): out[role]
 * sums that role's communicators, its ranks the first one's size (0: no
 * communicator of that role). The report's comm.by_role. */
void sb_strategy_comm_by_role(const struct sb_strategy *s,
                              struct sb_comm_role_totals out[SB_COMM_NROLES]);
void sb_strategy_comm_algorithms(const struct sb_strategy *s,
                                 struct sb_comm_counter by_algo[SB_ALLREDUCE_NALGOS],
                                 const char *names[SB_ALLREDUCE_NALGOS],
                                 struct sb_comm_stage stages[SB_COMM_STAGES_MAX], int *n_stages);
/* Zeroes the counters of every communicator in s->comms (the end of
 * warm-up). */
void sb_strategy_reset_comm_counters(struct sb_strategy *s);

/* The model-state bytes of one rank of ops for cfg and Ψ = n_params, by
 * its model_state_formula (or the full-replica default); server as
 * there. */
void sb_strategy_model_state_formula(const struct sb_strategy_ops *ops,
                                     const struct sb_config *cfg, double n_params, int server,
                                     struct sb_model_state *out);

/* The largest model-state bytes any rank of ops holds for cfg and
 * Ψ = n_params (the worker's, or a server's where the strategy has
 * server ranks), from the formula alone: for a check before allocation
 * (e.g. whether a model fits a device). */
double sb_strategy_model_state_bytes(const struct sb_strategy_ops *ops,
                                     const struct sb_config *cfg, double n_params);

/* --precision's state at the end (the op, or from this process's replica,
 * s->replica, the one whose scaler decides): fp16's loss scale S
 * (*loss_scale; 1 under fp32 and bf16) and the steps skipped for inf/NaN
 * (*skipped). 1 and 0 without a replica. */
void sb_strategy_precision_state(const struct sb_strategy *s, double *loss_scale, long *skipped);

/* This process's memory ledger (the op, or the default): at most cap
 * entries into out, returns the count. */
int sb_strategy_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap);

/* A ledger entry for replica r (its model, optimizer state and
 * activations, no communication buffers) with the formula of ops for
 * `server` 0, in role "replica"; strategies build theirs from it. */
void sb_memory_entry_of_replica(const struct sb_strategy *s, const struct sb_replica *r,
                                int replica, struct sb_memory_entry *out);

/* --- the strategies' own flags (strategies/shared/options.c) --- */

/* The value of option `o` in cfg's strategy options. */
double sb_strategy_option_get(const struct sb_config *cfg, const struct sb_strategy_option *o);

/* Sets every option of `ops` in cfg->strategy_opts to its default (zeroes
 * the rest). */
void sb_strategy_options_defaults(const struct sb_strategy_ops *ops, struct sb_config *cfg);

/* Parses "--flag arg" (arg NULL for a switch) for the option of `ops`
 * named `flag`. Errors: SB_ERR_USAGE naming the flag: a value out of range,
 * or a flag that `ops` does not take (naming the strategies that do). */
sb_status sb_strategy_option_parse(const struct sb_strategy_ops *ops, struct sb_config *cfg,
                                   const char *flag, const char *arg);

/* Whether the command-line word `arg` ("--flag" or "--flag=value", the
 * flag spelled out) is a registered strategy's own flag that `ops` does
 * not take; *value_follows = 1 when its value is the next word (an option
 * with a value, given without "="). Lets sweep run its baseline (single)
 * without the other strategies' flags. */
int sb_strategy_option_foreign(const struct sb_strategy_ops *ops, const char *arg,
                               int *value_follows);

/* Checks cfg for ops as a whole: replica count (max_replicas), the global
 * batch against the training set, then ops->validate. Errors:
 * SB_ERR_USAGE naming the flag. */
sb_status sb_strategy_check(const struct sb_strategy_ops *ops, const struct sb_config *cfg);

/* Under a launcher's MPI world of `world_size` processes: sets
 * cfg->replicas from the world (sb_strategy_replicas_of_world, unless
 * replicas_given) and checks that ops needs exactly that many processes
 * (sb_strategy_world_size), then sb_strategy_check. Errors: SB_ERR_USAGE
 * naming --replicas. */
sb_status sb_strategy_fit_world(const struct sb_strategy_ops *ops, struct sb_config *cfg,
                                int world_size, int replicas_given);

/* Adds every registered strategy's flags to d's config section (cfg's
 * value for the running strategy `ops`, the default for the others), and
 * null for every registered comm key that ops's describe did not set. */
void sb_strategy_report_values(const struct sb_strategy_ops *ops, const struct sb_config *cfg,
                               struct sb_strategy_details *d);

/* Writes the strategies' flags as usage lines ("  --servers K  0  central:
 * ..."), each flag once, naming the strategies that take it. */
void sb_strategy_options_usage(FILE *out);

/* PowerSGD's factor sizes for model m at rank `rank`, as ddp's hook plans
 * them (strategies/shared/powersgd.c; Vogels et al., NeurIPS 2019): *mn =
 * sum of m*n and *mnr = sum of (m + n)*rank over the matrices it compresses
 * (those with (m + n)*rank < m*n), in elements. For `stratbench predict`,
 * which sees the strategies through this interface only. Errors: those of
 * sb_powersgd_create (SB_ERR_NOMEM, SB_ERR_INPUT for rank < 1). */
sb_status sb_strategy_powersgd_factors(const struct sb_model *m, int rank, double *mn,
                                       double *mnr);

/* The layers of model m (*layers): the units zero stage 3's hook gathers
 * one at a time, the layers of its layer table (m->layers). For `stratbench
 * predict`, which sees the strategies through this interface only. Errors:
 * those of sb_bucket_plan_create (SB_ERR_INTERNAL for a broken layer table,
 * SB_ERR_NOMEM). */
sb_status sb_strategy_model_layers(const struct sb_model *m, int *layers);

/* `stratbench schedule`: validates a pipeline schedule's flags as the
 * pipeline strategy will (sb_pp_validate: the name "gpipe", "1f1b",
 * "interleaved" or "zb-h1", stages, micro-batches, chunks, 0 for not
 * given; any number of layers), builds and checks every rank's action list,
 * and writes to out its stage x slot grid in unit slots, the bubble
 * simulated beside its formula and, per stage, the activations alive at
 * once and the messages per step (strategies/shared/schedule_print.c).
 * Errors: SB_ERR_USAGE naming the flag, SB_ERR_INTERNAL for a list that
 * fails its check, SB_ERR_NOMEM, SB_ERR_IO. */
sb_status sb_strategy_print_schedule(const char *schedule, int stages, int microbatches,
                                     int chunks, FILE *out);

/* The layout model (dp x tp x pp; `stratbench predict --layouts`, the
 * report's layout): part of the interface that the layers above see. */
#include "strategies/shared/layout_model.h"

#endif
