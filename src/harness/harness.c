/* The training loop; see harness.h. */
#include "harness/harness.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda.h"
#include "core/atomic_file.h"
#include "comm/flight.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/interrupt.h"
#include "core/nvtx.h"
#include "core/stats.h"
#include "data/sampler.h"
#include "harness/consistency.h"
#include "job/gather.h"
#include "job/probe.h"
#include "harness/rank_stats.h"
#include "harness/run_noise.h"
#include "harness/divergence.h"
#include "harness/run_warnings.h"
#include "harness/straggler.h"
#include "report/mllog.h"
#include "report/report.h"
#include "strategies/strategy.h"
#include "trace/trace.h"

/* Per-step timings kept for the report (rank 0's view). */
struct timings {
    double *step_ms;
    double *phase_ms[SB_PHASE_COUNT];
    size_t n, cap;
};

static void timings_free(struct timings *t)
{
    free(t->step_ms);
    for (int p = 0; p < SB_PHASE_COUNT; p++) free(t->phase_ms[p]);
}

static sb_status timings_alloc(struct timings *t, size_t cap)
{
    memset(t, 0, sizeof *t);
    t->cap = cap;
    size_t bytes = (cap ? cap : 1) * sizeof(double);
    if (!(t->step_ms = malloc(bytes))) return sb_error(SB_ERR_NOMEM, "harness: out of memory");
    for (int p = 0; p < SB_PHASE_COUNT; p++)
        if (!(t->phase_ms[p] = malloc(bytes)))
            return sb_error(SB_ERR_NOMEM, "harness: out of memory");
    return SB_OK;
}

static void timings_add(struct timings *t, double step_ms, const struct sb_step_result *r)
{
    if (t->n == t->cap) return;
    t->step_ms[t->n] = step_ms;
    for (int p = 0; p < SB_PHASE_COUNT; p++) t->phase_ms[p][t->n] = r->phase_ms[p];
    t->n++;
}

/* BLAS threads per process: --threads, else the cores this process may run
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

struct loop {
    const struct sb_config *cfg;
    const struct sb_mnist *data;
    struct sb_job *job;
    struct sb_strategy *s;
    struct sb_run_record *rec;
    struct timings t;
    int32_t *perm;
    double *loss_sums;   /* (2 + world size): loss sum, samples, per rank first bad step + 1 */
    int wrote_params;    /* this run wrote --save-params (removed if a later output fails) */
    int wrote_report;    /* this run wrote --report (likewise) */
    int wrote_mllog;     /* this run wrote --mllog (likewise) */
    struct sb_noise_sample noise_start, noise_end;
    struct sb_mllog *ml;  /* --mllog events (rank 0; a no-op otherwise) */
    double slow_ms;       /* STRATBENCH_TEST_SLOW_RANK: extra compute of this rank per step */
};

/* Sums the epoch's loss across ranks (every rank gets the same sums, so all
 * agree) and ends training when it is NaN or infinite. loss[0..1] = this
 * rank's loss sum and samples; bad_step = this rank's first step whose loss
 * was not finite, or -1 (replicas read their loss once per epoch, on its
 * last step or the --max-steps step, so that is the step found). Each rank reports its bad step in its own slot of
 * the reduced vector, so every rank learns the earliest one. Errors:
 * SB_ERR_DIVERGED on every rank ("training diverged at step N: loss is nan;
 * lower --lr"), or the reduction's status. */
static sb_status reduce_loss(struct loop *L, double loss[2], long bad_step)
{
    int n = 2 + L->job->size;
    double *v = L->loss_sums;
    memset(v, 0, (size_t)n * sizeof *v);
    v[0] = loss[0];
    v[1] = loss[1];
    v[2 + L->job->rank] = bad_step >= 0 ? (double)bad_step + 1.0 : 0.0;
    SB_TRY(sb_strategy_reduce_sum(L->s, v, n));
    loss[0] = v[0];
    loss[1] = v[1];
    long first = -1;
    for (int r = 0; r < L->job->size; r++)
        if (v[2 + r] > 0 && (first < 0 || (long)v[2 + r] - 1 < first)) first = (long)v[2 + r] - 1;
    if (isfinite(loss[0]) && first < 0) return SB_OK;
    if (first < 0) first = bad_step; /* the sum overflowed: every step was finite */
    return sb_error(SB_ERR_DIVERGED, "training diverged at step %ld: loss is %s; lower --lr",
                    first, isnan(loss[0]) ? "nan" : "infinite");
}


