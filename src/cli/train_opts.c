/* `stratbench train` flags; see train_opts.h. */
#include "cli/train_opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "cli/outputs.h"
#include "cli/suggest.h"
#include "comm/allreduce_algo.h"
#include "core/page_cache.h"
#include "data/mnist.h"
#include "data/sampler.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

enum {
    OPT_STRATEGY = 256, OPT_WORKLOAD, OPT_DEVICE, OPT_HIDDEN, OPT_REPLICAS,
    OPT_EPOCHS, OPT_BATCH, OPT_LR, OPT_MOMENTUM, OPT_LR_SCALING, OPT_LR_SCHEDULE,
    OPT_LR_WARMUP_STEPS, OPT_SEED, OPT_DATA,
    OPT_REPORT, OPT_TARGET, OPT_MAX_STEPS, OPT_WARMUP, OPT_SAVE_PARAMS, OPT_THREADS,
    OPT_EVAL_BATCH, OPT_TRACE, OPT_COMM, OPT_ALLREDUCE, OPT_PROBE_LINKS, OPT_NO_PROBE_LINKS,
    OPT_CUDA_GRAPH, OPT_CHECK_EVERY, OPT_MLLOG, OPT_TIMEOUT, OPT_OPTIMIZER, OPT_RANKS_PER_HOST,
    OPT_GRAD_COMPRESSION, OPT_POWERSGD_RANK, OPT_POWERSGD_START, OPT_LOCAL_SGD,
    OPT_LOCAL_SGD_WARMUP, OPT_MLLOG_BENCHMARK, OPT_CLEAR_CACHE, OPT_PATCH, OPT_WIDTH, OPT_DEPTH,
    OPT_HEADS, OPT_MLP_RATIO,
    OPT_STRATEGY_FLAG = 512, /* + index into strategy_flags[] */
};

/* The flags every strategy shares; the strategies' own flags follow them in
 * the table getopt_long sees (built by all_options from the registry). */
static const struct option common_options[] = {
    {"strategy", required_argument, NULL, OPT_STRATEGY},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"comm", required_argument, NULL, OPT_COMM},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"patch", required_argument, NULL, OPT_PATCH},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"depth", required_argument, NULL, OPT_DEPTH},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"mlp-ratio", required_argument, NULL, OPT_MLP_RATIO},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"lr-scaling", required_argument, NULL, OPT_LR_SCALING},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"lr-warmup-steps", required_argument, NULL, OPT_LR_WARMUP_STEPS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"data", required_argument, NULL, OPT_DATA},
    {"report", required_argument, NULL, OPT_REPORT},
    {"target-accuracy", required_argument, NULL, OPT_TARGET},
    {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP},
    {"save-params", required_argument, NULL, OPT_SAVE_PARAMS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"eval-batch", required_argument, NULL, OPT_EVAL_BATCH},
    {"allreduce", required_argument, NULL, OPT_ALLREDUCE},
    {"ranks-per-host", required_argument, NULL, OPT_RANKS_PER_HOST},
    {"probe-links", no_argument, NULL, OPT_PROBE_LINKS},
    {"no-probe-links", no_argument, NULL, OPT_NO_PROBE_LINKS},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"cuda-graph", no_argument, NULL, OPT_CUDA_GRAPH},
    {"check-every", required_argument, NULL, OPT_CHECK_EVERY},
    {"mllog", required_argument, NULL, OPT_MLLOG},
    {"mllog-benchmark", required_argument, NULL, OPT_MLLOG_BENCHMARK},
    {"clear-cache", no_argument, NULL, OPT_CLEAR_CACHE},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"grad-compression", required_argument, NULL, OPT_GRAD_COMPRESSION},
    {"powersgd-rank", required_argument, NULL, OPT_POWERSGD_RANK},
    {"powersgd-start", required_argument, NULL, OPT_POWERSGD_START},
    {"local-sgd", required_argument, NULL, OPT_LOCAL_SGD},
    {"local-sgd-warmup", required_argument, NULL, OPT_LOCAL_SGD_WARMUP},
    {"help", no_argument, NULL, 'h'},
};
#define N_COMMON ((int)(sizeof common_options / sizeof common_options[0]))
#define MAX_STRATEGY_FLAGS 64
/* The shortest --timeout taken, seconds (0 = off is taken too). */
#define SB_TIMEOUT_MIN_S 1e-3

/* Every registered strategy's flags, each name once; with common_options
 * into `out` (N_COMMON + n + 1 entries, ending in zeros). */
