/* The job layer's collectives for bookkeeping (not training traffic, not
 * counted, not under the watchdog): variable-sized blocks from every rank of
 * the job to rank 0, used by the cross-rank step statistics (rank_stats.c),
 * the noise record and the --trace merge (src/trace), and the maximum of a
 * value over the ranks. Every function takes the job (job/job.h) and is
 * collective over it; a job without MPI or of one rank needs no exchange.
 * Part of the job layer with job.c: it depends on MPI and src/core only. */
#ifndef SB_GATHER_H
#define SB_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "job/job.h"

/* Gathers `bytes` bytes of `mine` from every rank to rank 0 of the job,
 * safely: a rank whose local preparation failed passes
 * bytes < 0, and then every rank returns an error instead of leaving rank 0
 * waiting. On rank 0, *all (malloc'd, caller frees) holds the blocks in
 * rank order and counts[r] (malloc'd, size entries) their sizes; NULL on
 * other ranks. Collective. Errors: SB_ERR_COMM (an MPI call failed, another
 * rank failed, or the total exceeds 2 GiB), SB_ERR_NOMEM. */
sb_status sb_gather_bytes_to_root(const struct sb_job *job, const void *mine, long long bytes,
                                  char **all, long long **counts);

/* Replaces *v by its largest value over the job's ranks. Errors:
 * SB_ERR_COMM naming file:line (*v keeps this rank's value). */
sb_status sb_job_max_int(const struct sb_job *job, int *v);
sb_status sb_job_max_double(const struct sb_job *job, double *v);

/* Every rank's `mine` in all[rank] (all: job->size ints). Errors:
 * SB_ERR_COMM naming file:line. */
sb_status sb_job_allgather_int(const struct sb_job *job, int mine, int *all);

/* Every rank's n (= counts[rank]) 64-bit words of `mine` into all, rank r's
 * at offsets[r] (counts and offsets: job->size entries, the same on every
 * rank). Errors: SB_ERR_COMM naming file:line. */
sb_status sb_job_allgatherv_u64(const struct sb_job *job, const uint64_t *mine, int n,
                                uint64_t *all, const int *counts, const int *offsets);

/* buf[n] of rank `root` to every rank. Errors: SB_ERR_COMM naming
 * file:line, or SB_ERR_USAGE when n exceeds MPI's int count. */
sb_status sb_job_bcast_floats(const struct sb_job *job, float *buf, size_t n, int root);

/* The largest *value over the ranks and the *loc that came with it (the
 * lowest loc among equal values: MPI_MAXLOC), on every rank. Errors:
 * SB_ERR_COMM naming file:line. */
sb_status sb_job_max_loc(const struct sb_job *job, double *value, int *loc);

/* Cristian's method against rank 0 (Cristian 1989): rank r sends at t1,
 * rank 0 answers with its clock t0, rank r receives at t2; rank 0's clock
 * read t0 near the midpoint, so offset = (t1 + t2) / 2 - t0, taken from the
 * round with the shortest round trip of `rounds`, whose half bounds the
 * error. Clocks: sb_now_s (core/clock.h), seconds. Sets *offset_s (this
 * rank's clock minus rank 0's; 0 on rank 0) and *error_s (the largest bound
 * over the ranks, the same on every rank). Errors: SB_ERR_COMM naming
 * file:line. */
sb_status sb_job_clock_offset(const struct sb_job *job, int rounds, double *offset_s,
                              double *error_s);

#endif
