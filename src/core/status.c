/* Thread-local error message buffer behind sb_error(). */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char error_message[1024];

sb_status sb_error(sb_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return status;
}

const char *sb_error_message(void) { return error_message; }

void sb_error_set_message(const char *msg)
{
    snprintf(error_message, sizeof error_message, "%s", msg);
}

int sb_status_exit_code(sb_status status)
{
    switch (status) {
    case SB_OK: return 0;
    case SB_ERR_USAGE:
    case SB_ERR_INPUT: return 2;
    case SB_ERR_INTERRUPTED: return 130;
    default: return 1;
    }
}

const char *sb_status_name(sb_status status)
{
    switch (status) {
    case SB_OK: return "ok";
    case SB_ERR_USAGE: return "usage error";
    case SB_ERR_INPUT: return "input error";
    case SB_ERR_IO: return "I/O error";
    case SB_ERR_NOMEM: return "out of memory";
    case SB_ERR_COMM: return "communication error";
    case SB_ERR_DEVICE: return "device error";
    case SB_ERR_INTERNAL: return "internal error";
    case SB_ERR_DIVERGED: return "training diverged";
    case SB_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown error";
}