/* One step of the loop: the warm-up's end (the counters until then kept
 * apart, so the report shows the initial broadcast), the interrupt check,
 * the test-only slow rank (STRATBENCH_TEST_SLOW_RANK, counted as data
 * time) and the strategy's step on `batch`, timed: *step_ms its wall
 * time. */
static sb_status timed_step(struct loop *L, long step, const int32_t *batch,
                            struct sb_step_result *r, double *step_ms)
{
    if (step == L->cfg->warmup_steps) {
        int ranks;
        sb_strategy_comm_counters(L->s, L->rec->comm_before, &ranks);
        sb_strategy_reset_comm_counters(L->s);
    }
    if (sb_interrupted()) return sb_error(SB_ERR_INTERRUPTED, "interrupted");
    sb_flight_set_step(step);
    memset(r, 0, sizeof *r);
    sb_nvtx_push("step", SB_NVTX_STEP, (uint64_t)step);
    double s0 = sb_now_s();
    if (L->slow_ms > 0.0) sb_slow_rank_delay(s0, L->slow_ms);
    double slow_ms = 1e3 * (sb_now_s() - s0);
    sb_status st = L->s->ops->step(L->s, step, batch, r);
    *step_ms = 1e3 * (sb_now_s() - s0);
    if (L->slow_ms > 0.0) r->phase_ms[SB_PHASE_DATA] += slow_ms;
    sb_nvtx_pop();
    return st;
}

/* The steps of one epoch from *step (advanced), ending at --max-steps,
 * with the --check-every replica checks (not training: their time is taken
 * out of the epoch's). Adds to loss[0..1] (loss sum, samples), sets
 * *bad_step to this rank's first step whose loss was not finite (if
 * none yet) and *seconds to the epoch's training time. */
static sb_status epoch_steps(struct loop *L, long *step, double loss[2], long *bad_step,
                             double *seconds)
{
    const struct sb_config *cfg = L->cfg;
    int global = sb_config_global_batch(cfg);
    int steps_per_epoch = sb_steps_per_epoch(L->data->train.n, global);
    double t0 = sb_now_s();
    for (int i = 0; i < steps_per_epoch; i++, (*step)++) {
        long s = *step;
        if (cfg->max_steps && s >= cfg->max_steps) break;
        struct sb_step_result r;
        double step_ms = 0.0;
        SB_TRY(timed_step(L, s, L->perm + (size_t)i * global, &r, &step_ms));
        if (s >= cfg->warmup_steps) timings_add(&L->t, step_ms, &r);
        if (*bad_step < 0 && !isfinite(r.loss_sum)) *bad_step = s;
        loss[0] += r.loss_sum;
        loss[1] += (double)r.samples;
        if (cfg->check_every && (s + 1) % cfg->check_every == 0) {
            double c0 = sb_now_s();
            sb_status cst = sb_consistency_check(L->s, L->job, s + 1, &L->rec->replica_check);
            t0 += sb_now_s() - c0;
            SB_TRY(cst);
        }
    }
    *seconds = sb_now_s() - t0;
    return SB_OK;
}

/* Evaluates after epoch `epoch` and records it (rec->epochs, the totals,
 * time to accuracy: MLPerf's time-to-train, wall time from t_start until
 * the quality target is first met, evaluations included); rank 0 prints
 * the epoch's line. loss[0..1]: the summed loss and samples of every rank;
 * seconds: the epoch's training time. */
