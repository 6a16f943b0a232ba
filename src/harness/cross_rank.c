/* The cross-rank accounting after training: every rank's step timings,
 * the derived wait and the stragglers, noise and memory ledgers gathered
 * to rank 0; see loop.h. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda.h"
#include "core/memory.h"
#include "harness/loop.h"
#include "harness/rank_stats.h"
#include "harness/straggler.h"
#include "job/gather.h"

/* Every rank's memory ledger (the strategy's, with this process's peak
 * RSS and, on a device, peak device memory) to rank 0's record
 * (collective). */
static sb_status gather_memory(struct sb_loop *L)
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

long sb_loop_compute_threads(const struct sb_loop *L, const struct sb_job *job)
{
    /* machine_size >= local_size >= 1 (job.c) */
    long workers = job->mpi ? job->machine_size : L->cfg->replicas;
    return workers * (L->rec->blas_threads > 0 ? L->rec->blas_threads : 1);
}

sb_status sb_loop_cross_rank_stats(struct sb_loop *L)
{
    struct sb_job *job = L->job;
    struct sb_rank_timings all;
    SB_TRY(sb_rank_timings_gather(job, L->t.step_ms, L->t.phase_ms, L->t.n, &all));
    sb_status st = SB_OK;
    if (job->rank == 0) {
        /* A strategy that owns its wait and bubble (a pipeline's stages idle
         * for each other by design) keeps what its steps reported: deriving
         * wait from compute would call a stage imbalance a straggler. */
        if (!L->s->ops->owns_wait) st = sb_rank_timings_fill_wait(&all);
        if (!st && !L->s->ops->owns_wait && all.n_ranks > 1)
            memcpy(L->t.phase_ms[SB_PHASE_WAIT],
                   sb_rank_timings_at(&all, 0, SB_RANK_FIELD_PHASE(SB_PHASE_WAIT)),
                   all.n_steps * sizeof(double));
        if (!st) st = sb_rank_timings_spread(&all, &L->rec->step_by_rank, L->rec->phases_by_rank);
        /* Its stages' compute differs by the partition, not by a slow rank. */
        if (!st && !L->s->ops->owns_wait)
            st = sb_stragglers(&all, L->t.step_ms, L->t.n,
                               sb_loop_compute_threads(L, job) > sysconf(_SC_NPROCESSORS_ONLN),
                               &L->rec->stragglers);
    }
    sb_rank_timings_free(&all);
    SB_TRY(st);
    struct sb_rank_noise mine;
    sb_noise_delta(&L->noise_start, &L->noise_end, (double)sysconf(_SC_CLK_TCK), &mine);
    mine.compute_wall_s = L->t.compute_wall_s > 0 ? L->t.compute_wall_s : -1.0;
    mine.compute_cpu_s = L->t.compute_wall_s > 0 ? L->t.compute_cpu_s : -1.0;
    struct sb_rank_noise *noise = NULL;
    SB_TRY(sb_rank_noise_gather(job, &mine, &noise));
    L->rec->noise_by_rank = noise;
    return gather_memory(L);
}
