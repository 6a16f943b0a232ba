/* NVTX3 ranges for Nsight Systems, domain "stratbench".
 *
 * Each range has a category (one per phase) with its own colour, and a
 * payload: the step index (a phase's: its thread's step), the epoch, or
 * the bytes of a communication call (docs/profiling.md's table). The NVTX
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
 * `category` with a step (or epoch) payload, and passes it to the hook. A
 * range of category SB_NVTX_STEP also makes `step` the calling thread's
 * current step (sb_nvtx_push_phase). */
void sb_nvtx_push(const char *name, enum sb_nvtx_category category, uint64_t step);
/* Opens a range of a step's phase (data, forward, backward, optimizer)
 * whose payload is the calling thread's current step: the payload of the
 * last SB_NVTX_STEP range it opened (0 before any). The phases need not
 * know the step; every thread that runs them opens its own step range
 * (the harness on the main thread, mirrored on its replica threads). */
void sb_nvtx_push_phase(const char *name, enum sb_nvtx_category category);
/* Opens a range whose payload is a byte count (communication calls). */
void sb_nvtx_push_bytes(const char *name, enum sb_nvtx_category category, uint64_t bytes);
/* Closes the innermost range opened by this thread. */
void sb_nvtx_pop(void);

/* Names the calling OS thread `name` in NVTX tools (nvtxNameOsThreadA with
 * the Linux thread id), e.g. "replica 1" for a mirrored replica thread.
 * NVTX only: the --trace timeline names its threads itself. */
void sb_nvtx_name_thread(const char *name);

/* Name of a category ("epoch", "step", "data", ...). */
const char *sb_nvtx_category_name(enum sb_nvtx_category category);

#endif