static int all_options(struct option *out, const char **names)
{
    int n = 0;
    memcpy(out, common_options, sizeof common_options);
    for (int i = 0; i < sb_strategy_count(); i++)
        for (const struct sb_strategy_option *o = sb_strategy_at(i)->options; o && o->flag;
             o++) {
            int seen = 0;
            for (int k = 0; k < n && !seen; k++) seen = strcmp(names[k], o->flag) == 0;
            if (seen || n == MAX_STRATEGY_FLAGS) continue;
            names[n] = o->flag;
            out[N_COMMON + n] = (struct option){o->flag, o->metavar ? required_argument
                                                                    : no_argument,
                                                NULL, OPT_STRATEGY_FLAG + n};
            n++;
        }
    out[N_COMMON + n] = (struct option){NULL, 0, NULL, 0};
    return n;
}

void sb_train_opts_defaults(struct sb_train_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    struct sb_config *c = &opts->cfg;
    strcpy(c->strategy, sb_strategy_at(0)->name); /* the registry's first: single */
    strcpy(c->workload, "mlp");
    /* cuda where the build has CUDA and a GPU is visible, else cpu. */
    strcpy(c->device, sb_cuda_device_count() > 0 ? "cuda" : "cpu");
    c->comm[0] = '\0'; /* resolved by validate: nccl on cuda (if built), mpi on cpu */
    c->hidden[0] = 256;
    c->n_hidden = 1;
    c->vit = (struct sb_vit_config){.patch = 4, .width = 64, .depth = 6, .heads = 4,
                                    .mlp_ratio = 2};
    c->replicas = 1;
    c->epochs = 3;
    c->batch = 64;
    c->lr = SB_LR_DEFAULT_SGD;
    c->momentum = 0.9;
    c->lr_scaling = SB_LR_SCALING_NONE;
    c->seed = 42;
    c->target_accuracy = 0.97;
    c->max_steps = 0;
    c->warmup_steps = 10;
    c->threads = 0;
    c->eval_batch = 1000;
    strcpy(c->allreduce, "auto");
    c->probe_links = 1;
    sb_strategy_options_defaults(sb_strategy_find(c->strategy), c);
    c->timeout_s = 60.0; /* Horovod's stall check also warns after 60 s */
    strcpy(c->grad_compression, "none");
    c->powersgd_rank = 2; /* PyTorch's PowerSGDState default matrix_approximation_rank is 1;
                           * Vogels et al. report rank 2 reaching full accuracy */
}

