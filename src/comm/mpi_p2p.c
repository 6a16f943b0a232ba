/* Point-to-point of the "mpi" communicator (see mpi.c): blocking send,
 * receive and receive-from-any, and non-blocking isend/irecv, all on tag 0
 * (the collectives use tags 1..32767), in chunks of at most SB_MPI_CHUNK
 * floats, every wait the one polling wait with the watchdog's deadline
 * (sb_mpi_wait). Central's pushes and pulls and a pipeline's activations
 * go through here; so do central's 16-bit pushes and pulls under
 * --precision bf16|fp16 (isend16, irecv16, recv_any16: MPI_UINT16_T words,
 * the same messages at 2 bytes a value). */
#include <mpi.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "comm/mpi_impl.h"
#include "comm/mpi_wait.h"
#include "job/job_mpi.h"

sb_status sb_mpi_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                         enum sb_comm_kind kind)
{
    (void)kind;
    MPI_Request one, *r = sb_mpi_requests(sb_mpi_chunks_of(n), &one);
    if (!r) return sb_error(SB_ERR_NOMEM, "MPI_Isend: out of memory");
    int k = 0;
    sb_status st = SB_OK;
    for (size_t o = 0; o < n && !st; o += SB_MPI_CHUNK, k++) {
        int m = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        st = SB_MPI_CHECK(MPI_Isend(buf + o, m, MPI_FLOAT, peer, 0, sb_mpi_handle(c), &r[k]));
        if (st) k--;
    }
    sb_status wst = sb_mpi_wait(r, k, MPI_STATUSES_IGNORE, "MPI_Isend");
    sb_mpi_release(r, &one);
    return st ? st : wst;
}

sb_status sb_mpi_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                         enum sb_comm_kind kind)
{
    (void)kind;
    MPI_Request one, *r = sb_mpi_requests(sb_mpi_chunks_of(n), &one);
    if (!r) return sb_error(SB_ERR_NOMEM, "MPI_Irecv: out of memory");
    int k = 0;
    sb_status st = SB_OK;
    for (size_t o = 0; o < n && !st; o += SB_MPI_CHUNK, k++) {
        int m = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        st = SB_MPI_CHECK(MPI_Irecv(buf + o, m, MPI_FLOAT, peer, 0, sb_mpi_handle(c), &r[k]));
        if (st) k--;
    }
    sb_status wst = sb_mpi_wait(r, k, MPI_STATUSES_IGNORE, "MPI_Irecv");
    sb_mpi_release(r, &one);
    return st ? st : wst;
}

/* The first chunk from any source fixes the peer; later chunks of the same
 * message come from that peer (MPI keeps one sender's messages in order). */
sb_status sb_mpi_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                             enum sb_comm_kind kind)
{
    (void)kind;
    int source = MPI_ANY_SOURCE;
    for (size_t o = 0; o < n || o == 0; o += SB_MPI_CHUNK) {
        int k = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        MPI_Request r;
        MPI_Status status;
        SB_TRY(SB_MPI_CHECK(MPI_Irecv(buf + o, k, MPI_FLOAT, source, 0, sb_mpi_handle(c), &r)));
        SB_TRY(sb_mpi_wait(&r, 1, &status, "MPI_Irecv"));
        source = status.MPI_SOURCE;
        if (n == 0) break;
    }
    *peer = source;
    return SB_OK;
}

/* A new pending for a point-to-point message of n elements (one request
 * per chunk of at most SB_MPI_CHUNK) with `extra` bytes after its requests
 * for the 16-bit words (p->wire); NULL when out of memory. */
static struct mpi_pending *pending_new(size_t n, size_t extra, const char *what)
{
    size_t head = sizeof(struct mpi_pending) + (size_t)sb_mpi_chunks_of(n) * sizeof(MPI_Request);
    struct mpi_pending *p = calloc(1, head + extra);
    if (!p) return NULL;
    p->what = what;
    if (extra) p->wire = (uint16_t *)(void *)((char *)p + head);
    return p;
}

/* Starts MPI_Isend of send (recv NULL) or MPI_Irecv into recv of n
 * elements of `type` (`size` bytes each) with peer, tag 0, one request per
 * chunk into p, and hands p to req (complete at once when n == 0). Chunks
 * of one message match in order (MPI keeps a pair's messages on one tag in
 * order). On an error the started requests are finished and p freed. */