static sb_status evaluate_epoch(struct loop *L, int epoch, const double loss[2], double seconds,
                                double t_start)
{
    const struct sb_config *cfg = L->cfg;
    struct sb_run_record *rec = L->rec;
    SB_MLLOG_EVAL_START(L->ml, epoch);
    double e0 = sb_now_s();
    sb_nvtx_push("evaluate", SB_NVTX_EVAL, (uint64_t)epoch);
    double accuracy = 0.0;
    sb_status st = L->s->ops->evaluate(L->s, &accuracy);
    sb_nvtx_pop();
    if (st) return st;
    double e1 = sb_now_s();
    SB_MLLOG_EVAL_STOP(L->ml, epoch, accuracy);

    struct sb_epoch_record *e = &rec->epochs[rec->n_epochs++];
    e->epoch = epoch;
    e->train_loss = loss[1] > 0 ? loss[0] / loss[1] : 0.0;
    e->test_accuracy = accuracy;
    e->seconds = seconds;
    e->eval_seconds = e1 - e0;
    e->samples_per_s = sb_samples_per_s(loss[1], seconds);
    rec->train_seconds += seconds;
    rec->samples_trained += loss[1];
    if (rec->time_to_accuracy_s < 0 && accuracy >= cfg->target_accuracy)
        rec->time_to_accuracy_s = e1 - t_start;
    if (L->job->rank == 0) {
        printf("epoch %3d/%d  train_loss %.4f  test_accuracy %6.2f%%  %7.2f s  "
               "%9.0f samples/s\n",
               epoch, cfg->epochs, e->train_loss, 100.0 * accuracy, seconds, e->samples_per_s);
        fflush(stdout);
    }
    return SB_OK;
}

/* Runs every epoch, filling rec->epochs and the timings. */
static sb_status train_epochs(struct loop *L)
{
    const struct sb_config *cfg = L->cfg;
    struct sb_run_record *rec = L->rec;
    long step = 0;
    double t_start = sb_now_s();
    rec->time_to_accuracy_s = -1.0;
    sb_noise_sample_now(&L->noise_start);

    for (int epoch = 1; epoch <= cfg->epochs; epoch++) {
        sb_nvtx_push("epoch", SB_NVTX_EPOCH, (uint64_t)epoch);
        sb_epoch_permutation(cfg->seed, epoch, L->perm, L->data->train.n);
        double loss[2] = {0.0, 0.0}, seconds = 0.0; /* loss sum, samples */
        long bad_step = -1; /* first step of this rank with a non-finite loss */
        SB_MLLOG_EPOCH_START(L->ml, epoch);
        sb_status st = epoch_steps(L, &step, loss, &bad_step, &seconds);
        if (!st) {
            SB_MLLOG_EPOCH_STOP(L->ml, epoch);
            st = reduce_loss(L, loss, bad_step);
        }
        if (!st) st = evaluate_epoch(L, epoch, loss, seconds, t_start);
        sb_nvtx_pop(); /* the epoch's range */
        if (st) return st;
        if (cfg->max_steps && step >= cfg->max_steps) break;
    }
    sb_noise_sample_now(&L->noise_end);
    rec->steps_total = step;
    if (rec->n_epochs) rec->final_test_accuracy = rec->epochs[rec->n_epochs - 1].test_accuracy;
    return SB_OK;
}

/* Every rank's memory ledger (the strategy's, with this process's peak
 * RSS and, on a device, peak device memory) to rank 0's record
 * (collective). */
static sb_status gather_memory(struct loop *L)
{
    struct sb_job *job = L->job;
    struct sb_memory_entry mine[SB_MEMORY_ENTRIES_MAX];
    int k = sb_strategy_memory(L->s, mine, SB_MEMORY_ENTRIES_MAX);
    double rss = (double)sb_peak_rss_bytes(), device = -1.0;
#ifdef SB_HAVE_CUDA
    if (!L->s->env->be->host_memory) device = (double)sb_cuda_memory_peak_bytes();
#endif
    for (int i = 0; i < k; i++) {
        mine[i].rank = job->rank;
        mine[i].peak_rss_bytes = rss;
        mine[i].peak_device_bytes = device;
    }
    if (!job->mpi || job->size <= 1) {
        struct sb_memory_entry *all = malloc((k ? (size_t)k : 1) * sizeof *all);
        if (!all) return sb_error(SB_ERR_NOMEM, "harness: out of memory");
        memcpy(all, mine, (size_t)k * sizeof *all);
        L->rec->memory = all;
        L->rec->n_memory = k;
        return SB_OK;
    }
    char *bytes = NULL;
    long long *counts = NULL;
    SB_TRY(sb_gather_bytes_to_root(job, mine, (long long)((size_t)k * sizeof *mine), &bytes,
                                   &counts));
    if (job->rank == 0) {
        long long total = 0;
        for (int r = 0; r < job->size; r++) total += counts[r];
        L->rec->memory = (struct sb_memory_entry *)(void *)bytes;
        L->rec->n_memory = (int)(total / (long long)sizeof *mine);
    }
    free(counts);
    return SB_OK;
}

