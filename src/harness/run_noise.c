/* Involuntary context switches and CPU steal over a run; see run_noise.h. */
#include "harness/run_noise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "job/gather.h"

int sb_proc_stat_cpu_parse(const char *line, double *steal, double *total)
{
    if (strncmp(line, "cpu ", 4) != 0) return -1;
    const char *p = line + 4;
    double sum = 0.0, v[8];
    for (int i = 0; i < 8; i++) {
        char *end;
        unsigned long long x = strtoull(p, &end, 10);
        if (end == p) return -1;
        v[i] = (double)x;
        sum += v[i];
        p = end;
    }
    *steal = v[7];
    *total = sum;
    return 0;
}

/* The runqueue wait of this process's main thread (the one that computes
 * and calls the collectives) so far, s, or -1 when /proc/self/schedstat
 * cannot be read (CONFIG_SCHED_INFO off). Helper threads (MPI's progress
 * threads, idle compute threads) are left out: their waits delay no step. */
static double runqueue_wait_s(void)
{
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (!f) return -1.0;
    unsigned long long run = 0, wait = 0;
    int ok = fscanf(f, "%llu %llu", &run, &wait) == 2;
    fclose(f); /* read-only */
    return ok ? 1e-9 * (double)wait : -1.0;
}

void sb_noise_sample_now(struct sb_noise_sample *out)
{
    out->runqueue_wait_s = runqueue_wait_s();
    struct rusage ru;
    int ok = getrusage(RUSAGE_SELF, &ru) == 0;
    out->nivcsw = ok ? (double)ru.ru_nivcsw : 0.0;
    out->cpu_s = ok ? (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                          (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec
                    : 0.0;
    out->steal_ticks = out->total_ticks = -1.0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f) &&
        sb_proc_stat_cpu_parse(line, &out->steal_ticks, &out->total_ticks) != 0)
        out->steal_ticks = out->total_ticks = -1.0;
    fclose(f); /* read-only */
}

void sb_noise_delta(const struct sb_noise_sample *start, const struct sb_noise_sample *end,
                    double ticks_per_s, struct sb_rank_noise *out)
{
    out->involuntary_context_switches = end->nivcsw - start->nivcsw;
    out->cpu_s = end->cpu_s - start->cpu_s;
    out->runqueue_wait_s = start->runqueue_wait_s >= 0 && end->runqueue_wait_s >= 0
                               ? end->runqueue_wait_s - start->runqueue_wait_s
                               : -1.0;
    out->cpu_steal_s = out->cpu_steal_fraction = -1.0;
    if (start->steal_ticks < 0 || end->steal_ticks < 0 || ticks_per_s <= 0) return;
    double steal = end->steal_ticks - start->steal_ticks;
    double total = end->total_ticks - start->total_ticks;
    out->cpu_steal_s = steal / ticks_per_s;
    out->cpu_steal_fraction = total > 0 ? steal / total : 0.0;
}

sb_status sb_rank_noise_gather(const struct sb_job *job, const struct sb_rank_noise *mine,
                               struct sb_rank_noise **all)
{
    *all = NULL;
    if (!job || !job->mpi || job->size <= 1) {
        if (!(*all = malloc(sizeof **all))) return sb_error(SB_ERR_NOMEM, "noise: out of memory");
        **all = *mine;
        return SB_OK;
    }
    char *bytes = NULL;
    long long *counts = NULL;
    SB_TRY(sb_gather_bytes_to_root(job, mine, (long long)sizeof *mine, &bytes, &counts));
    free(counts);
    *all = (struct sb_rank_noise *)bytes; /* rank 0: size blocks of sizeof *mine */
    return SB_OK;
}