static sb_status p2p_post(struct sb_comm *c, struct mpi_pending *p, const void *send, void *recv,
                          size_t n, MPI_Datatype type, size_t size, int peer,
                          struct sb_comm_request *req)
{
    for (size_t o = 0; o < n; o += SB_MPI_CHUNK) {
        int k = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        int rc = send ? MPI_Isend((const char *)send + o * size, k, type, peer, 0,
                                  sb_mpi_handle(c), &p->req[p->n])
                      : MPI_Irecv((char *)recv + o * size, k, type, peer, 0, sb_mpi_handle(c),
                                  &p->req[p->n]);
        sb_status st = SB_MPI_CHECK_RC(rc, p->what);
        if (st) { /* requests already started: finish them, within the deadline */
            (void)sb_mpi_wait(p->req, p->n, MPI_STATUSES_IGNORE, p->what);
            free(p);
            return st;
        }
        p->n++;
    }
    if (p->n == 0) { /* n == 0: nothing to transfer */
        free(p);
        req->impl = NULL;
        req->done = 1;
        return SB_OK;
    }
    req->impl = p;
    req->done = 0;
    return SB_OK;
}

/* MPI_Isend (send != NULL) or MPI_Irecv into recv of n floats with peer
 * into a new pending that mpi_test and mpi_wait complete. */
static sb_status p2p_start(struct sb_comm *c, const float *send, float *recv, size_t n,
                           int peer, struct sb_comm_request *req)
{
    const char *what = send ? "MPI_Isend" : "MPI_Irecv";
    struct mpi_pending *p = pending_new(n, 0, what);
    if (!p) return sb_error(SB_ERR_NOMEM, "%s: out of memory", what);
    return p2p_post(c, p, send, recv, n, MPI_FLOAT, sizeof(float), peer, req);
}

sb_status sb_mpi_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                           struct sb_comm_request *req)
{
    return p2p_start(c, buf, NULL, n, peer, req);
}

sb_status sb_mpi_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                           struct sb_comm_request *req)
{
    return p2p_start(c, NULL, buf, n, peer, req);
}

/* The words are the pending's own (p->wire), encoded before the send
 * starts, so buf may change as soon as the call returns. */
sb_status sb_mpi_isend16(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                         int peer, struct sb_comm_request *req)
{
    struct mpi_pending *p = pending_new(n, n * sizeof(uint16_t), "MPI_Isend");
    if (!p) return sb_error(SB_ERR_NOMEM, "MPI_Isend: out of memory");
    if (n) sb_half_encode(fmt, buf, p->wire, n);
    return p2p_post(c, p, p->wire, NULL, n, MPI_UINT16_T, sizeof(uint16_t), peer, req);
}

/* The words land in the pending's own buffer; mpi.c's test and wait decode
 * them into buf when the receive completes. */
sb_status sb_mpi_irecv16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                         int peer, struct sb_comm_request *req)
{
    struct mpi_pending *p = pending_new(n, n * sizeof(uint16_t), "MPI_Irecv");
    if (!p) return sb_error(SB_ERR_NOMEM, "MPI_Irecv: out of memory");
    p->decode_to = buf;
    p->decode_n = n;
    p->fmt = fmt;
    return p2p_post(c, p, NULL, p->wire, n, MPI_UINT16_T, sizeof(uint16_t), peer, req);
}

/* As sb_mpi_recv_any, in 16-bit words decoded into buf once all arrived. */
sb_status sb_mpi_recv_any16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                            int *peer)
{
    uint16_t *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return sb_error(SB_ERR_NOMEM, "MPI_Irecv: out of memory");
    int source = MPI_ANY_SOURCE;
    sb_status st = SB_OK;
    for (size_t o = 0; (o < n || o == 0) && !st; o += SB_MPI_CHUNK) {
        int k = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        MPI_Request r;
        MPI_Status status;
        st = SB_MPI_CHECK(MPI_Irecv(w + o, k, MPI_UINT16_T, source, 0, sb_mpi_handle(c), &r));
        if (!st) st = sb_mpi_wait(&r, 1, &status, "MPI_Irecv");
        if (!st) source = status.MPI_SOURCE;
        if (n == 0) break;
    }
    if (!st) {
        sb_half_decode(fmt, w, buf, n);
        *peer = source;
    }
    free(w);
    return st;
}