/* The compute threads on this host: its processes (MPI) or replica threads
 * (mirrored, single) times the BLAS threads of each. */
static long compute_threads(const struct loop *L, const struct sb_job *job)
{
    long workers = job->mpi ? (job->local_size > 0 ? job->local_size : 1) : L->cfg->replicas;
    return workers * (L->rec->blas_threads > 0 ? L->rec->blas_threads : 1);
}

/* Every rank's per-step timings to rank 0 (collective): derives the wait
 * phase (rank_stats.h), writes rank 0's back into its own timings, and the
 * spread across ranks into the record. */
static sb_status cross_rank_stats(struct loop *L)
{
    struct sb_job *job = L->job;
    struct sb_rank_timings all;
    SB_TRY(sb_rank_timings_gather(job, L->t.step_ms, L->t.phase_ms, L->t.n, &all));
    sb_status st = SB_OK;
    if (job->rank == 0) {
        st = sb_rank_timings_fill_wait(&all);
        if (!st && all.n_ranks > 1)
            memcpy(L->t.phase_ms[SB_PHASE_WAIT],
                   sb_rank_timings_at(&all, 0, SB_RANK_FIELD_PHASE(SB_PHASE_WAIT)),
                   all.n_steps * sizeof(double));
        if (!st) st = sb_rank_timings_spread(&all, &L->rec->step_by_rank, L->rec->phases_by_rank);
        if (!st)
            st = sb_stragglers(&all, L->t.step_ms, L->t.n,
                               compute_threads(L, job) > sysconf(_SC_NPROCESSORS_ONLN),
                               &L->rec->stragglers);
    }
    sb_rank_timings_free(&all);
    SB_TRY(st);
    struct sb_rank_noise mine;
    sb_noise_delta(&L->noise_start, &L->noise_end, (double)sysconf(_SC_CLK_TCK), &mine);
    struct sb_rank_noise *noise = NULL;
    SB_TRY(sb_rank_noise_gather(job, &mine, &noise));
    L->rec->noise_by_rank = noise;
    return gather_memory(L);
}

/* --save-params: every rank reads the parameters (collective), rank 0
 * writes them. */
static sb_status save_params(struct loop *L)
{
    const struct sb_config *cfg = L->cfg;
    if (!cfg->save_params_path[0]) return SB_OK;
    size_t n = L->rec->n_params;
    float *host = malloc(n * sizeof *host);
    if (!host) return sb_error(SB_ERR_NOMEM, "harness: out of memory");
    sb_status st = sb_strategy_read_params(L->s, host);
    /* Raw little-endian float32 (x86 and Arm hosts are little-endian). */
    if (!st && L->job->rank == 0) {
        st = sb_write_bytes_atomic("parameters", cfg->save_params_path, host, n * sizeof *host);
        L->wrote_params = !st;
    }
    free(host);
    return st;
}

/* The strategy's α–β prediction of its communication per step (its
 * comm_model op) from the probed links, into rec->comm_model; none without
 * probed links or without the op. Overlap windows use rank 0's median
 * backward phase over the measured steps (0 without measured steps). */
static void predict_comm(const struct sb_strategy_ops *ops, struct sb_run_record *rec)
{
    rec->has_comm_model = 0;
    if (!rec->link.done || !ops->comm_model) return;
    struct sb_summary backward;
    double backward_ms = 0.0;
    if (rec->phase_ms[SB_PHASE_BACKWARD] && rec->n_measured > 0 &&
        sb_summarize(rec->phase_ms[SB_PHASE_BACKWARD], rec->n_measured, &backward) == SB_OK)
        backward_ms = backward.median;
    struct sb_comm_model_query q = {
        .link = {rec->link.alpha_s, rec->link.bandwidth_Bps, 0.0},
        .replicas = rec->cfg->replicas,
        .bytes = (double)rec->n_params * sizeof(float),
        .backward_s = 1e-3 * backward_ms,
        .cfg = rec->cfg,
        .details = &rec->details,
    };
    rec->has_comm_model = ops->comm_model(&q, &rec->comm_model, 1) == 1;
}