void sb_train_opts_usage(FILE *out)
{
    struct sb_train_opts d;
    sb_train_opts_defaults(&d);
    const struct sb_config *c = &d.cfg;
    fprintf(out,
            "usage: stratbench train [flags]\n"
            "\n"
            "Trains a model on MNIST under one strategy and reports where the time goes.\n"
            "Strategies of one process per replica (and server) run under mpirun: run\n"
            "outside mpirun, stratbench launches mpirun itself; under mpirun it uses the\n"
            "MPI world.\n"
            "\n"
            "  --strategy NAME        %-10s %s\n"
            "  --workload NAME        %-10s %s\n"
            "  --device NAME          %-10s cpu | cuda | auto (auto: cuda when a GPU is visible)\n"
            "  --comm NAME            %-10s nccl | mpi: how GPU replicas talk (mpi = host\n"
            "                                    memory, staged; default nccl on cuda, mpi on cpu)\n"
            "  --hidden LIST          %-10d hidden widths of the mlp, e.g. 1024,1024\n"
            "  --patch N              %-10d vit: patch side in pixels (divides 28: 4, 7)\n"
            "  --width N              %-10d vit: embedding width (a multiple of --heads)\n"
            "  --depth N              %-10d vit: transformer blocks\n"
            "  --heads N              %-10d vit: attention heads\n"
            "  --mlp-ratio N          %-10d vit: MLP width = N x --width\n"
            "  --replicas N           %-10d data-parallel replicas (under mpirun: world size\n"
            "                                    minus servers)\n"

            "  --epochs N             %-10d passes over the 60k training images\n"
            "  --batch N              %-10d per-replica batch; global batch = replicas x batch\n"
            "  --optimizer NAME       %-10s sgd (with --momentum) | adam (Kingma & Ba 2015,\n"
            "                                    PyTorch's betas 0.9, 0.999, eps 1e-8)\n"
            "  --lr X                 %-10g learning rate (default %g with adam)\n"
            "  --momentum X           %-10g SGD momentum\n"
            "  --lr-scaling MODE      %-10s none | linear (lr x replicas, Goyal et al. 2017)\n"
            "  --lr-schedule S        %-10s constant | cosine (from the effective lr to 0 at\n"
            "                                    the run's last step; SGDR, no restarts)\n"
            "  --lr-warmup-steps N    %-10s linear lr warm-up over the first N optimizer steps\n"
            "                                    (not --warmup-steps, which is about timing)\n"
            "  --seed N               %-10llu initialisation and data order\n"
            "  --data DIR             MNIST idx files (.gz or raw); default $STRATBENCH_DATA,\n"
            "                         else the installed or source tree's data/mnist\n"
            "                         (stratbench info shows it), else ./data/mnist\n"
            "  --report FILE          write the JSON run report (rank 0, atomically)\n"
            "  --target-accuracy X    %-10g test accuracy for time to accuracy (0.97 or 97%%)\n"
            "  --max-steps N          %-10s stop after N optimizer steps (0 = no limit)\n"
            "  --warmup-steps N       %-10d steps excluded from step statistics\n"
            "  --save-params FILE     final parameters, raw little-endian float32, layout order\n"
            "  --threads N            %-10s BLAS threads per process (0 = cores / processes)\n"
            "  --eval-batch N         %-10d test images per forward pass in evaluation\n"
            "  --allreduce ALGO       %-10s MPI strategies on cpu: %s\n"
            "                                    (auto: by size and hosts; mpi: MPI_Iallreduce;\n"
            "                                    hierarchical: within, then across hosts;\n"
            "                                    docs/allreduce.md)\n"
            "  --ranks-per-host L     %-10d hosts of L consecutive ranks for the hierarchical\n"
            "                                    all-reduce (0 = ranks sharing memory)\n"
            "  --probe-links | --no-probe-links\n"
            "                                    MPI strategies: measure the links' latency and\n"
            "                                    bandwidth at start (default on; a few ms, ~0.3 s\n"
            "                                    at 100 Mbit/s) for comm.model (docs/cost-model.md)\n"
            "  --trace FILE           Chrome trace-event JSON of the whole job (Perfetto)\n"
            "  --cuda-graph           single on cuda: capture one training step as a CUDA\n"
            "                         graph and replay it (no per-kernel launches)\n"
            "  --check-every N        also compare all replicas' parameters every N steps\n"
            "                         (0 = only at the end of the run, always done)\n"
            "  --mllog FILE           MLPerf :::MLLOG event lines (rank 0, atomically)\n"
            "  --mllog-benchmark NAME submission_benchmark of the --mllog (default\n"
            "                         mnist_<workload>; MLCommons' checker admits only\n"
            "                         its own benchmarks: README, MLPerf-style logs)\n"
            "  --clear-cache          drop the page cache before the run (root; the\n"
            "                         --mllog says cache_clear true)\n"
            "  --timeout SECONDS      %-10g watchdog: an exchange not done this long after it\n"
            "                                    starts ends the job, naming who did not arrive\n"
            "                                    (0 = off, else at least 0.001; docs/faults.md)\n"
            "  --grad-compression M   %-10s none | fp16 | bf16 (16-bit wire, fp32 sums) |\n"
            "                                    powersgd (low-rank, error feedback); ddp,\n"
            "                                    hierarchical; zero: fp16|bf16; on cpu\n"
            "                                    (docs/compression.md)\n"
            "  --powersgd-rank R      %-10d rank of PowerSGD's factors P and Q\n"
            "  --powersgd-start N     %-10s plain all-reduce for the first N steps\n"
            "  --local-sgd H          %-10s replicas step alone and average the models every\n"
            "                                    H steps (0 = off; PostLocalSGD)\n"
            "  --local-sgd-warmup N   %-10s synchronous steps before local SGD starts\n"
            "  -h, --help             this text\n"
            "\n"
            "strategy flags (each taken only by the strategies named):\n",
            c->strategy, sb_strategy_names_joined(" | "), c->workload, sb_workload_names(),
            "auto", "auto", c->hidden[0], c->vit.patch, c->vit.width, c->vit.depth, c->vit.heads,
            c->vit.mlp_ratio, c->replicas, c->epochs, c->batch, "sgd", c->lr,
            SB_LR_DEFAULT_ADAM, c->momentum, "none", "constant", "0", (unsigned long long)c->seed, c->target_accuracy, "0",
            c->warmup_steps, "0", c->eval_batch, c->allreduce, sb_allreduce_algo_names(" | "),
            c->ranks_per_host, c->timeout_s, c->grad_compression, c->powersgd_rank, "0", "0", "0");
    sb_strategy_options_usage(out);
}

static sb_status parse_long(const char *flag, const char *text, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi)
        return sb_error(SB_ERR_USAGE, "--%s: expected an integer in %ld..%ld, got '%s'", flag,
                        lo, hi, text);
    *out = v;
    return SB_OK;
}

static sb_status parse_int(const char *flag, const char *text, int lo, int hi, int *out)
{
    long v = 0;
    SB_TRY(parse_long(flag, text, lo, hi, &v));
    *out = (int)v;
    return SB_OK;
}

static sb_status parse_double(const char *flag, const char *text, double lo, double hi,
                              double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v) || v < lo || v > hi)
        return sb_error(SB_ERR_USAGE, "--%s: expected a number in [%g, %g], got '%s'", flag, lo,
                        hi, text);
    *out = v;
    return SB_OK;
}

static sb_status parse_name(const char *flag, const char *text, char *out)
{
    if (strlen(text) >= SB_NAME_MAX || !*text)
        return sb_error(SB_ERR_USAGE, "--%s: '%s' is not a valid name", flag, text);
    strcpy(out, text);
    return SB_OK;
}

