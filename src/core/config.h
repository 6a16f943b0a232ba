/* The resolved configuration of one training run.
 *
 * Filled by the CLI (src/cli/train_opts.c) with defaults, then flags, then
 * validated; read-only afterwards. Every field appears in the report's
 * "config" object, so adding a field means adding it to the report too
 * (src/report/report.c). */
#ifndef SB_CONFIG_H
#define SB_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define SB_MAX_HIDDEN 8
#define SB_NAME_MAX 32
/* Room for one strategy's own options (strategies/strategy.h). */
#define SB_STRATEGY_OPTS_BYTES 128

/* The registries' entries the CLI resolves the names below to (declared,
 * not included: core includes nothing from the layers above it). */
struct sb_strategy_ops;
struct sb_backend_ops;
struct sb_comm_entry;

enum sb_lr_scaling { SB_LR_SCALING_NONE = 0, SB_LR_SCALING_LINEAR };

/* --optimizer: SGD with momentum (PyTorch's form) or Adam (Kingma & Ba
 * 2015, PyTorch's defaults). Optimizer state per parameter: 1 float, 2. */
enum sb_optimizer_kind { SB_OPTIMIZER_SGD = 0, SB_OPTIMIZER_ADAM };

/* --lr-schedule: the lr held constant, or decayed from the effective lr to
 * 0 over the run by a half cosine (Loshchilov & Hutter 2017, SGDR, without
 * restarts; the DeiT / timm recipe). Both after --lr-warmup-steps of linear
 * warm-up (Goyal et al. 2017). */
enum sb_lr_schedule { SB_LR_SCHEDULE_CONSTANT = 0, SB_LR_SCHEDULE_COSINE };

/* Default learning rates: SGD's (chosen for this suite, docs/design.md)
 * and Adam's (PyTorch's torch.optim.Adam default), used when --lr is not
 * given. */
/* --precision: the format of the parameters, activations and gradients
 * forward and backward compute with (fp32 master weights and optimizer
 * state in every case; strategies/shared/precision.h, docs/precision.md). */
enum sb_precision { SB_PRECISION_FP32 = 0, SB_PRECISION_BF16, SB_PRECISION_FP16 };

#define SB_LR_DEFAULT_SGD 0.03
#define SB_LR_DEFAULT_ADAM 0.001

struct sb_config {
    char strategy[SB_NAME_MAX];  /* a name in strategies/registry.c */
    char workload[SB_NAME_MAX];  /* a name in workloads/registry.c: mlp | cnn | vit */
    char device[SB_NAME_MAX];    /* a name in src/backend/registry.c: cpu | cuda */
    char comm[SB_NAME_MAX];      /* --comm, a name in src/comm/factory.c: on cuda nccl |
                                  * mpi (host-staged), for ranks and replica threads alike;
                                  * on cpu ranks use mpi and replica threads local */
    int hidden[SB_MAX_HIDDEN];   /* hidden layer widths of the mlp */
    int n_hidden;
    struct sb_vit_config {       /* the vit workload's architecture (workloads/vit.c) */
        int patch;               /* --patch: side of a square patch in pixels, divides 28 */
        int width;               /* --width: embedding width, divisible by heads */
        int depth;               /* --depth: transformer blocks */
        int heads;               /* --heads: attention heads per block */
        int mlp_ratio;           /* --mlp-ratio: MLP hidden width = mlp_ratio * width */
    } vit;
    int replicas;                /* data-parallel replicas (workers) */
    int epochs;
    int batch;                   /* per-replica batch; global = replicas * batch */
    double lr;                   /* base learning rate (before --lr-scaling) */
    double momentum;             /* SGD only */
    enum sb_optimizer_kind optimizer; /* --optimizer sgd | adam */
    enum sb_lr_scaling lr_scaling; /* linear: lr * replicas (Goyal et al. 2017) */
    enum sb_lr_schedule lr_schedule; /* --lr-schedule constant | cosine */
    long lr_warmup_steps;        /* --lr-warmup-steps: optimizer steps of linear lr warm-up */
    long run_steps;              /* resolved once the data is loaded (the CLI): the run's
                                  * optimizer steps, min(--max-steps, epochs x steps per
                                  * epoch), where a cosine schedule reaches 0; 0 = unknown
                                  * (the cosine then holds the lr) */
    uint64_t seed;
    char data_dir[PATH_MAX];     /* resolved: --data, $STRATBENCH_DATA, ./data/mnist */
    char report_path[PATH_MAX];  /* "" = no report */
    char save_params_path[PATH_MAX]; /* "" = do not save */
    double target_accuracy;      /* fraction in (0, 1]; for time to accuracy */
    long max_steps;              /* 0 = no limit */
    int warmup_steps;            /* steps excluded from step statistics */
    int threads;                 /* compute threads per process; 0 = auto */
    int eval_batch;              /* test images per forward pass in evaluation */
    int eval_samples;            /* --eval-samples: each evaluation scores the first N
                                  * test images (0 = all); once the data is read, the
                                  * count scored (sb_train_limit_eval) */
    char allreduce[SB_NAME_MAX]; /* MPI ranks on cpu: --allreduce auto | ring |
                                  * recursive-doubling | mpi | hierarchical
                                  * (src/comm/allreduce_algo.h) */
    int ranks_per_host;          /* --ranks-per-host: hosts of L consecutive ranks for the
                                  * hierarchical all-reduce; 0 = ranks sharing memory */
    int probe_links;             /* MPI jobs: measure the links' α and B at start (1) */
    char wait[SB_NAME_MAX];      /* --wait auto | spin | sleep: how a rank waits for its
                                  * messages (src/comm/wait_policy.h) */
    char trace_path[PATH_MAX];   /* "" = no Chrome trace */
    int cuda_graph;              /* --cuda-graph: single on cuda replays its step as a CUDA graph */
    long check_every;            /* replica consistency check every N steps; 0 = at the end only */
    /* The strategy's own flags (e.g. central's --servers), laid out as the
     * strategy's options struct; read through its option table
     * (strategies/strategy.h), never by the layers below strategies/. */
    _Alignas(double) unsigned char strategy_opts[SB_STRATEGY_OPTS_BYTES];
    char mllog_path[PATH_MAX];   /* "" = no :::MLLOG file (report/mllog.h) */
    char mllog_benchmark[SB_NAME_MAX]; /* --mllog-benchmark: submission_benchmark; "" =
                                        * mnist_<workload> */
    int clear_cache;             /* --clear-cache: drop the page cache before the run */
    double timeout_s;            /* watchdog: an exchange not complete this many
                                  * seconds after issue ends the job; 0 = off */
    /* strategy, device and comm resolved once by the CLI to their registry
     * entries (strategies/registry.c, src/backend/registry.c,
     * src/comm/factory.c): the layers above ask the entry, never compare the
     * name. NULL until validated. */
    const struct sb_strategy_ops *strategy_ops;
    const struct sb_backend_ops *backend;
    const struct sb_comm_entry *comm_entry;
    /* Cheaper gradient synchronisation (strategies/shared/grad_sync.h; strategies
     * whose ops set grad_sync): */
    char grad_compression[SB_NAME_MAX]; /* --grad-compression none | fp16 | bf16 | powersgd */
    int powersgd_rank;           /* --powersgd-rank r: rank of PowerSGD's factors (2) */
    long powersgd_start;         /* --powersgd-start N: plain all-reduce for the first N steps */
    int local_sgd;               /* --local-sgd H: average the models every H steps; 0 = off */
    long local_sgd_warmup;       /* --local-sgd-warmup N: synchronous steps before local SGD */
    enum sb_precision precision; /* --precision fp32 | bf16 | fp16 */
};