/* The trace track of `rank`: the strategy's name for it (its trace_label
 * op, e.g. central's servers), NULL ("rank N") otherwise. */
static const char *trace_label(const struct sb_config *cfg, int rank)
{
    const struct sb_strategy_ops *ops = cfg->strategy_ops;
    return ops && ops->trace_label ? ops->trace_label(cfg, rank) : NULL;
}

/* Rank 0: fills and prints the run's warnings (run_warnings.h): the
 * compute threads on this host are its processes (MPI) or replica threads
 * (mirrored, single) times the BLAS threads of each. */
static void warn_if_misleading(struct loop *L, const struct sb_job *job)
{
    struct sb_summary s;
    double stall = 0;
    if (L->t.n > 0 && sb_summarize(L->t.step_ms, L->t.n, &s) == SB_OK)
        stall = sb_stall_fraction(L->t.step_ms, L->t.n, s.median);
    sb_run_warnings_check(L->rec, compute_threads(L, job), sysconf(_SC_NPROCESSORS_ONLN), stall);
    sb_divergence_check(L->rec, SB_MNIST_CLASSES,
                        sb_steps_per_epoch(L->data->train.n, sb_config_global_batch(L->cfg)));
    sb_run_warnings_print(L->rec);
}

/* Rank 0's report after training. */
static sb_status write_outputs(struct loop *L)
{
    const struct sb_config *cfg = L->cfg;
    struct sb_run_record *rec = L->rec;
    if (!cfg->report_path[0]) return SB_OK;
    rec->step_ms = L->t.step_ms;
    for (int p = 0; p < SB_PHASE_COUNT; p++) rec->phase_ms[p] = L->t.phase_ms[p];
    rec->n_measured = L->t.n;
    sb_strategy_comm_counters(L->s, rec->comm, &rec->comm_ranks);
    /* Which all-reduce algorithms ran, and their stages (comm.allreduce.algorithms). */
    sb_strategy_comm_algorithms(L->s, rec->allreduce_by_algo, rec->allreduce_algo_names,
                                rec->comm_stages, &rec->n_comm_stages);
    if (L->s->ops->describe) L->s->ops->describe(L->s, (long)L->t.n, &rec->details);
    sb_strategy_report_values(L->s->ops, cfg, &rec->details);
    predict_comm(L->s->ops, rec);
    rec->peak_rss_bytes = sb_peak_rss_bytes();
    SB_TRY(sb_report_write(cfg->report_path, rec));
    L->wrote_report = 1;
    return SB_OK;
}

/* A run that fails leaves none of its outputs: removes what this run
 * already wrote (the writers are atomic, so a failed one left nothing). */
static void remove_outputs(const struct loop *L)
{
    if (L->wrote_params) unlink(L->cfg->save_params_path);
    if (L->wrote_report) unlink(L->cfg->report_path);
    if (L->wrote_mllog) unlink(L->cfg->mllog_path);
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
    rec->global_batch = sb_config_global_batch(cfg);
    rec->effective_lr = sb_config_effective_lr(cfg);
    sb_utc_now(rec->start_utc);
}

/* The loop's buffers: the timings of the measured steps (total minus the
 * warm-up), the epoch records, the data order and the loss sums. */
static sb_status loop_alloc(struct loop *L, long total)
{
    const struct sb_config *cfg = L->cfg;
    sb_status st = timings_alloc(&L->t, total > cfg->warmup_steps
                                            ? (size_t)(total - cfg->warmup_steps) : 0);
    L->rec->epochs = calloc((size_t)cfg->epochs, sizeof *L->rec->epochs);
    L->perm = malloc((size_t)L->data->train.n * sizeof *L->perm);
    L->loss_sums = calloc((size_t)L->job->size + 2, sizeof *L->loss_sums);
    if (!st && (!L->rec->epochs || !L->perm || !L->loss_sums))
        st = sb_error(SB_ERR_NOMEM, "harness: out of memory");
    return st;
}

