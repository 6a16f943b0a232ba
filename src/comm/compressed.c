/* The counted wrapper of the 16-bit all-reduce (comm.h,
 * sb_comm_allreduce16): gradient compression's traffic on the same
 * counters as every other call, its bytes the wire's. */
#include "comm/comm.h"
#include "comm/flight.h"
#include "core/clock.h"
#include "core/nvtx.h"

sb_status sb_comm_allreduce16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                              double *convert_s)
{
    if (!c->ops->allreduce16)
        return sb_error(SB_ERR_USAGE, "the %s communicator has no 16-bit all-reduce",
                        c->ops->name);
    size_t bytes = n * sizeof(uint16_t); /* the wire's message size */
    sb_nvtx_push_bytes("allreduce16", SB_NVTX_COMM, bytes);
    double t0 = sb_now_s();
    int64_t seq = sb_flight_issue((enum sb_flight_kind)SB_COMM_ALLREDUCE, bytes, -1, -1);
    c->counting = 1 + SB_COMM_ALLREDUCE;
    sb_status st = c->ops->allreduce16(c, fmt, buf, n, convert_s);
    c->counting = 0;
    struct sb_comm_counter *ctr = &c->counters[SB_COMM_ALLREDUCE];
    ctr->calls++;
    ctr->bytes += (double)bytes;
    if (!c->device_timed) ctr->seconds += sb_now_s() - t0;
    sb_flight_complete(seq, st == SB_OK);
    sb_nvtx_pop();
    return st;
}
