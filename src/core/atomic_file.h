/* Atomic output files: a temporary file beside the target, fsync, then
 * rename, so a reader sees the old file or the whole new one, never part,
 * and a failed write leaves nothing behind. Used for every output the
 * program writes (report, trace, parameters, scaling.json). */
#ifndef SB_ATOMIC_FILE_H
#define SB_ATOMIC_FILE_H

#include <stddef.h>

#include "core/status.h"

/* Writes text + "\n" to `path` atomically: a temporary file beside it,
 * fsync, rename; folders missing above `path` are created first. Errors: SB_ERR_IO "<what> <path>: <step>: <why>" (what
 * names the document, e.g. "report" or "trace"), SB_ERR_NOMEM. On error
 * no file is left at `path` or beside it. */
sb_status sb_write_text_atomic(const char *what, const char *path, const char *text);

/* Same for `len` raw bytes at `data` (no newline added), e.g. the float32
 * parameters of --save-params. Errors as sb_write_text_atomic. */
sb_status sb_write_bytes_atomic(const char *what, const char *path, const void *data,
                                size_t len);

#endif
