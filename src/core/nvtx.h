/* NVTX3 ranges for Nsight Systems, domain "stratbench".
 *
 * Each range has a category (one per phase) with its own colour, and a
 * payload: the step index, or the bytes of a communication call. The NVTX
 * part compiles to nothing when the NVTX3 headers were not found
 * (SB_HAVE_NVTX unset), and is nearly free at run time when no tool is
 * attached (NVTX's own design). The same calls feed the --trace timeline
 * (src/trace), which costs one flag test per call when tracing is off. */
#ifndef SB_NVTX_H
#define SB_NVTX_H

#include <stdint.h>

enum sb_nvtx_category {
    SB_NVTX_EPOCH = 1,
    SB_NVTX_STEP,
    SB_NVTX_DATA,
    SB_NVTX_FORWARD,
    SB_NVTX_BACKWARD,
    SB_NVTX_COMM,
    SB_NVTX_OPTIMIZER,
    SB_NVTX_EVAL,
    SB_NVTX_NCATEGORIES
};

/* Opens a range `name` (a string that outlives the run, e.g. a literal) in
 * `category` with a step (or epoch) payload. Also records a span for the
 * --trace timeline when tracing is on (src/trace/trace.h). */
void sb_nvtx_push(const char *name, enum sb_nvtx_category category, uint64_t step);
/* Opens a range whose payload is a byte count (communication calls). */
void sb_nvtx_push_bytes(const char *name, enum sb_nvtx_category category, uint64_t bytes);
/* Closes the innermost range opened by this thread. */
void sb_nvtx_pop(void);

/* Name of a category ("epoch", "step", "data", ...). */
const char *sb_nvtx_category_name(enum sb_nvtx_category category);

#endif
