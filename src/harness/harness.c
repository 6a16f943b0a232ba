/* The training loop's driver; see harness.h. The loop's pieces are in
 * step_loop.c, cross_rank.c and run_outputs.c (loop.h). */
#include "harness/harness.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda.h"
#include "comm/wait_policy.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "data/sampler.h"
#include "harness/compute_probe.h"
#include "harness/consistency.h"
#include "harness/loop.h"
#include "harness/straggler.h"
#include "job/launcher.h"
#include "job/probe.h"
#include "trace/trace.h"

/* compute threads per process: --threads, else the cores this process may run
 * on. mpirun binds each rank to a core when ranks <= cores (Open MPI's
 * default), so a bound rank gets the cores of its affinity mask; an unbound
 * process shares the node's cores evenly with the job's other processes
 * on this node. */
static int blas_threads(const struct sb_config *cfg, const struct sb_job *job)
{
    if (cfg->threads > 0) return cfg->threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long t = cores / (job->local_size > 0 ? job->local_size : 1);
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) < cores)
        t = CPU_COUNT(&mask);
    return t >= 1 ? (int)t : 1;
}

/* How this rank waits for its messages (comm/wait_policy.h): --wait, and
 * for auto whether the job's compute threads on this machine (its ranks on
 * the same kernel, which the cluster fixture's hosts share, x `threads`
 * compute threads each) outnumber the machine's online cores, the rule of the
 * "oversubscribed" warning (run_warnings.h) counted per machine. Set
 * before the strategy's first exchange; recorded in rec. MPI jobs only. */
static void choose_wait(const struct sb_config *cfg, const struct sb_job *job, int threads,
                        struct sb_run_record *rec)
{
    if (!job->mpi) return;
    enum sb_wait_choice choice = SB_WAIT_CHOICE_AUTO;
    (void)sb_wait_choice_parse(cfg->wait, &choice); /* validated by the options */
    /* machine_size >= local_size >= 1 (job.c) */
    rec->wait_threads_on_machine = (long)job->machine_size * (threads > 0 ? threads : 1);
    rec->wait_cores = sysconf(_SC_NPROCESSORS_ONLN);
    enum sb_wait_policy p = sb_wait_policy_resolve(choice, rec->wait_threads_on_machine,
                                                   rec->wait_cores);
    sb_wait_policy_set(p);
    snprintf(rec->wait_policy, sizeof rec->wait_policy, "%s", sb_wait_policy_name(p));
}

/* The record's fields known before training: the configuration, the
 * command line, the job's size and hosts, the global batch, the effective
 * learning rate and the start time (UTC). */
static void record_start(struct sb_run_record *rec, const struct sb_config *cfg,
                         const struct sb_job *job, int argc, char **argv)
{
    rec->cfg = cfg;
    rec->argc = argc;
    rec->argv = argv;
    rec->world_size = job->size;
    rec->hosts = job->hosts;
    rec->n_hosts = job->n_hosts;
    /* What the rendezvous warning compares (run_warnings.h); the TCP eager
     * limit in effect is read at the end, with the report's transport
     * variables (run_outputs.c). */
    rec->p2p_max_bytes = (double)sb_launcher_p2p_max_bytes();
    rec->tcp_eager_limit_bytes = 0.0;
    rec->global_batch = sb_config_global_batch(cfg);
    rec->effective_lr = sb_config_effective_lr(cfg);
    sb_utc_now(rec->start_utc);
}

/* The loop's buffers: the timings of the measured steps (total minus the
 * warm-up), the epoch records, the data order and the loss sums. */
static sb_status loop_alloc(struct sb_loop *L, long total)
{
    const struct sb_config *cfg = L->cfg;
    sb_status st = sb_loop_timings_alloc(&L->t, total > cfg->warmup_steps
                                            ? (size_t)(total - cfg->warmup_steps) : 0);
    L->rec->epochs = calloc((size_t)cfg->epochs, sizeof *L->rec->epochs);
    L->perm = malloc((size_t)L->data->train.n * sizeof *L->perm);
    L->loss_sums = calloc((size_t)L->job->size + 2, sizeof *L->loss_sums);
    if (!st && (!L->rec->epochs || !L->perm || !L->loss_sums))
        st = sb_error(SB_ERR_NOMEM, "harness: out of memory");
    return st;
}

/* Frees what loop_alloc and the run's gathers made. */
static void loop_free(struct sb_loop *L)
{
    sb_loop_timings_free(&L->t);
    free(L->rec->epochs);
    free((void *)L->rec->noise_by_rank);
    sb_straggler_free(&L->rec->stragglers);
    free((void *)L->rec->memory);
    free(L->perm);
    free(L->loss_sums);
}

/* --probe-links, after init (connections made by the broadcast) and before
 * any step: the links' α and B into rec->link (job/probe.h); rank 0 prints
 * them; then the compute probe into rec->compute (compute_probe.h). A job
 * of one rank, or a strategy without ranks, is not probed. */
