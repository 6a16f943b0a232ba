/* What else ran on the machine during training, per rank: involuntary
 * context switches of this process (getrusage ru_nivcsw: the kernel took
 * the CPU away) and the host's CPU steal time (/proc/stat: a hypervisor ran
 * another guest on our CPUs). A noisy neighbour shows up here even when
 * the step median does not move. */
#ifndef SB_RUN_NOISE_H
#define SB_RUN_NOISE_H

#include "core/status.h"
#include "job/job.h"
#include "report/report.h" /* struct sb_rank_noise */

/* Counters at one instant. */
struct sb_noise_sample {
    double nivcsw;       /* involuntary context switches of this process so far */
    double steal_ticks;  /* /proc/stat "cpu" steal, USER_HZ ticks; < 0 unknown */
    double total_ticks;  /* /proc/stat "cpu" sum of all fields, ticks; < 0 unknown */
    double runqueue_wait_s; /* s this process's main thread was runnable but waited for a
                             * CPU so far (second field of /proc/self/schedstat, ns;
                             * the kernel's Documentation/scheduler/sched-stats.rst); < 0
                             * unknown */
    double cpu_s;        /* user + system CPU time of this process (every thread) so far, s */
};


/* Reads the counters now. Never fails: an unreadable /proc/stat leaves the
 * tick fields at -1, unreadable schedstat files runqueue_wait_s at -1. */
void sb_noise_sample_now(struct sb_noise_sample *out);

/* Parses the aggregate "cpu  user nice system idle iowait irq softirq steal
 * ..." line of /proc/stat (proc(5)): *steal = the 8th number, *total = the
 * sum of the first 8 (guest time is already inside user/nice). Returns 0,
 * or -1 when `line` is not such a line (fewer than 8 numbers). */
int sb_proc_stat_cpu_parse(const char *line, double *steal, double *total);

/* The noise between two samples; ticks_per_s is USER_HZ
 * (sysconf(_SC_CLK_TCK)). Unknown ticks give -1 in the steal fields. */
void sb_noise_delta(const struct sb_noise_sample *start, const struct sb_noise_sample *end,
                    double ticks_per_s, struct sb_rank_noise *out);

/* Gathers every rank's `mine` to rank 0 of the job (without MPI, a NULL
 * job or one rank: this process alone): on rank 0 *all (malloc'd, size entries,
 * caller frees) in rank order, NULL elsewhere. Collective.
 * Errors: SB_ERR_COMM, SB_ERR_NOMEM. */
sb_status sb_rank_noise_gather(const struct sb_job *job, const struct sb_rank_noise *mine,
                               struct sb_rank_noise **all);

#endif
