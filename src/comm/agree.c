/* Agreement on a local set-up status across the ranks of a communicator;
 * see sb_comm_agree in comm.h. */
#include <stdio.h>

#include "comm/comm.h"
#include "core/status.h"

sb_status sb_comm_agree(struct sb_comm *c, sb_status local, const char *what)
{
    char message[512];
    snprintf(message, sizeof message, "%s", local ? sb_error_message() : "");
    double failed = local != SB_OK ? 1.0 : 0.0;
    sb_status st = c->ops->allreduce_f64(c, &failed, 1);
    if (local) { /* this rank's own failure is the root cause: report it */
        sb_error_set_message(message);
        return local;
    }
    if (st) return st;
    if (failed > 0.0)
        return sb_error(SB_ERR_COMM, "another rank failed %s (see its message)", what);
    return SB_OK;
}
