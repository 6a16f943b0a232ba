/* The validation of `stratbench train`'s flags: their combination, once
 * every flag is parsed (train_opts.c), and the checks against the loaded
 * data and of the outputs before any work (train_opts.h). */
#include "cli/train_check.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda.h"
#include "cli/outputs.h"
#include "comm/allreduce_algo.h"
#include "core/page_cache.h"
#include "data/mnist.h"
#include "data/sampler.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

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

/* --precision bf16|fp16 with a gradient compression: the gradients are
 * already 16-bit, so a 16-bit wire of the other format would round them
 * twice (refused); the same format is what the precision does anyway
 * (refused too, as a flag that changes nothing). */
static sb_status validate_precision(const struct sb_config *c)
{
    if (c->precision == SB_PRECISION_FP32) return SB_OK;
    if (c->cuda_graph && c->precision == SB_PRECISION_FP16)
        return sb_error(SB_ERR_USAGE, "--cuda-graph: not with --precision fp16 (the loss "
                        "scaler decides on the host whether a step runs; a replayed graph "
                        "cannot skip one)");
    if (c->local_sgd > 0)
        return sb_error(SB_ERR_USAGE, "--local-sgd: not with --precision %s (local SGD averages "
                        "the 16-bit compute copies, not the fp32 master weights the optimizer "
                        "steps)", sb_precision_name(c->precision));
    int half = strcmp(c->grad_compression, "fp16") == 0 || strcmp(c->grad_compression, "bf16") == 0;
    if (half)
        return sb_error(SB_ERR_USAGE, "--grad-compression %s: not with --precision %s (the "
                        "gradients are already %s, and so is their wire)", c->grad_compression,
                        sb_precision_name(c->precision), sb_precision_name(c->precision));
    return SB_OK;
}

/* Checks that need several flags together. */
sb_status sb_train_opts_validate(struct sb_train_opts *o)
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
    SB_TRY(validate_precision(c));
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
    if (c->eval_samples > data->test.n)
        return sb_error(SB_ERR_USAGE, "--eval-samples: %d exceeds the %d test images of %s",
                        c->eval_samples, data->test.n, data->test.image_path);
    if (c->report_path[0] && c->warmup_steps >= total)
        return sb_error(SB_ERR_USAGE, "--warmup-steps: %d warm-up step%s leave%s none to measure "
                        "for --report: the run has %ld step%s (%s); lower --warmup-steps or raise %s",
                        c->warmup_steps, c->warmup_steps == 1 ? "" : "s",
                        c->warmup_steps == 1 ? "s" : "", total, total == 1 ? "" : "s",
                        capped ? "--max-steps" : "--epochs x steps per epoch",
                        capped ? "--max-steps" : "--epochs");
    return SB_OK;
}

void sb_train_limit_eval(struct sb_config *cfg, struct sb_mnist *data)
{
    if (cfg->eval_samples > 0 && cfg->eval_samples < data->test.n) data->test.n = cfg->eval_samples;
    cfg->eval_samples = data->test.n;
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
