/* The step loop: epochs of seeded global batches, each step timed, the
 * loss summed across ranks, evaluation after each epoch; see loop.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/flight.h"
#include "core/clock.h"
#include "core/interrupt.h"
#include "core/nvtx.h"
#include "data/sampler.h"
#include "harness/consistency.h"
#include "harness/loop.h"
#include "harness/straggler.h"

void sb_loop_timings_free(struct sb_loop_timings *t)
{
    free(t->step_ms);
    for (int p = 0; p < SB_PHASE_COUNT; p++) free(t->phase_ms[p]);
}

sb_status sb_loop_timings_alloc(struct sb_loop_timings *t, size_t cap)
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

/* Keeps one measured step's wall time and phases (nothing once full). */
static void timings_add(struct sb_loop_timings *t, double step_ms,
                        const struct sb_step_result *r)
{
    if (t->n == t->cap) return;
    t->step_ms[t->n] = step_ms;
    for (int p = 0; p < SB_PHASE_COUNT; p++) t->phase_ms[p][t->n] = r->phase_ms[p];
    t->compute_wall_s += r->compute_wall_s;
    t->compute_cpu_s += r->compute_cpu_s;
    t->n++;
}

/* Sums the epoch's loss across ranks (every rank gets the same sums, so all
 * agree) and ends training when it is NaN or infinite. loss[0..1] = this
 * rank's loss sum and samples; bad_step = this rank's first step whose loss
 * was not finite, or -1 (replicas read their loss once per epoch, on its
 * last step or the --max-steps step, so that is the step found). Each rank
 * reports its bad step in its own slot of the reduced vector, so every rank
 * learns the earliest one. Errors:
 * SB_ERR_DIVERGED on every rank ("training diverged at step N: loss is nan;
 * lower --lr"), or the reduction's status. */
static sb_status reduce_loss(struct sb_loop *L, double loss[2], long bad_step)
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
static sb_status timed_step(struct sb_loop *L, long step, const int32_t *batch,
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
static sb_status epoch_steps(struct sb_loop *L, long *step, double loss[2], long *bad_step,
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
        /* the strategy's own measurement collectives: not training, so
         * outside the step's time and the epoch's (as the check below),
         * but for the wait for a later rank's end, which is the step's */
        double a0 = sb_now_s();
        sb_status ast = sb_strategy_after_step(L->s, s, &r);
        double after_s = sb_now_s() - a0, end_wait_s = 1e-3 * r.end_wait_ms;
        t0 += after_s - (end_wait_s < after_s ? end_wait_s : after_s);
        step_ms += r.end_wait_ms;
        r.phase_ms[SB_PHASE_WAIT] += r.end_wait_ms;
        SB_TRY(ast);
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
static sb_status evaluate_epoch(struct sb_loop *L, int epoch, const double loss[2], double seconds,
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
    SB_MLLOG_EVAL_STOP(L->ml, epoch, accuracy, rec->samples_trained + loss[1]);

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

sb_status sb_loop_train_epochs(struct sb_loop *L)
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
