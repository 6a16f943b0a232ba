/* Cross-rank step and phase timings; see rank_stats.h. */
#include "harness/rank_stats.h"

#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "job/gather.h"

void sb_rank_timings_free(struct sb_rank_timings *t)
{
    free(t->ms);
    memset(t, 0, sizeof *t);
}

/* This process's fields as one block, [field][step]; NULL on no memory. */
static double *pack_local(const double *step_ms, double *const phase_ms[SB_PHASE_COUNT],
                          size_t n)
{
    double *b = calloc((n ? n : 1) * SB_RANK_FIELDS, sizeof *b);
    if (!b) return NULL;
    if (step_ms) memcpy(b, step_ms, n * sizeof *b);
    for (int p = 0; p < SB_PHASE_COUNT; p++)
        if (phase_ms[p]) memcpy(b + (size_t)SB_RANK_FIELD_PHASE(p) * n, phase_ms[p], n * sizeof *b);
    return b;
}

sb_status sb_rank_timings_gather(const struct sb_job *job, const double *step_ms, double *const phase_ms[SB_PHASE_COUNT],
                                 size_t n, struct sb_rank_timings *out)
{
    memset(out, 0, sizeof *out);
    double *mine = pack_local(step_ms, phase_ms, n);
    int rank = job ? job->rank : 0, size = job ? job->size : 1;
    if (!job || !job->mpi || size <= 1) {
        if (!mine) return sb_error(SB_ERR_NOMEM, "rank timings: out of memory");
        out->n_ranks = 1;
        out->n_steps = n;
        out->ms = mine;
        return SB_OK;
    }
    long long bytes = (long long)(n * SB_RANK_FIELDS * sizeof(double));
    if (!mine) {
        sb_error(SB_ERR_NOMEM, "rank timings: out of memory");
        bytes = -1;
    }
    char *all = NULL;
    long long *counts = NULL;
    sb_status st = sb_gather_bytes_to_root(job, mine, bytes, &all, &counts);
    free(mine);
    if (st || rank != 0) return st;

    /* Keep the first `keep` steps of every rank (ranks run the same steps,
     * so the counts agree; the minimum guards against a mismatch). */
    size_t keep = (size_t)-1;
    for (int r = 0; r < size; r++) {
        size_t nr = (size_t)counts[r] / (SB_RANK_FIELDS * sizeof(double));
        if (nr < keep) keep = nr;
    }
    out->ms = malloc((keep ? keep : 1) * SB_RANK_FIELDS * (size_t)size * sizeof *out->ms);
    if (!out->ms) {
        free(all);
        free(counts);
        return sb_error(SB_ERR_NOMEM, "rank timings: out of memory");
    }
    out->n_ranks = size;
    out->n_steps = keep;
    const char *p = all;
    for (int r = 0; r < size; r++) {
        size_t nr = (size_t)counts[r] / (SB_RANK_FIELDS * sizeof(double));
        for (int f = 0; f < SB_RANK_FIELDS; f++)
            memcpy(sb_rank_timings_at(out, r, f), p + (size_t)f * nr * sizeof(double),
                   keep * sizeof(double));
        p += counts[r];
    }
    free(all);
    free(counts);
    return SB_OK;
}

sb_status sb_rank_timings_fill_wait(struct sb_rank_timings *t)
{
    if (t->n_ranks <= 1) return SB_OK;
    double *compute = malloc((size_t)t->n_ranks * sizeof *compute);
    if (!compute) return sb_error(SB_ERR_NOMEM, "rank timings: out of memory");
    double phases[SB_PHASE_COUNT];
    for (size_t s = 0; s < t->n_steps; s++) {
        for (int r = 0; r < t->n_ranks; r++) {
            for (int p = 0; p < SB_PHASE_COUNT; p++)
                phases[p] = sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(p))[s];
            compute[r] = sb_phase_compute_ms(phases);
        }
        for (int r = 0; r < t->n_ranks; r++)
            sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(SB_PHASE_WAIT))[s] =
                sb_phase_wait_ms(compute, t->n_ranks, r);
    }
    free(compute);
    return SB_OK;
}

/* The spread of field f across ranks, medians[] being scratch (n_ranks). */
static sb_status spread_of(const struct sb_rank_timings *t, int f, double *medians,
                           struct sb_rank_spread *out)
{
    memset(out, 0, sizeof *out);
    out->ranks = t->n_ranks;
    for (int r = 0; r < t->n_ranks; r++) {
        struct sb_summary s;
        SB_TRY(sb_summarize(sb_rank_timings_at(t, r, f), t->n_steps, &s));
        medians[r] = s.median;
        if (r == 0 || s.median > medians[out->slowest_rank]) out->slowest_rank = r;
    }
    struct sb_summary across;
    SB_TRY(sb_summarize(medians, (size_t)t->n_ranks, &across));
    out->min = across.min;
    out->median = across.median;
    out->max = across.max;
    out->skew = across.max - across.min;
    return SB_OK;
}

