/* What `stratbench predict`'s files share (predict.c reads the report and
 * the flags, predict_rows.c computes the rows, predict_output.c prints them):
 * the flags, the measured run, one predicted row. Private to src/cli/predict*.c. */
#ifndef SB_PREDICT_ROWS_H
#define SB_PREDICT_ROWS_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "comm/cost_model.h"
#include "core/config.h"
#include "strategies/strategy.h"

#define PREDICT_SCHEMA_VERSION "1.4"
#define MAX_COUNTS 64
#define SB_PREDICT_LAYERS_MAX 256
#define MAX_BUCKETS 64
/* Plausibility bounds on what a report says (a corrupt or hand-edited report
 * is refused, not extrapolated): a petabyte of parameters (2.5e14 fp32, far
 * above any model), a message latency of 10 s, 100 TB/s of link (above any
 * NVLink or NIC). */
#define MAX_PARAM_BYTES 1e15
#define MAX_ALPHA_S 10.0
#define MAX_BANDWIDTH_BPS 1e14
#define MAX_STRATEGIES 32     /* registered strategies predict looks at */
#define MAX_VARIANTS 8        /* rows one strategy gives per replica count */
#define MAX_ROWS_PER_COUNT 32 /* rows of all strategies per replica count */
#define SB_PREDICT_MAX_REPORTS 9 /* --layouts: runs of one probe predict chooses from */

struct opts {
    const char *report;          /* the report predicted from (with several: the median) */
    const char *reports[SB_PREDICT_MAX_REPORTS]; /* every REPORT given (several: --layouts) */
    int n_reports;
    double reports_compute_ms[SB_PREDICT_MAX_REPORTS]; /* several: each one's forward +
                                                        * backward a step, as priced */
    int counts[MAX_COUNTS];
    int n_counts;
    double bandwidth_Bps; /* 0 = the report's */
    double latency_s;     /* < 0 = the report's */
    const char *calibrate; /* --calibrate LAYERS: the link from two runs' steps */
    double device_memory_bytes; /* --device-memory; 0 = not given */
    double n_params;             /* --params N: memory per rank only, no report; 0 = not given */
    enum sb_precision precision; /* --params: --precision (fp32 unless given) */
    enum sb_optimizer_kind optimizer; /* --params: --optimizer (adam unless given) */
    int json;
    const char *out;
    int help;
    /* --layouts (predict_layouts.c): rank every dp x tp x pp layout of
     * hosts x ranks_per_host ranks */
    int layouts;
    int hosts, ranks_per_host;  /* 0: not given */
    double intra_bandwidth_Bps; /* 0 = the report's */
    double intra_latency_s;     /* < 0 = the report's */
    const char *links_from;     /* --links-from REPORT: its probed links (NULL: none) */
    int global_batch;           /* 0: the measured run's */
    int top;                    /* table rows (0: all); -1: not given */
    int shared_cores;           /* --shared-cores C: the cores all ranks share (the
                                 * one-machine cluster); 0: every rank has its own */
};

/* What predict takes from a report. */
struct run {
    char strategy[64];
    int replicas, batch, overlap;
    double bytes;                /* parameter bytes: M */
    double compute_ms;           /* data + h2d + forward + backward + optimizer */
    double step_ms;              /* step_ms.median (NaN when absent) */
    int plain;                   /* no --grad-compression, no local SGD */
    double backward_ms;
    double buckets[MAX_BUCKETS]; /* the run's gradient buckets, launch order (when its
                                  * strategy_details list them all) */
    int n_buckets;                /* 0: not listed */
    struct sb_link link;
    const char *link_kind;       /* link.source: "probe", "given" or "calibrated" */
    double alpha_probe_s;        /* comm.model.alpha_s (NaN when absent) */
    char workload[32];           /* config.workload and config.hidden: the model whose */
    int hidden[SB_MAX_HIDDEN], n_hidden;    /* matrices PowerSGD would compress */
    struct sb_vit_config vit;    /* config.transformer (zeros when absent) */
    int eval_batch;              /* config.eval_batch (0 when absent) */
    int sequence_parallel;       /* strategy_details.sequence_parallel: a tensor run's
                                  * --sequence-parallel (0 when absent) */
    enum sb_optimizer_kind optimizer; /* config.optimizer (sgd when absent) */
    enum sb_precision precision;      /* config.precision (fp32 when absent) */
    double activation_bytes;          /* memory.by_rank[0].activation_bytes (0 when absent) */
    /* what --layouts reads besides (NaN when absent) */
    double data_ms, forward_ms, optimizer_ms; /* data + h2d; forward; optimizer */
    int zero_stage;                   /* layout.zero_stage (strategy_details.zero_stage) */
    double core_share;                /* (1.16) the share of a core the run's compute had:
                                       * sum of noise_by_rank[].compute_cpu_s / sum of
                                       * compute_wall_s (NaN when a rank lacks them) */
    double cores_busy;                /* (1.15) sum of noise_by_rank[].cpu_s over
                                       * environment.wait_policy.cores x train_s when every
                                       * rank ran on one machine, else NaN */
    double fixed_fraction[2];         /* (1.16) of the forward, backward at the run's batch:
                                       * the part that does not grow with the batch, from
                                       * compute_probe (0 when absent or not fitted) */
    int probe_cross_host;             /* comm.model.probe_cross_host */
    int intra_probed;                 /* comm.model.links.intra given */
    struct sb_link intra;             /* comm.model.links.intra (1.14: its sizes, γ) */
    struct sb_link inter_sized;       /* (1.14) comm.model.links.inter's sizes and γ
                                       * (n_sizes 0: none) */
    double gamma_s_per_byte;          /* (1.14) comm.model.gamma_s_per_byte (0: absent) */
    struct sb_layer_summary layers[SB_PREDICT_LAYERS_MAX]; /* model.layers */
    int n_layers;                     /* 0: absent (predict builds the model) */
};

