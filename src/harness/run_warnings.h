/* Why a run's figures may not describe the strategy: more threads than
 * cores on this host (ranks or replica threads x compute threads), or a noisy
 * run (a large share of the step time in stalled steps, or many involuntary
 * context switches). The harness prints them as one "warning:" line and
 * the report records them ("warnings", reports/README.md). */
#ifndef SB_RUN_WARNINGS_H
#define SB_RUN_WARNINGS_H

#include "report/report.h" /* struct sb_run_record */

/* A run is noisy when the stall fraction of rank 0's step times
 * (sb_stall_fraction: the share of step time in steps slower than twice
 * the median) is above this (a threshold chosen, not yet measured on a
 * quiet machine; a loaded 2-core VM gave 0.1-0.35). */
#define SB_WARN_STALL_FRACTION 0.10
/* ... or when any rank had more involuntary context switches (getrusage
 * ru_nivcsw: the kernel took its CPU for another runnable thread) than
 * this per second of training. */
#define SB_WARN_NIVCSW_PER_S 1000.0
/* compare and the sweep also count a repeat noisy when any rank's threads
 * waited runnable for a CPU (schedstat's runqueue wait: another program
 * held its cores) over this share of the training time. Not a train
 * warning: runs with more threads than cores already say so, and a
 * busy-polling rank beside its own launcher waits a little on every host. */
#define SB_NOISE_RUNQUEUE_FRACTION 0.10

/* Fills rec->warnings / rec->n_warnings (at most SB_REPORT_MAX_WARNINGS)
 * from the finished record: `threads_on_host` the compute threads this
 * job runs on rank 0's host (processes or replica threads x compute threads
 * each), `cores` that host's online cores, `stall_fraction` of rank 0's
 * step times. Also warns, on a job of several hosts, when the largest
 * point-to-point message (rec->p2p_max_bytes) does not go eagerly under
 * the TCP eager limit in effect (rec->tcp_eager_limit_bytes, when known;
 * job/eager_limit.h): the user's limit kept it below, and each such
 * message goes by rendezvous; and likewise when the largest message of
 * stratbench's own collectives (rec->collective_max_bytes) does not: those
 * that cross hosts go by rendezvous, the two directions of a pair's
 * exchange taking turns (docs/layouts.md, "Both directions at once").
 * Never fails. */
void sb_run_warnings_check(struct sb_run_record *rec, long threads_on_host, long cores,
                           double stall_fraction);

/* Prints rec's warnings as one line on stdout ("warning: a; b"), nothing
 * when there are none. */
void sb_run_warnings_print(const struct sb_run_record *rec);

#endif
