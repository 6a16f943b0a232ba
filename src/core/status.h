/* Status codes and error messages shared by every layer.
 *
 * A function that can fail returns sb_status. The failing frame records one
 * human-readable line with sb_error(); callers pass the status up unchanged
 * (SB_TRY) and only main() prints the line and decides how to end the job.
 * The message buffer is thread-local, so mirrored replicas (threads) can fail
 * independently. */
#ifndef SB_STATUS_H
#define SB_STATUS_H

typedef enum {
    SB_OK = 0,
    SB_ERR_USAGE,   /* a bad flag or value on the command line   -> exit 2 */
    SB_ERR_INPUT,   /* a missing or corrupt input file            -> exit 2 */
    SB_ERR_IO,      /* an output file could not be written        -> exit 1 */
    SB_ERR_NOMEM,   /* an allocation failed                        -> exit 1 */
    SB_ERR_COMM,    /* MPI, NCCL or thread communication failed   -> exit 1 */
    SB_ERR_DEVICE,  /* CUDA, cuBLAS or BLAS failed                -> exit 1 */
    SB_ERR_INTERNAL, /* a broken invariant: a bug                 -> exit 1 */
    SB_ERR_DIVERGED, /* the loss became NaN or infinite; every rank
                      * of the job returns it together (no abort)  -> exit 1 */
    SB_ERR_INTERRUPTED /* SIGINT or SIGTERM (core/interrupt.h)     -> exit 130 */
} sb_status;

/* Records the error line "<printf-formatted message>" for this thread and
 * returns `status`, so a failing frame can write `return sb_error(...)`.
 * The message should name the file or flag and say what is wrong. */
sb_status sb_error(sb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message recorded by sb_error() on this thread ("" if none). */
const char *sb_error_message(void);

/* Copies `msg` into this thread's error buffer (used to carry a replica
 * thread's error to the thread that reports it). */
void sb_error_set_message(const char *msg);

/* Process exit status for `status`: 0 ok, 2 usage or input, 130 interrupted
 * (128 + SIGINT, as a shell reports Ctrl-C), 1 otherwise. */
int sb_status_exit_code(sb_status status);

/* Short name of a status ("usage error", "input error", ...). */
const char *sb_status_name(sb_status status);

/* Evaluates `expr` (an sb_status) and returns it from the caller if not OK. */
#define SB_TRY(expr)                                                           \
    do {                                                                       \
        sb_status sb_try_status_ = (expr);                                     \
        if (sb_try_status_ != SB_OK) return sb_try_status_;                    \
    } while (0)

#endif