sb_status sb_rank_timings_spread(const struct sb_rank_timings *t, struct sb_rank_spread *step,
                                 struct sb_rank_spread phases[SB_PHASE_COUNT])
{
    if (t->n_ranks <= 0) return sb_error(SB_ERR_INTERNAL, "rank timings: no ranks");
    double *medians = malloc((size_t)t->n_ranks * sizeof *medians);
    if (!medians) return sb_error(SB_ERR_NOMEM, "rank timings: out of memory");
    sb_status st = spread_of(t, SB_RANK_FIELD_STEP, medians, step);
    for (int p = 0; !st && p < SB_PHASE_COUNT; p++)
        st = spread_of(t, SB_RANK_FIELD_PHASE(p), medians, &phases[p]);
    free(medians);
    return st;
}

void sb_straggler_free(struct sb_straggler *s)
{
    free(s->by_rank);
    free(s->hosts);
    memset(s, 0, sizeof *s);
}

/* The median of v[0..n) (n >= 1). */
static double median_of(const double *v, size_t n)
{
    struct sb_summary s;
    return sb_summarize(v, n, &s) == SB_OK ? s.median : 0.0;
}

/* compute[r * n_steps + s]: rank r's compute at step s. */
static void fill_compute(const struct sb_rank_timings *t, double *compute)
{
    double phases[SB_PHASE_COUNT];
    for (int r = 0; r < t->n_ranks; r++)
        for (size_t s = 0; s < t->n_steps; s++) {
            for (int p = 0; p < SB_PHASE_COUNT; p++)
                phases[p] = sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(p))[s];
            compute[(size_t)r * t->n_steps + s] = sb_phase_compute_ms(phases);
        }
}

/* Whether a rank computed at all in its n steps: central's servers do not
 * (no data, forward or backward); they wait for the workers whether or not
 * one of them straggles. */
static int computes(const double *compute, size_t n)
{
    for (size_t s = 0; s < n; s++)
        if (compute[s] > 0) return 1;
    return 0;
}

sb_status sb_rank_timings_straggler(const struct sb_rank_timings *t, struct sb_straggler *out)
{
    memset(out, 0, sizeof *out);
    if (t->n_ranks <= 1 || t->n_steps == 0) return SB_OK;
    size_t n = t->n_steps;
    double *compute = malloc((size_t)t->n_ranks * n * sizeof *compute);
    double *scratch = malloc(n * sizeof *scratch);
    double *excess = malloc(n * sizeof *excess);
    out->by_rank = calloc((size_t)t->n_ranks, sizeof *out->by_rank);
    if (!compute || !scratch || !excess || !out->by_rank) {
        free(compute);
        free(scratch);
        free(excess);
        sb_straggler_free(out);
        return sb_error(SB_ERR_NOMEM, "rank timings: out of memory");
    }
    fill_compute(t, compute);
    out->ranks = t->n_ranks;
    for (int r = 0; r < t->n_ranks; r++) {
        struct sb_rank_load *l = &out->by_rank[r];
        const double *wait = sb_rank_timings_at(t, r, SB_RANK_FIELD_PHASE(SB_PHASE_WAIT));
        double csum = 0.0, wsum = 0.0;
        for (size_t s = 0; s < n; s++) {
            csum += compute[(size_t)r * n + s];
            wsum += wait[s];
        }
        l->compute_mean = csum / (double)n;
        l->wait_mean = wsum / (double)n;
        memcpy(scratch, compute + (size_t)r * n, n * sizeof *scratch);
        l->compute_median = median_of(scratch, n);
        memcpy(scratch, wait, n * sizeof *scratch);
        l->wait_median = median_of(scratch, n);
        if (r == 0 || l->compute_median > out->by_rank[out->rank].compute_median) out->rank = r;
    }
    int k = out->rank, others_n = 0;
    for (int q = 0; q < t->n_ranks; q++) others_n += q != k && computes(compute + (size_t)q * n, n);
    size_t slowest = 0;
    for (size_t s = 0; s < n && others_n > 0; s++) {
        double others = -1.0, sum = 0.0;
        for (int q = 0; q < t->n_ranks; q++) {
            if (q == k || !computes(compute + (size_t)q * n, n)) continue;
            sum += compute[(size_t)q * n + s];
            if (compute[(size_t)q * n + s] > others) others = compute[(size_t)q * n + s];
        }
        double mine = compute[(size_t)k * n + s];
        /* k the slowest: every other replica q waits mine - compute_q for it */
        excess[s] = mine > others ? mine - sum / others_n : 0.0;
        scratch[s] = others;
        slowest += mine > others;
    }
    if (others_n == 0) { /* one replica (and servers): no one waits for it */
        memset(excess, 0, n * sizeof *excess);
        memset(scratch, 0, n * sizeof *scratch);
    }
    out->cost_ms = median_of(excess, n);
    out->others_compute_ms = median_of(scratch, n);
    out->compute_ms = out->by_rank[k].compute_median;
    out->slowest_fraction = (double)slowest / (double)n;
    free(compute);
    free(scratch);
    free(excess);
    return SB_OK;
}
