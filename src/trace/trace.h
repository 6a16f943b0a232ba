/* The --trace timeline: spans recorded on every rank and thread, merged on
 * rank 0 into one Chrome trace-event JSON (Perfetto, chrome://tracing).
 *
 * Spans come from the same calls as the NVTX ranges (sb_trace_start
 * installs sb_trace_push/sb_trace_pop as core/nvtx.c's hook), so the trace
 * and Nsight Systems show the same names and categories. Each thread appends to its own buffer (no lock on
 * the hot path); buffers are capped (SB_TRACE_DEFAULT_MAX_STEPS steps and
 * SB_TRACE_MAX_EVENTS_PER_THREAD events per thread) so a long run cannot
 * exhaust memory: once a cap is reached no new span is recorded and the
 * file says so ("otherData.truncated"). Timestamps are CLOCK_MONOTONIC,
 * shifted onto rank 0's clock by an offset each rank measures at start
 * (ping-pong with rank 0, Cristian's method); see docs/profiling.md. */
#ifndef SB_TRACE_H
#define SB_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "job/job.h"

/* Steps recorded by default: spans opened after the step with this index
 * began are not recorded. */
#define SB_TRACE_DEFAULT_MAX_STEPS 1000
/* Hard cap of recorded spans per thread (64 bytes each: 4 MiB). */
#define SB_TRACE_MAX_EVENTS_PER_THREAD 65536

/* Starts recording on this process: registers the calling thread as
 * tid 0, records spans of at most `max_steps` steps (0 = the default),
 * and, in a job of several ranks with MPI, measures this rank's clock
 * offset to rank 0 (sb_job_clock_offset, job/gather.h). Collective over the
 * job in that case; call it from the thread that calls MPI. Errors:
 * SB_ERR_NOMEM, SB_ERR_COMM (the ping-pong failed). */
sb_status sb_trace_start(const struct sb_job *job, long max_steps);

/* Opens a span `name` (a string that outlives the trace, e.g. a literal)
 * of NVTX category `category` on the calling thread. payload is the step
 * or epoch index, or a byte count when is_bytes. No-op when not tracing. */
void sb_trace_push(const char *name, int category, uint64_t payload, int is_bytes);

/* Closes the innermost span of the calling thread. No-op when not tracing. */
void sb_trace_pop(void);

/* Non-zero between sb_trace_start and sb_trace_stop. */
int sb_trace_active(void);

/* Gathers every rank's spans to rank 0 and writes one Chrome trace-event
 * JSON to `path` there, atomically (temp file + rename). pid = rank, tid =
 * thread (0 = the thread that called sb_trace_start; mirrored replicas'
 * threads follow in the order they first recorded), ts and dur in µs since
 * rank 0's sb_trace_start. Collective over the job (without MPI or with
 * one rank: this process only). Call after every other recording thread has finished its
 * spans (joined or idle behind a synchronisation). Errors: SB_ERR_NOMEM,
 * SB_ERR_COMM, SB_ERR_IO naming the path. */
sb_status sb_trace_write(const char *path, const struct sb_job *job);

/* Names this process's track in the trace: "LABEL (rank N)" instead of
 * "rank N" (e.g. "server" for a central parameter server). At most 47
 * bytes are kept; NULL or "" restores "rank N". Call before
 * sb_trace_write. */
void sb_trace_set_process_label(const char *label);

/* Non-zero when some thread reached its event cap (or max_steps) and later
 * spans were dropped; after sb_trace_write, for every rank (the trace's
 * otherData.truncated). */
int sb_trace_truncated(void);

/* Stops recording and frees every buffer. Safe to call when not tracing. */
void sb_trace_stop(void);

#endif
