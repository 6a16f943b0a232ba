/* The counted wrappers of the 16-bit all-reduce and reduce-scatter (comm.h,
 * sb_comm_allreduce16, sb_comm_reduce_scatter16): gradient compression's traffic on the same
 * counters as every other call, its bytes the wire's. (Its own file:
 * comm.c's begin/end count messages of 4n bytes.) A device-timed
 * communicator (nccl) adds the seconds itself to the all-reduce counter. */
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
    sb_status st = c->ops->allreduce16(c, fmt, buf, n, convert_s);
    struct sb_comm_counter *ctr = &c->counters[SB_COMM_ALLREDUCE];
    ctr->calls++;
    ctr->bytes += (double)bytes;
    if (!c->ops->device_timed) ctr->seconds += sb_now_s() - t0;
    sb_flight_complete(seq, st == SB_OK);
    sb_nvtx_pop();
    return st;
}

sb_status sb_comm_reduce_scatter16(struct sb_comm *c, enum sb_half_format fmt, const float *send,
                                   float *recv, const size_t *counts,
                                   struct sb_comm_request *req, double *convert_s)
{
    if (!c->ops->reduce_scatter16)
        return sb_error(SB_ERR_USAGE, "the %s communicator has no 16-bit reduce-scatter",
                        c->ops->name);
    size_t n = 0;
    for (int r = 0; r < c->size; r++) n += counts[r];
    size_t bytes = n * sizeof(uint16_t);
    sb_nvtx_push_bytes("reduce_scatter16", SB_NVTX_COMM, bytes);
    *req = (struct sb_comm_request){.bytes = bytes, .start_s = sb_now_s(),
                                    .kind = SB_COMM_REDUCE_SCATTER, .algo = SB_ALLREDUCE_RING,
                                    .index = req->index};
    req->seq = sb_flight_issue((enum sb_flight_kind)SB_COMM_REDUCE_SCATTER, bytes, -1, req->index);
    sb_status st = c->ops->reduce_scatter16(c, fmt, send, recv, counts, convert_s);
    req->done = 1;
    req->done_s = sb_now_s();
    struct sb_comm_counter *ctr = &c->counters[SB_COMM_REDUCE_SCATTER];
    ctr->calls++;
    ctr->bytes += (double)bytes;
    ctr->seconds += req->done_s - req->start_s;
    sb_flight_complete(req->seq, st == SB_OK);
    sb_nvtx_pop();
    return st;
}