static sb_status parse_path(const char *flag, const char *text, char *out)
{
    if (strlen(text) >= PATH_MAX || !*text)
        return sb_error(SB_ERR_USAGE, "--%s: expected a path, got '%s'", flag, text);
    strcpy(out, text);
    return SB_OK;
}

/* "1024,1024" -> hidden widths, each 1..65536; an empty item ("256,",
 * ",256", "256,,256") is an error, not skipped. */
static sb_status parse_hidden(const char *text, struct sb_config *c)
{
    char buf[256];
    if (strlen(text) >= sizeof buf || !*text)
        return sb_error(SB_ERR_USAGE, "--hidden: expected widths like 256 or 1024,1024, got '%s'",
                        text);
    strcpy(buf, text);
    c->n_hidden = 0;
    for (char *rest = buf, *tok; (tok = strsep(&rest, ",")) != NULL;) {
        if (!*tok)
            return sb_error(SB_ERR_USAGE, "--hidden: empty item in '%s' (expected widths like "
                            "256 or 1024,1024)", text);
        if (c->n_hidden == SB_MAX_HIDDEN)
            return sb_error(SB_ERR_USAGE, "--hidden: at most %d layers, got '%s'", SB_MAX_HIDDEN,
                            text);
        SB_TRY(parse_int("hidden", tok, 1, 65536, &c->hidden[c->n_hidden]));
        c->n_hidden++;
    }
    return SB_OK;
}

/* "0.97" or "97%" -> 0.97. */
static sb_status parse_accuracy(const char *text, double *out)
{
    char buf[64];
    size_t n = strlen(text);
    if (n == 0 || n >= sizeof buf)
        return sb_error(SB_ERR_USAGE, "--target-accuracy: expected 0..1 or N%%, got '%s'", text);
    strcpy(buf, text);
    int percent = buf[n - 1] == '%';
    if (percent) buf[n - 1] = '\0';
    double v = 0.0;
    if (parse_double("target-accuracy", buf, 0.0, percent ? 100.0 : 1.0, &v) || v <= 0.0)
        return sb_error(SB_ERR_USAGE, "--target-accuracy: expected a fraction in (0, 1] or a "
                        "percentage like 97%%, got '%s'", text);
    *out = percent ? v / 100.0 : v;
    return SB_OK;
}

