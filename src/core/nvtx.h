/* NVTX3 ranges for Nsight Systems, domain "stratbench".
 *
 * Each range has a category (one per phase) with its own colour, and a
 * payload: the step index, or the bytes of a communication call. Compiled
 * to no-ops when the NVTX3 headers were not found (SB_HAVE_NVTX unset), and
 * nearly free at run time when no tool is attached (NVTX's own design). */
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

#ifdef SB_HAVE_NVTX
/* Opens a range `name` in `category` with a step (or epoch) payload. */
void sb_nvtx_push(const char *name, enum sb_nvtx_category category, uint64_t step);
/* Opens a range whose payload is a byte count (communication calls). */
void sb_nvtx_push_bytes(const char *name, enum sb_nvtx_category category, uint64_t bytes);
/* Closes the innermost range opened by this thread. */
void sb_nvtx_pop(void);
#else
static inline void sb_nvtx_push(const char *n, enum sb_nvtx_category c, uint64_t s)
{ (void)n, (void)c, (void)s; }
static inline void sb_nvtx_push_bytes(const char *n, enum sb_nvtx_category c, uint64_t b)
{ (void)n, (void)c, (void)b; }
static inline void sb_nvtx_pop(void) {}
#endif

/* ARGB colour of a category (also used by the Chrome trace). */
uint32_t sb_nvtx_color(enum sb_nvtx_category category);

/* Name of a category ("epoch", "step", "data", ...). */
const char *sb_nvtx_category_name(enum sb_nvtx_category category);

#endif