/* One predicted point. */
struct row {
    int replicas, servers;
    const char *strategy, *algorithm;
    char method[SB_METHOD_NAME_MAX]; /* the gradient method: "none", "fp16/bf16",
                                      * "powersgd-r2", ... (sb_method_name) */
    double comm_ms, exposed_ms, step_ms, samples_per_s, efficiency;
    double model_state_bytes; /* the ledger formula's, the largest rank's */
    double memory_bytes;      /* model state + the run's activations */
    int fits;                 /* memory_bytes <= --device-memory: 1, 0; -1 not asked */
};

/* A strategy's model line for the table's header. */
typedef char legend_line[sizeof(((struct sb_comm_model_row *)0)->legend)];

/* Rows (at most cap): per replica count of o, every variant of every
 * registered strategy that has a cost model, and the gradient methods'
 * rows (predict_rows.c). legends[i] gets registered strategy i's model
 * line. Returns the number of rows. */
int sb_predict_rows(const struct run *r, const struct opts *o, struct row *rows, int cap,
                    legend_line legends[MAX_STRATEGIES]);

/* `stratbench predict --params N`: prints (or with o->json, writes as
 * JSON; o->out also to a file) the model state per rank of ddp and zero
 * stages 1-3 at each of o's replica counts for Ψ = o->n_params in o's
 * precision and optimizer, by the strategies' ledger formulas
 * (predict_memory.c; the ZeRO paper's Table 1 for Ψ = 7.5e9, N = 64,
 * bf16, Adam). Returns the exit status: 0, or 1 when the output could not
 * be written. */
int sb_predict_memory(const struct opts *o);

/* --params: "7.5e9", "125000" -> *out, a parameter count in [1, 1e15].
 * Errors: SB_ERR_USAGE naming --params. */
sb_status sb_predict_parse_params(const char *text, double *out);

/* Prints the n rows as predict's table on stdout (predict_output.c). */
void sb_predict_print_table(const struct run *r, const struct opts *o, const struct row *rows,
                            int n, legend_line legends[MAX_STRATEGIES]);

/* The JSON document of the prediction (reports/README.md), or NULL when out
 * of memory; free with cJSON_Delete. */
cJSON *sb_predict_to_json(const struct run *r, const struct opts *o, const struct row *rows, int n);

/* The layer table of the report's model built from its configuration
 * (config.workload, config.hidden) on the cpu backend, for a report
 * without model.layers (before schema 1.12), into r->layers. Errors:
 * SB_ERR_INPUT for an unknown workload, those of building the model. */
sb_status sb_predict_build_layers(struct run *r);

/* obj.keys[0].keys[1]... (n keys) as a number, or NAN (predict.c). */
double sb_predict_num_path(const cJSON *o, const char *const *keys, int n);

/* The slowest rank's median of `phase` (phases_by_rank_ms.<phase>.max),
 * else rank 0's median (phases_ms.<phase>.median), or NAN (predict.c). */
double sb_predict_phase_ms(const cJSON *doc, const char *phase);

/* --layouts' usage lines (predict_layouts.c). */
void sb_predict_layouts_usage(FILE *out);

/* The flags of --layouts go together: --hosts and --ranks-per-host with it,
 * the intra-host link, --global-batch and --top only with it, and neither
 * --replicas (counts_given) nor --calibrate. SB_ERR_USAGE naming the flag. */
sb_status sb_predict_layouts_check_flags(const struct opts *o, int counts_given);

/* What --layouts reads from a report besides what load_run reads: the
 * phases apart, the measured zero stage (layout.zero_stage, else
 * strategy_details.zero_stage), the probe's link classes
 * (comm.model.links.intra), model.layers (n_layers 0 when absent or
 * corrupt: predict then builds the table from the configuration). */
void sb_predict_load_layout_inputs(const cJSON *doc, struct run *r);

/* The probed links of a report's comm.model (`model`, may be NULL) into r:
 * probe_cross_host, intra (links.intra with its 1.14 sized classes and γ),
 * inter_sized (links.inter's sized classes and γ) and gamma_s_per_byte;
 * what is absent or implausible is left 0 (no classes: one α, B). */
void sb_predict_load_links(const cJSON *model, struct run *r);

/* `stratbench predict REPORT --layouts ...` after the flags and the report
 * are read (predict_layouts.c): every layout that fits, ranked, printed or
 * written. Returns the exit status. */
int sb_predict_layouts_main(const struct opts *o, struct run *r);

#endif
