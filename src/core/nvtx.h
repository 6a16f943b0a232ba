/* NVTX3 ranges for Nsight Systems, domain "stratbench".
 *
 * Each range has a category (one per phase) with its own colour, and a
 * payload: the step index, or the bytes of a communication call. The NVTX
 * part compiles to nothing when the NVTX3 headers were not found
 * (SB_HAVE_NVTX unset), and is nearly free at run time when no tool is
 * attached (NVTX's own design). The same calls feed a hook that a layer
 * above installs (src/trace's --trace timeline): core calls up only
 * through that pointer, never by name, so it depends on nothing above it.
 * Without a hook a call costs one atomic load more than NVTX alone. */
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
    SB_NVTX_BUBBLE, /* a pipeline stage waiting for another stage (SB_PHASE_BUBBLE) */
    SB_NVTX_NCATEGORIES
};

/* Also receives every range: push gets the range's name, category, payload
 * and whether the payload is a byte count; pop closes the calling
 * thread's innermost one. Both are called on the thread that opens or
 * closes the range and must be thread-safe. */
struct sb_nvtx_hook {
    void (*push)(const char *name, int category, uint64_t payload, int is_bytes);
    void (*pop)(void);
};

/* Installs `hook` (static storage; NULL removes it). Ranges opened before
 * the call are not seen by the hook; call it while no other thread opens
 * ranges whose pops the new hook would see unpaired (e.g. before replica
 * threads start and after they join). */
void sb_nvtx_set_hook(const struct sb_nvtx_hook *hook);

/* Opens a range `name` (a string that outlives the run, e.g. a literal) in
 * `category` with a step (or epoch) payload, and passes it to the hook. */
void sb_nvtx_push(const char *name, enum sb_nvtx_category category, uint64_t step);
/* Opens a range whose payload is a byte count (communication calls). */
void sb_nvtx_push_bytes(const char *name, enum sb_nvtx_category category, uint64_t bytes);
/* Closes the innermost range opened by this thread. */
void sb_nvtx_pop(void);

/* Name of a category ("epoch", "step", "data", ...). */
const char *sb_nvtx_category_name(enum sb_nvtx_category category);

#endif
