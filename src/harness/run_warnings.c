/* Oversubscription and noise warnings; see run_warnings.h. */
#include "harness/run_warnings.h"

#include <stdio.h>

#include "job/eager_limit.h"

static void add(struct sb_run_record *rec, const char *fmt, double a, double b, double c)
{
    if (rec->n_warnings >= SB_REPORT_MAX_WARNINGS) return;
    snprintf(rec->warnings[rec->n_warnings++], sizeof rec->warnings[0], fmt, a, b, c);
}

/* The eager limit that sends a message of `bytes` eagerly: stratbench's
 * choice (sb_eager_limit_for), or Open MPI's default where that suffices. */
static size_t eager_needed(size_t bytes)
{
    size_t need = sb_eager_limit_for(bytes);
    return need ? need : SB_TCP_EAGER_DEFAULT_BYTES;
}

void sb_run_warnings_check(struct sb_run_record *rec, long threads_on_host, long cores,
                           double stall_fraction)
{
    rec->n_warnings = 0;
    if (cores > 0 && threads_on_host > cores)
        add(rec, "oversubscribed: %.0f compute threads (ranks or replicas x --threads) on "
            "%.0f cores; the figures measure the CPU's sharing, not the strategy",
            (double)threads_on_host, (double)cores, 0.0);
    if (stall_fraction > SB_WARN_STALL_FRACTION)
        add(rec, "noisy run: %.0f%% of the step time in stalled steps (> 2x the median; "
            "threshold %.0f%%)", 100 * stall_fraction, 100 * SB_WARN_STALL_FRACTION, 0.0);
    double worst = 0;
    for (int r = 0; rec->noise_by_rank && r < rec->world_size; r++)
        if (rec->noise_by_rank[r].involuntary_context_switches > worst) worst = rec->noise_by_rank[r].involuntary_context_switches;
    if (rec->train_seconds > 0 && worst / rec->train_seconds > SB_WARN_NIVCSW_PER_S)
        add(rec, "noisy run: %.0f involuntary context switches per second of training on a "
            "rank (threshold %.0f/s): other work shared the CPUs",
            worst / rec->train_seconds, SB_WARN_NIVCSW_PER_S, 0.0);
    if (rec->n_hosts > 1 && rec->p2p_max_bytes > 0 && rec->tcp_eager_limit_bytes > 0 &&
        !sb_eager_fits((size_t)rec->p2p_max_bytes, (size_t)rec->tcp_eager_limit_bytes))
        add(rec, "rendezvous: pipeline messages of %.0f bytes exceed the TCP eager limit in "
            "effect (%.0f bytes, %.0f of them header room) and wait for the peers' next MPI "
            "calls; unset OMPI_MCA_btl_tcp_eager_limit or raise it",
            rec->p2p_max_bytes, rec->tcp_eager_limit_bytes, (double)SB_EAGER_HEADER_BYTES);
    if (rec->n_hosts > 1 && rec->collective_max_bytes > 0 && rec->tcp_eager_limit_bytes > 0 &&
        !sb_eager_fits((size_t)rec->collective_max_bytes, (size_t)rec->tcp_eager_limit_bytes))
        add(rec, "rendezvous: collectives' messages of up to %.0f bytes exceed the TCP eager "
            "limit in effect (%.0f bytes): between hosts both directions take turns on the "
            "link; unset OMPI_MCA_btl_tcp_eager_limit or raise it to %.0f",
            rec->collective_max_bytes, rec->tcp_eager_limit_bytes,
            (double)eager_needed((size_t)rec->collective_max_bytes));
}

void sb_run_warnings_print(const struct sb_run_record *rec)
{
    if (rec->n_warnings == 0) return;
    printf("warning: ");
    for (int i = 0; i < rec->n_warnings; i++) printf("%s%s", i ? "; " : "", rec->warnings[i]);
    printf("\n");
    fflush(stdout);
}
