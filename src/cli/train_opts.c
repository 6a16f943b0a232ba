/* `stratbench train` flags; see train_opts.h. */
#include "cli/train_opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda.h"
#include "cli/suggest.h"
#include "cli/train_check.h"
#include "comm/allreduce_algo.h"
#include "comm/wait_policy.h"
#include "data/mnist.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

enum {
    OPT_STRATEGY = 256, OPT_WORKLOAD, OPT_DEVICE, OPT_HIDDEN, OPT_REPLICAS,
    OPT_EPOCHS, OPT_BATCH, OPT_LR, OPT_MOMENTUM, OPT_LR_SCALING, OPT_LR_SCHEDULE,
    OPT_LR_WARMUP_STEPS, OPT_SEED, OPT_DATA,
    OPT_REPORT, OPT_TARGET, OPT_MAX_STEPS, OPT_WARMUP, OPT_SAVE_PARAMS, OPT_THREADS,
    OPT_EVAL_BATCH, OPT_EVAL_SAMPLES, OPT_TRACE, OPT_COMM, OPT_ALLREDUCE, OPT_PROBE_LINKS, OPT_NO_PROBE_LINKS,
    OPT_CUDA_GRAPH, OPT_CHECK_EVERY, OPT_MLLOG, OPT_TIMEOUT, OPT_OPTIMIZER, OPT_RANKS_PER_HOST,
    OPT_GRAD_COMPRESSION, OPT_POWERSGD_RANK, OPT_POWERSGD_START, OPT_LOCAL_SGD,
    OPT_LOCAL_SGD_WARMUP, OPT_PRECISION, OPT_MLLOG_BENCHMARK, OPT_CLEAR_CACHE, OPT_PATCH,
    OPT_WIDTH, OPT_DEPTH, OPT_HEADS, OPT_MLP_RATIO, OPT_WAIT,
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
    {"eval-samples", required_argument, NULL, OPT_EVAL_SAMPLES},
    {"allreduce", required_argument, NULL, OPT_ALLREDUCE},
    {"ranks-per-host", required_argument, NULL, OPT_RANKS_PER_HOST},
    {"wait", required_argument, NULL, OPT_WAIT},
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
    {"precision", required_argument, NULL, OPT_PRECISION},
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
    strcpy(c->wait, "auto");
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
            "  --threads N            %-10s compute threads per process (0 = cores / processes)\n"
            "  --eval-batch N         %-10d test images per forward pass in evaluation\n"
            "  --eval-samples N       %-10s score the first N test images at each evaluation\n"
            "                                    (a benchmark of step time need not score all;\n"
            "                                    accuracy and time to accuracy are then over N)\n"
            "  --allreduce ALGO       %-10s MPI strategies on cpu: %s\n"
            "                                    (auto: by size and hosts; mpi: MPI_Iallreduce;\n"
            "                                    hierarchical: within, then across hosts;\n"
            "                                    docs/allreduce.md)\n"
            "  --ranks-per-host L     %-10d hosts of L consecutive ranks for the hierarchical\n"
            "                                    all-reduce (0 = ranks sharing memory)\n"
            "  --wait MODE            %-10s MPI ranks: how a rank waits for its messages:\n"
            "                                    spin (poll, a whole core) | sleep (poll 50 us,\n"
            "                                    then sleep 10 us-1 ms between polls) | auto\n"
            "                                    (sleep when the machine runs more compute\n"
            "                                    threads than cores; docs/multinode.md)\n"
            "  --probe-links | --no-probe-links\n"
            "                                    MPI strategies: measure the links' latency and\n"
            "                                    bandwidth at start, per message size, and the\n"
            "                                    reduction's gamma (default on; ~0.1 s on one\n"
            "                                    host, ~0.5 s at 100 Mbit/s) for comm.model\n"
            "                                    (docs/cost-model.md)\n"
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
            "  --precision P          %-10s fp32 | bf16 | fp16: 16-bit parameters, activations\n"
            "                                    and gradients, fp32 master weights; fp16 with\n"
            "                                    dynamic loss scaling (docs/precision.md)\n"
            "  -h, --help             this text\n"
            "\n"
            "strategy flags (each taken only by the strategies named):\n",
            c->strategy, sb_strategy_names_joined(" | "), c->workload, sb_workload_names(),
            "auto", "auto", c->hidden[0], c->vit.patch, c->vit.width, c->vit.depth, c->vit.heads,
            c->vit.mlp_ratio, c->replicas, c->epochs, c->batch, "sgd", c->lr,
            SB_LR_DEFAULT_ADAM, c->momentum, "none", "constant", "0", (unsigned long long)c->seed, c->target_accuracy, "0",
            c->warmup_steps, "0", c->eval_batch, "all", c->allreduce, sb_allreduce_algo_names(" | "),
            c->ranks_per_host, c->wait, c->timeout_s, c->grad_compression, c->powersgd_rank, "0", "0", "0", "fp32");
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
    case OPT_EVAL_SAMPLES: return parse_int("eval-samples", arg, 1, 1000000, &c->eval_samples);
    case OPT_PROBE_LINKS: c->probe_links = 1; return SB_OK;
    case OPT_NO_PROBE_LINKS: c->probe_links = 0; return SB_OK;
    case OPT_ALLREDUCE:
        if (sb_allreduce_algo_parse(arg, &algo) != 0)
            return sb_error(SB_ERR_USAGE, "--allreduce: expected one of %s, got '%s'",
                            sb_allreduce_algo_names(", "), arg);
        strcpy(c->allreduce, sb_allreduce_algo_name(algo));
        return SB_OK;
    case OPT_WAIT: {
        enum sb_wait_choice w;
        if (sb_wait_choice_parse(arg, &w) != 0)
            return sb_error(SB_ERR_USAGE, "--wait: expected auto, spin or sleep, got '%s'", arg);
        strcpy(c->wait, sb_wait_choice_name(w));
        return SB_OK;
    }
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
    case OPT_PRECISION:
        if (!sb_precision_parse(arg, &c->precision))
            return sb_error(SB_ERR_USAGE, "--precision: expected fp32, bf16 or fp16, got '%s'",
                            arg);
        return SB_OK;
    case OPT_LOCAL_SGD_WARMUP:
        return parse_long("local-sgd-warmup", arg, 0, LONG_MAX, &c->local_sgd_warmup);
    }
    return sb_error(SB_ERR_INTERNAL, "unhandled option %d", opt);
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
    return sb_train_opts_validate(opts);
}