/* "fp32", "bf16" or "fp16". */
const char *sb_precision_name(enum sb_precision p);

/* The precision named `name` into *out; returns 0 for an unknown name. */
int sb_precision_parse(const char *name, enum sb_precision *out);

/* Whether the gradients of a run cross the wire as 16-bit values, and in
 * which format (*fmt, an enum sb_half_format of core/half.h): with
 * --grad-compression fp16|bf16, or with --precision bf16|fp16 (the
 * gradient is already 16-bit: its all-reduce or reduce-scatter moves 2
 * bytes per element). 0: an fp32 wire. */
int sb_config_grad_wire16(const struct sb_config *cfg, int *fmt);

/* Learning rate actually used by the optimizer: lr, times replicas under
 * --lr-scaling linear (the linear scaling rule, Goyal et al. 2017,
 * "Accurate, Large Minibatch SGD"). */
double sb_config_effective_lr(const struct sb_config *cfg);

/* "constant" or "cosine". */
const char *sb_lr_schedule_name(enum sb_lr_schedule s);

/* "sgd" or "adam". */
const char *sb_optimizer_name(enum sb_optimizer_kind o);

/* Global batch: replicas * per-replica batch (samples per optimizer step). */
int sb_config_global_batch(const struct sb_config *cfg);

/* Room for any name sb_method_name writes: a compression of up to
 * SB_NAME_MAX - 1 characters and "-r" with a rank, or "local-sgd-" and
 * an int, and the NUL. */
#define SB_METHOD_NAME_MAX (SB_NAME_MAX + 16)

/* The name of a gradient method, as sweep's file names, compare's labels and
 * predict's rows spell it, from the fields grad_compression, powersgd_rank
 * and local_sgd: `compression` when it is not "none" (NULL counts as
 * "none"), with "-r<rank>" after "powersgd" when powersgd_rank > 0
 * ("bf16", "fp16", "powersgd-r2"; "powersgd" for rank 0, the rank left to
 * train's default); else "local-sgd-<H>" when local_sgd H > 0
 * ("local-sgd-16"); else "none" (plain gradients). A compression names the
 * method even with local_sgd > 0 (train takes one of the two). Writes at
 * most `size` bytes into out, NUL-terminated (cut short when size is
 * smaller than the name; SB_METHOD_NAME_MAX always holds it). Returns out. */
char *sb_method_name(const char *compression, int powersgd_rank, int local_sgd, char *out,
                     size_t size);

#endif