static sb_status parse_one(struct sb_train_opts *o, int opt, const char *arg)
{
    struct sb_config *c = &o->cfg;
    long l = 0;
    enum sb_allreduce_algo algo;
    switch (opt) {
    case OPT_STRATEGY: return parse_name("strategy", arg, c->strategy);
    case OPT_WORKLOAD: return parse_name("workload", arg, c->workload);
    case OPT_DEVICE:
        if (strcmp(arg, "auto") == 0) { /* the default: cuda where a GPU is visible */
            strcpy(c->device, sb_cuda_device_count() > 0 ? "cuda" : "cpu");
            return SB_OK;
        }
        return parse_name("device", arg, c->device);
    case OPT_COMM:
        if (strcmp(arg, "nccl") != 0 && strcmp(arg, "mpi") != 0)
            return sb_error(SB_ERR_USAGE, "--comm: expected nccl or mpi, got '%s'", arg);
        strcpy(c->comm, arg);
        return SB_OK;
    case OPT_HIDDEN: return parse_hidden(arg, c);
    case OPT_PATCH: return parse_int("patch", arg, 1, 28, &c->vit.patch);
    case OPT_WIDTH: return parse_int("width", arg, 1, 4096, &c->vit.width);
    case OPT_DEPTH: return parse_int("depth", arg, 1, 64, &c->vit.depth);
    case OPT_HEADS: return parse_int("heads", arg, 1, 256, &c->vit.heads);
    case OPT_MLP_RATIO: return parse_int("mlp-ratio", arg, 1, 64, &c->vit.mlp_ratio);
    case OPT_REPLICAS:
        o->replicas_given = 1;
        return parse_int("replicas", arg, 1, 4096, &c->replicas);
    case OPT_EPOCHS: return parse_int("epochs", arg, 1, 100000, &c->epochs);
    case OPT_BATCH: return parse_int("batch", arg, 1, SB_MNIST_TRAIN_IMAGES, &c->batch);
    case OPT_LR:
        o->lr_given = 1;
        return parse_double("lr", arg, 0.0, 1e3, &c->lr);
    case OPT_OPTIMIZER:
        if (strcmp(arg, "sgd") == 0) c->optimizer = SB_OPTIMIZER_SGD;
        else if (strcmp(arg, "adam") == 0) c->optimizer = SB_OPTIMIZER_ADAM;
        else return sb_error(SB_ERR_USAGE, "--optimizer: expected sgd or adam, got '%s'", arg);
        return SB_OK;
    case OPT_MOMENTUM: return parse_double("momentum", arg, 0.0, 0.999999, &c->momentum);
    case OPT_LR_SCALING:
        if (strcmp(arg, "none") == 0) c->lr_scaling = SB_LR_SCALING_NONE;
        else if (strcmp(arg, "linear") == 0) c->lr_scaling = SB_LR_SCALING_LINEAR;
        else return sb_error(SB_ERR_USAGE, "--lr-scaling: expected none or linear, got '%s'", arg);
        return SB_OK;
    case OPT_LR_SCHEDULE:
        if (strcmp(arg, "constant") == 0) c->lr_schedule = SB_LR_SCHEDULE_CONSTANT;
        else if (strcmp(arg, "cosine") == 0) c->lr_schedule = SB_LR_SCHEDULE_COSINE;
        else return sb_error(SB_ERR_USAGE, "--lr-schedule: expected constant or cosine, got '%s'",
                             arg);
        return SB_OK;
    case OPT_LR_WARMUP_STEPS:
        return parse_long("lr-warmup-steps", arg, 0, LONG_MAX, &c->lr_warmup_steps);
    case OPT_SEED:
        SB_TRY(parse_long("seed", arg, 0, LONG_MAX, &l));
        c->seed = (uint64_t)l;
        return SB_OK;
    case OPT_DATA: return parse_path("data", arg, c->data_dir);
    case OPT_REPORT: return parse_path("report", arg, c->report_path);
    case OPT_TARGET: return parse_accuracy(arg, &c->target_accuracy);
    case OPT_MAX_STEPS: return parse_long("max-steps", arg, 0, LONG_MAX, &c->max_steps);
    case OPT_WARMUP: return parse_int("warmup-steps", arg, 0, 1000000, &c->warmup_steps);
    case OPT_CHECK_EVERY: return parse_long("check-every", arg, 0, LONG_MAX, &c->check_every);
    case OPT_SAVE_PARAMS: return parse_path("save-params", arg, c->save_params_path);
    case OPT_THREADS: return parse_int("threads", arg, 0, 1024, &c->threads);
    case OPT_EVAL_BATCH: return parse_int("eval-batch", arg, 1, 10000, &c->eval_batch);
    case OPT_PROBE_LINKS: c->probe_links = 1; return SB_OK;
    case OPT_NO_PROBE_LINKS: c->probe_links = 0; return SB_OK;
    case OPT_ALLREDUCE:
        if (sb_allreduce_algo_parse(arg, &algo) != 0)
            return sb_error(SB_ERR_USAGE, "--allreduce: expected one of %s, got '%s'",
                            sb_allreduce_algo_names(", "), arg);
        strcpy(c->allreduce, sb_allreduce_algo_name(algo));
        return SB_OK;
    case OPT_TRACE: return parse_path("trace", arg, c->trace_path);
    case OPT_CUDA_GRAPH: c->cuda_graph = 1; return SB_OK;
    case OPT_MLLOG: return parse_path("mllog", arg, c->mllog_path);
    case OPT_MLLOG_BENCHMARK:
        if (!*arg || strlen(arg) >= sizeof c->mllog_benchmark ||
            strspn(arg, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(arg))
            return sb_error(SB_ERR_USAGE, "--mllog-benchmark: expected a benchmark name of "
                            "a-z, 0-9 and _ (at most %zu characters), got '%s'",
                            sizeof c->mllog_benchmark - 1, arg);
        strcpy(c->mllog_benchmark, arg);
        return SB_OK;
    case OPT_CLEAR_CACHE: c->clear_cache = 1; return SB_OK;
    case OPT_TIMEOUT:
        SB_TRY(parse_double("timeout", arg, 0.0, 86400.0, &c->timeout_s));
        /* Below a millisecond no exchange can finish (a 1-byte round trip
         * between hosts takes 10-50 us, a broadcast of the model far more):
         * the job would only start and fail. */
        if (c->timeout_s > 0 && c->timeout_s < SB_TIMEOUT_MIN_S)
            return sb_error(SB_ERR_USAGE, "--timeout: %g s is shorter than any exchange takes "
                            "(at least %g s, or 0 for off)", c->timeout_s, SB_TIMEOUT_MIN_S);
        return SB_OK;
    case OPT_RANKS_PER_HOST: return parse_int("ranks-per-host", arg, 0, 4096, &c->ranks_per_host);
    case OPT_GRAD_COMPRESSION:
        if (strcmp(arg, "none") && strcmp(arg, "fp16") && strcmp(arg, "bf16") &&
            strcmp(arg, "powersgd"))
            return sb_error(SB_ERR_USAGE, "--grad-compression: expected none, fp16, bf16 or "
                            "powersgd, got '%s'", arg);
        strcpy(c->grad_compression, arg);
        return SB_OK;
    case OPT_POWERSGD_RANK: return parse_int("powersgd-rank", arg, 1, 1024, &c->powersgd_rank);
    case OPT_POWERSGD_START:
        return parse_long("powersgd-start", arg, 0, LONG_MAX, &c->powersgd_start);
    case OPT_LOCAL_SGD: return parse_int("local-sgd", arg, 0, 1000000, &c->local_sgd);
    case OPT_LOCAL_SGD_WARMUP:
        return parse_long("local-sgd-warmup", arg, 0, LONG_MAX, &c->local_sgd_warmup);
    }
    return sb_error(SB_ERR_INTERNAL, "unhandled option %d", opt);
}

/* --device: cpu always; cuda only in a build with CUDA and with a visible
 * GPU. --comm: resolved here when not given (nccl on cuda in a build with
 * NCCL, else mpi); nccl needs cuda and a build with NCCL. */
static sb_status validate_device(struct sb_config *c)
{
    int cuda = strcmp(c->device, "cuda") == 0;
    if (!cuda && strcmp(c->device, "cpu") != 0)
        return sb_error(SB_ERR_USAGE, "--device: unknown device '%s' (expected cpu, cuda or auto)",
                        c->device);
    if (!c->comm[0]) {
#ifdef SB_HAVE_NCCL
        strcpy(c->comm, cuda ? "nccl" : "mpi");
#else
        strcpy(c->comm, "mpi");
#endif
    }
    int nccl = strcmp(c->comm, "nccl") == 0;
    if (c->cuda_graph && !cuda)
        return sb_error(SB_ERR_USAGE, "--cuda-graph: CUDA graphs need --device cuda (this run "
                        "is on %s)", c->device);
    if (!cuda) {
        if (nccl)
            return sb_error(SB_ERR_USAGE, "--comm nccl: NCCL connects GPUs; use it with "
                            "--device cuda (on cpu the communicator is mpi)");
        return SB_OK;
    }
#ifndef SB_HAVE_CUDA
    if (c->cuda_graph)
        return sb_error(SB_ERR_USAGE, "--cuda-graph: this build has no CUDA, so there is no "
                        "--device cuda (install the CUDA toolkit and re-run ./configure.py)");
    return sb_error(SB_ERR_USAGE, "--device cuda: this build has no CUDA (install the CUDA "
                    "toolkit and re-run ./configure.py; see docs/gpu.md)");
#else
    if (sb_cuda_device_count() == 0)
        return sb_error(SB_ERR_USAGE, "--device cuda: no CUDA device is visible (check "
                        "nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu)");
#ifndef SB_HAVE_NCCL
    if (nccl)
        return sb_error(SB_ERR_USAGE, "--comm nccl: this build has no NCCL (install libnccl-dev "
                        "and re-run ./configure.py, or use --comm mpi)");
#endif
    return SB_OK;
#endif
}

/* --allreduce for strategy s: an entry that names its own algorithm
 * (hierarchical: ddp with the hierarchical all-reduce) sets it, and
 * refuses another; the hierarchical all-reduce needs hosts of equal size
 * (--ranks-per-host L dividing the processes; hosts by shared memory are
 * checked when the ranks are grouped). */
static sb_status validate_allreduce(const struct sb_strategy_ops *s, struct sb_config *c)
{
    if (s->allreduce != SB_ALLREDUCE_AUTO) {
        const char *own = sb_allreduce_algo_name(s->allreduce);
        if (strcmp(c->allreduce, "auto") != 0 && strcmp(c->allreduce, own) != 0)
            return sb_error(SB_ERR_USAGE, "--allreduce %s: strategy %s runs the %s all-reduce",
                            c->allreduce, s->name, own);
        strcpy(c->allreduce, own);
    }
    int l = c->ranks_per_host;
    if (l > 0 && (!s->uses_mpi || !c->backend->host_memory))
        return sb_error(SB_ERR_USAGE, "--ranks-per-host: only strategies of MPI ranks on "
                        "--device cpu group their ranks into hosts (got --strategy %s "
                        "--device %s)", s->name, c->device);
    if (l > 0 && strcmp(c->allreduce, "hierarchical") == 0 && c->replicas % l != 0)
        return sb_error(SB_ERR_USAGE, "--ranks-per-host: %d replicas do not fill hosts of %d "
                        "ranks", c->replicas, l);
    return SB_OK;
}

/* --grad-compression and --local-sgd: only strategies whose ops set
 * grad_sync, on cpu, one of the two at a time. */
static sb_status validate_grad_sync(const struct sb_config *c, const struct sb_strategy_ops *s)
{
    int compress = strcmp(c->grad_compression, "none") != 0;
    const char *flag = compress ? "--grad-compression" : "--local-sgd";
    if (!compress && c->local_sgd == 0) return SB_OK;
    if (compress && c->local_sgd > 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression %s: not with --local-sgd (choose one "
                        "way to cut the traffic)", c->grad_compression);
    if (!s->grad_sync) {
        char able[256] = "";
        for (int i = 0, len = 0; i < sb_strategy_count() && len < (int)sizeof able; i++)
            if (sb_strategy_at(i)->grad_sync)
                len += snprintf(able + len, sizeof able - (size_t)len, "%s%s", len ? ", " : "",
                                sb_strategy_at(i)->name);
        return sb_error(SB_ERR_USAGE, "%s: only --strategy %s so far (got %s)", flag, able,
                        c->strategy);
    }
    int half = strcmp(c->grad_compression, "fp16") == 0 || strcmp(c->grad_compression, "bf16") == 0;
    if (strcmp(c->device, "cpu") != 0 && !(half && strcmp(c->comm, "nccl") == 0))
        return sb_error(SB_ERR_USAGE, "%s%s%s: on --device cpu only (on GPUs: fp16 and bf16 "
                        "with --comm nccl; docs/compression.md)", flag, compress ? " " : "",
                        compress ? c->grad_compression : "");
    return SB_OK;
}

/* The vit workload's shape (checked whatever the workload, so a bad flag
 * never waits for --workload vit): --patch divides the 28-pixel side,
 * --width is a multiple of --heads. */
static sb_status validate_vit(const struct sb_vit_config *v)
{
    if (SB_MNIST_SIDE % v->patch != 0)
        return sb_error(SB_ERR_USAGE, "--patch: %d does not divide the %d-pixel side (use 4, 7, "
                        "14 or 28)", v->patch, SB_MNIST_SIDE);
    if (v->width % v->heads != 0)
        return sb_error(SB_ERR_USAGE, "--heads: %d does not divide --width %d", v->heads,
                        v->width);
    return SB_OK;
}

/* Checks that need several flags together. */
static sb_status validate(struct sb_train_opts *o)
{
    struct sb_config *c = &o->cfg;
    const struct sb_strategy_ops *s = sb_strategy_find(c->strategy);
    if (!s)
        return sb_error(SB_ERR_USAGE, "--strategy: unknown strategy '%s' (expected one of: %s)",
                        c->strategy, sb_strategy_names());
    if (!sb_workload_find(c->workload))
        return sb_error(SB_ERR_USAGE, "--workload: unknown workload '%s' (expected one of: %s)",
                        c->workload, sb_workload_names());
    SB_TRY(validate_device(c));
    SB_TRY(validate_vit(&c->vit));
    const char *why = NULL;
    if (c->clear_cache && !sb_page_cache_droppable(&why))
        return sb_error(SB_ERR_USAGE, "--clear-cache: cannot drop the page cache "
                        "(/proc/sys/vm/drop_caches: %s): run as root, or leave the flag out "
                        "(an --mllog then says cache_clear false)", why);
    if (!o->lr_given && c->optimizer == SB_OPTIMIZER_ADAM) c->lr = SB_LR_DEFAULT_ADAM;
    if (c->cuda_graph && c->optimizer == SB_OPTIMIZER_ADAM)
        return sb_error(SB_ERR_USAGE, "--cuda-graph: a captured step would freeze Adam's bias "
                        "correction; use --optimizer sgd with --cuda-graph");
    /* Each name resolved once: the layers above ask these entries. */
    c->strategy_ops = s;
    c->backend = sb_backend_find(c->device);
    c->comm_entry = sb_comm_find(c->comm);
    if (!c->backend || !c->comm_entry)
        return sb_error(SB_ERR_USAGE, "--device %s --comm %s: not in this build", c->device,
                        c->comm);
    SB_TRY(validate_allreduce(s, c));
    if (strcmp(c->allreduce, "auto") != 0 && (!s->uses_mpi || strcmp(c->device, "cpu") != 0))
        return sb_error(SB_ERR_USAGE, "--allreduce %s: only strategies of MPI ranks on --device "
                        "cpu choose their all-reduce (NCCL and threads use their own)",
                        c->allreduce);
    SB_TRY(validate_grad_sync(c, s));
    if (c->cuda_graph && !s->cuda_graph) {
        char able[256] = "";
        for (int i = 0, len = 0; i < sb_strategy_count() && len < (int)sizeof able; i++)
            if (sb_strategy_at(i)->cuda_graph)
                len += snprintf(able + len, sizeof able - (size_t)len, "%s%s", len ? ", " : "",
                                sb_strategy_at(i)->name);
        return sb_error(SB_ERR_USAGE, "--cuda-graph: only --strategy %s replays its step as a "
                        "CUDA graph so far (got %s)", able, c->strategy);
    }
    return sb_strategy_check(s, c);
}

/* A strategy flag met on the command line, applied once --strategy is known. */
struct pending_flag {
    const char *flag, *arg;
};

sb_status sb_train_opts_parse(struct sb_train_opts *opts, int argc, char **argv)
{
    sb_train_opts_defaults(opts);
    char data_flag[PATH_MAX] = "";
    struct option long_options[N_COMMON + MAX_STRATEGY_FLAGS + 1];
    const char *names[MAX_STRATEGY_FLAGS];
    all_options(long_options, names);
    struct pending_flag pending[256];
    int n_pending = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int prev = optind;
        int opt = getopt_long(argc, argv, ":h", long_options, NULL);
        if (opt == -1) break;
        if (opt == 'h') {
            opts->help = 1;
            return SB_OK;
        }
        if (opt == '?')
            return sb_cli_bad_flag("train", argv[prev], long_options);
        if (opt == ':')
            return sb_error(SB_ERR_USAGE, "%s: missing value", argv[prev]);
        if (opt >= OPT_STRATEGY_FLAG) {
            if (n_pending == (int)(sizeof pending / sizeof pending[0]))
                return sb_error(SB_ERR_USAGE, "too many strategy flags");
            pending[n_pending++] = (struct pending_flag){names[opt - OPT_STRATEGY_FLAG], optarg};
            continue;
        }
        SB_TRY(parse_one(opts, opt, optarg));
    }
    if (optind < argc)
        return sb_error(SB_ERR_USAGE, "unexpected argument '%s' (see stratbench train --help)",
                        argv[optind]);
    const struct sb_strategy_ops *s = sb_strategy_find(opts->cfg.strategy);
    if (!s)
        return sb_error(SB_ERR_USAGE, "--strategy: unknown strategy '%s' (expected one of: %s)",
                        opts->cfg.strategy, sb_strategy_names());
    sb_strategy_options_defaults(s, &opts->cfg);
    for (int i = 0; i < n_pending; i++)
        SB_TRY(sb_strategy_option_parse(s, &opts->cfg, pending[i].flag, pending[i].arg));
    strcpy(data_flag, opts->cfg.data_dir);
    sb_mnist_resolve_dir(data_flag, opts->cfg.data_dir, sizeof opts->cfg.data_dir);
    return validate(opts);
}

long sb_train_run_steps(const struct sb_config *c, const struct sb_mnist *data)
{
    long total = (long)sb_steps_per_epoch(data->train.n, sb_config_global_batch(c)) * c->epochs;
    return c->max_steps && c->max_steps < total ? c->max_steps : total;
}

sb_status sb_train_check_data(const struct sb_config *c, const struct sb_mnist *data)
{
    SB_TRY(sb_mnist_check_image_size(data, SB_MNIST_SIDE, SB_MNIST_SIDE));
    int global = sb_config_global_batch(c);
    int per_epoch = sb_steps_per_epoch(data->train.n, global);
    if (per_epoch < 1)
        return sb_error(SB_ERR_USAGE, "--batch: global batch %d exceeds the %d training images "
                        "of %s", global, data->train.n, data->train.image_path);
    long total = sb_train_run_steps(c, data);
    int capped = c->max_steps && c->max_steps < (long)per_epoch * c->epochs;
    if (c->lr_schedule == SB_LR_SCHEDULE_COSINE && c->lr_warmup_steps >= total)
        return sb_error(SB_ERR_USAGE, "--lr-warmup-steps: %ld warm-up steps leave none for "
                        "--lr-schedule cosine to decay: the run has %ld steps (%s)",
                        c->lr_warmup_steps, total,
                        capped ? "--max-steps" : "--epochs x steps per epoch");
    if (c->report_path[0] && c->warmup_steps >= total)
        return sb_error(SB_ERR_USAGE, "--warmup-steps: %d warm-up step%s leave%s none to measure "
                        "for --report: the run has %ld step%s (%s); lower --warmup-steps or raise %s",
                        c->warmup_steps, c->warmup_steps == 1 ? "" : "s",
                        c->warmup_steps == 1 ? "s" : "", total, total == 1 ? "" : "s",
                        capped ? "--max-steps" : "--epochs x steps per epoch",
                        capped ? "--max-steps" : "--epochs");
    return SB_OK;
}

sb_status sb_train_check_outputs(const struct sb_config *c)
{
    const struct sb_output outs[] = {
        {"--report", c->report_path},
        {"--trace", c->trace_path},
        {"--save-params", c->save_params_path},
        {"--mllog", c->mllog_path},
    };
    int n = (int)(sizeof outs / sizeof outs[0]);
    SB_TRY(sb_outputs_check(outs, n));
    /* The data files (both spellings of each) and their SHA256SUMS. */
    char paths[SB_MNIST_MAX_INPUTS][PATH_MAX];
    const char *inputs[SB_MNIST_MAX_INPUTS];
    int n_inputs = sb_mnist_input_paths(c->data_dir, paths);
    for (int i = 0; i < n_inputs; i++) inputs[i] = paths[i];
    return sb_outputs_check_inputs(outs, n, inputs, n_inputs);
}