static sb_status probe_links(struct sb_loop *L)
{
    const struct sb_job *job = L->job;
    struct sb_run_record *rec = L->rec;
    if (!(job->mpi && job->size > 1 && L->cfg->probe_links && L->s->ops->uses_mpi)) return SB_OK;
    SB_TRY(sb_probe_links(job, &rec->link));
    if (job->rank == 0 && rec->link.done) {
        printf("links: latency %.1f us, bandwidth %.3f Gbit/s (probed %d %s link%s in "
               "%.0f ms)\n", 1e6 * rec->link.alpha_s, 8e-9 * rec->link.bandwidth_Bps,
               rec->link.peers, rec->link.cross_host ? "cross-host" : "local",
               rec->link.peers == 1 ? "" : "s", 1e3 * rec->link.seconds);
        fflush(stdout);
    }
    /* The compute probe beside the links (a host backend: a device's passes
     * are asynchronous): every rank at once, as they will train; rank 0's
     * figures go into the report. */
    if (!L->s->env->be->host_memory) return SB_OK;
    sb_status st = sb_compute_probe_run(L->cfg, L->s->env->be, L->s->env->workload, L->data,
                                        &rec->compute);
    /* A rank whose probe failed (out of memory building its model) must not
     * leave the others waiting in the first step's collectives. */
    return sb_job_agree(job, st, "its compute probe", NULL);
}

/* Trains the initialised strategy: rank 0 prints the run's line, every
 * epoch runs, and the run ends with the replica consistency check
 * (collective). */
static sb_status run_training(struct sb_loop *L, int steps_per_epoch)
{
    const struct sb_config *cfg = L->cfg;
    struct sb_run_record *rec = L->rec;
    rec->n_params = sb_strategy_n_params(L->s);
    /* What the strategy settled on (mirrored uses one per replica thread). */
    rec->blas_threads = sb_backend_cpu_threads();
    if (L->job->rank == 0) {
        printf("stratbench: %s, %s (%zu parameters), %d replica%s, global batch %d, "
               "lr %g, %d steps/epoch, %d process%s\n",
               cfg->strategy, cfg->workload, rec->n_params, cfg->replicas,
               cfg->replicas == 1 ? "" : "s", rec->global_batch, rec->effective_lr,
               steps_per_epoch, L->job->size, L->job->size == 1 ? "" : "es");
        fflush(stdout);
    }
    SB_MLLOG_RUN_START(L->ml);
    SB_TRY(sb_loop_train_epochs(L));
    SB_TRY(sb_consistency_check(L->s, L->job, rec->steps_total, &rec->replica_check));
    SB_MLLOG_RUN_STOP(L->ml, rec->time_to_accuracy_s >= 0);
    return SB_OK;
}

sb_status sb_harness_train(const struct sb_config *cfg, const struct sb_mnist *data,
                           struct sb_job *job, int argc, char **argv)
{
    struct sb_placement placement = {0};
    struct sb_strategy_env env = {
        .cfg = cfg,
        .data = data,
        .be = cfg->backend,
        .workload = sb_workload_find(cfg->workload),
        .placement = &placement,
        .job = job,
    };
    const struct sb_strategy_ops *ops = cfg->strategy_ops;
    if (!env.be || !env.workload || !ops)
        return sb_error(SB_ERR_INTERNAL, "harness: unvalidated configuration");
    int threads = blas_threads(cfg, job);
    if (env.be->set_threads) env.be->set_threads(threads);

    struct sb_run_record rec = {0};
    struct sb_strategy s = {.ops = ops, .env = &env};
    struct sb_mllog ml;
    sb_mllog_init(&ml, job->rank == 0 && cfg->mllog_path[0]);
    SB_MLLOG_INIT(&ml, cfg, job->size, data->train.n, data->test.n);
    struct sb_loop L = {.cfg = cfg, .data = data, .job = job, .s = &s, .rec = &rec, .ml = &ml};
    record_start(&rec, cfg, job, argc, argv);
    choose_wait(cfg, job, threads, &rec);
    int tracing = cfg->trace_path[0] != '\0';

    int steps_per_epoch = sb_steps_per_epoch(data->train.n, rec.global_batch);
    long total = (long)steps_per_epoch * cfg->epochs;
    if (cfg->max_steps && cfg->max_steps < total) total = cfg->max_steps;
    sb_status st = loop_alloc(&L, total);
    if (!st) st = sb_slow_rank_hook(job->rank, job->size, &L.slow_ms);
    if (!st && tracing) st = sb_trace_start(job, 0);
    if (!st) st = sb_strategy_place(ops, cfg, job->local_rank, job->local_size, &placement);
    if (!st) st = ops->init(&s);
    if (!st) st = probe_links(&L);
    if (!st) st = run_training(&L, steps_per_epoch);
    if (!st) st = sb_loop_cross_rank_stats(&L);
    if (!st) st = sb_loop_save_params(&L);
    if (!st && job->rank == 0) st = sb_loop_rank0_outputs(&L);
    /* After a timeout or a signal MPI may still write buffers the strategy
     * owns: leave them allocated, the process is ending. */
    if (!sb_watchdog_abandoned()) {
        ops->destroy(&s);
        /* The GPU context this thread used (stream, cuBLAS handle, scratch):
         * every strategy but mirrored steps its replica on this thread
         * (mirrored's replica threads release their own contexts,
         * strategies/shared/mirrored_device.c); a no-op on cpu. */
        sb_cuda_release_thread();
    }
    if (!st && tracing) st = sb_loop_write_trace(&L);
    sb_trace_stop();
    if (st) sb_loop_remove_outputs(&L);
    sb_mllog_free(&ml);
    loop_free(&L);
    sb_placement_free(&placement);
    return st;
}
