/* Point-to-point of the "nccl" communicator (see nccl.c): ncclSend and
 * ncclRecv of float device buffers.
 *
 * Blocking (send, recv: central's pushes and pulls): on the calling
 * thread's stream between timing events, then a wait for the stream:
 * central times its exchanges with host clocks (strategies/central*.c) and
 * a blocking send is what its ordering argument assumes (docs/central.md).
 *
 * Non-blocking (isend, irecv: a pipeline's activations and gradients): each
 * is one NCCL group (ncclGroupStart, ncclSend or ncclRecv, ncclGroupEnd;
 * NCCL user guide, "Point-to-point communication" and "Group calls") on
 * the member's communication stream, after the work enqueued so far on the
 * compute stream, like the non-blocking all-reduce; test polls its
 * completion event and wait orders the compute stream after it (the host
 * does not block). NCCL's point-to-point is a rendezvous and the
 * communication stream runs its calls in issue order, so a send waits on
 * the stream until its peer's matching receive runs: two ranks that both
 * send to each other must not both issue the send first (a pipeline's
 * stage s sends forward then receives backward, stage s+1 receives
 * forward then sends backward: the orders match). */
#ifdef SB_HAVE_NCCL

#include "backend/cuda_check.h"
#include "comm/comm.h"
#include "comm/nccl_impl.h"

sb_status sb_nccl_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                       enum sb_comm_kind kind)
{
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    SB_NCCL_TIMED(c, kind, s, ncclSend(buf, n, ncclFloat, peer, sb_nccl_impl(c)->comm, s),
                  "ncclSend");
    return SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
}

sb_status sb_nccl_recv(struct sb_comm *c, float *buf, size_t n, int peer, enum sb_comm_kind kind)
{
    cudaStream_t s;
    SB_TRY(sb_nccl_stream_of(c, &s));
    SB_NCCL_TIMED(c, kind, s, ncclRecv(buf, n, ncclFloat, peer, sb_nccl_impl(c)->comm, s),
                  "ncclRecv");
    return SB_CUDA_CHECK(cudaStreamSynchronize(s), SB_ERR_COMM);
}

/* One grouped ncclSend (send != NULL) or ncclRecv into recv of n floats
 * with peer on the communication stream, as the non-blocking request req
 * (its kind, set by the counted wrapper, receives the device seconds). */
static sb_status grouped(struct sb_comm *c, const float *send, float *recv, size_t n, int peer,
                         struct sb_comm_request *req)
{
    struct nccl_impl *m = sb_nccl_impl(c);
    struct nccl_slot *q;
    SB_TRY(sb_nccl_async_begin(c, req->kind, &q));
    ncclResult_t rc = ncclGroupStart();
    if (rc == ncclSuccess)
        rc = send ? ncclSend(send, n, ncclFloat, peer, m->comm, m->comm_stream)
                  : ncclRecv(recv, n, ncclFloat, peer, m->comm, m->comm_stream);
    ncclResult_t end = ncclGroupEnd(); /* closes the group even after a failed call */
    if (rc == ncclSuccess) rc = end;
    return sb_nccl_async_end(c, q, rc, send ? "ncclSend" : "ncclRecv", req);
}

sb_status sb_nccl_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                        struct sb_comm_request *req)
{
    return grouped(c, buf, NULL, n, peer, req);
}

sb_status sb_nccl_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                        struct sb_comm_request *req)
{
    return grouped(c, NULL, buf, n, peer, req);
}

#endif /* SB_HAVE_NCCL */