/* Frees what loop_alloc and the run's gathers made. */
static void loop_free(struct loop *L)
{
    timings_free(&L->t);
    free(L->rec->epochs);
    free((void *)L->rec->noise_by_rank);
    sb_straggler_free(&L->rec->stragglers);
    free((void *)L->rec->memory);
    free(L->perm);
    free(L->loss_sums);
}

/* --probe-links, after init (connections made by the broadcast) and before
 * any step: the links' α and B into rec->link (job/probe.h); rank 0 prints
 * them. A job of one rank, or a strategy without ranks, is not probed. */
static sb_status probe_links(struct loop *L)
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
    return SB_OK;
}

/* Trains the initialised strategy: rank 0 prints the run's line, every
 * epoch runs, and the run ends with the replica consistency check
 * (collective). */
static sb_status run_training(struct loop *L, int steps_per_epoch)
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
    SB_TRY(train_epochs(L));
    SB_TRY(sb_consistency_check(L->s, L->job, rec->steps_total, &rec->replica_check));
    SB_MLLOG_RUN_STOP(L->ml, rec->time_to_accuracy_s >= 0);
    return SB_OK;
}

/* Rank 0's outputs after training: the run's warnings, the report, --mllog
 * and the final line. */
static sb_status rank0_outputs(struct loop *L)
{
    const struct sb_config *cfg = L->cfg;
    const struct sb_run_record *rec = L->rec;
    warn_if_misleading(L, L->job);
    SB_TRY(write_outputs(L));
    if (cfg->mllog_path[0]) {
        SB_TRY(sb_mllog_write(L->ml, cfg->mllog_path));
        L->wrote_mllog = 1;
    }
    printf("final test_accuracy %.2f%%, time to %.2f%%: ", 100.0 * rec->final_test_accuracy,
           100.0 * cfg->target_accuracy);
    if (rec->time_to_accuracy_s >= 0) printf("%.2f s", rec->time_to_accuracy_s);
    else printf("not reached");
    if (cfg->report_path[0]) printf(", report %s", cfg->report_path);
    printf("\n");
    return SB_OK;
}

/* --trace: every rank's spans to rank 0's file, after the strategy is
 * destroyed (its replica threads have joined, their spans are final). */
static sb_status write_trace(struct loop *L)
{
    const struct sb_config *cfg = L->cfg;
    int rank0 = L->job->rank == 0;
    sb_trace_set_process_label(trace_label(cfg, L->job->rank));
    SB_TRY(sb_trace_write(cfg->trace_path, L->job));
    if (rank0 && sb_trace_truncated())
        printf("trace %s (truncated: a thread reached %d events or the step limit; later "
               "spans are missing, otherData.truncated is true)\n", cfg->trace_path,
               SB_TRACE_MAX_EVENTS_PER_THREAD);
    else if (rank0)
        printf("trace %s\n", cfg->trace_path);
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
    if (env.be->set_threads) env.be->set_threads(blas_threads(cfg, job));

    struct sb_run_record rec = {0};
    struct sb_strategy s = {.ops = ops, .env = &env};
    struct sb_mllog ml;
    sb_mllog_init(&ml, job->rank == 0 && cfg->mllog_path[0]);
    SB_MLLOG_INIT(&ml, cfg, job->size, data->train.n, data->test.n);
    struct loop L = {.cfg = cfg, .data = data, .job = job, .s = &s, .rec = &rec, .ml = &ml};
    record_start(&rec, cfg, job, argc, argv);
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
    if (!st) st = cross_rank_stats(&L);
    if (!st) st = save_params(&L);
    if (!st && job->rank == 0) st = rank0_outputs(&L);
    /* After a timeout or a signal MPI may still write buffers the strategy
     * owns: leave them allocated, the process is ending. */
    if (!sb_watchdog_abandoned()) {
        ops->destroy(&s);
        /* The GPU context this thread used (stream, cuBLAS handle, scratch):
         * every strategy but mirrored steps its replica on this thread
         * (mirrored's replica threads release their own contexts,
         * strategies/mirrored_device.c); a no-op on cpu. */
        sb_cuda_release_thread();
    }
    if (!st && tracing) st = write_trace(&L);
    sb_trace_stop();
    if (st) remove_outputs(&L);
    sb_mllog_free(&ml);
    loop_free(&L);
    sb_placement_free(&placement);
    return st;
}
