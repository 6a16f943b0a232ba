/* Point-to-point of the "mpi" communicator (see mpi.c): blocking send,
 * receive and receive-from-any, and non-blocking isend/irecv, all on tag 0
 * (the collectives use tags 1..32767), in chunks of at most SB_MPI_CHUNK
 * floats, every wait the one polling wait with the watchdog's deadline
 * (sb_mpi_wait). Central's pushes and pulls and a pipeline's activations
 * go through here. */
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

/* MPI_Isend (send != NULL) or MPI_Irecv into recv of n floats with peer,
 * tag 0, one request per chunk of at most SB_MPI_CHUNK floats, into a new
 * pending that mpi_test and mpi_wait complete. Chunks of one message match
 * in order (MPI keeps a pair's messages on one tag in order). */
static sb_status p2p_start(struct sb_comm *c, const float *send, float *recv, size_t n,
                           int peer, struct sb_comm_request *req)
{
    const char *what = send ? "MPI_Isend" : "MPI_Irecv";
    int chunks = sb_mpi_chunks_of(n);
    struct mpi_pending *p = calloc(1, sizeof *p + (size_t)chunks * sizeof p->req[0]);
    if (!p) return sb_error(SB_ERR_NOMEM, "%s: out of memory", what);
    p->what = what;
    for (size_t o = 0; o < n; o += SB_MPI_CHUNK) {
        int k = (int)(n - o < SB_MPI_CHUNK ? n - o : SB_MPI_CHUNK);
        int rc = send ? MPI_Isend(send + o, k, MPI_FLOAT, peer, 0, sb_mpi_handle(c), &p->req[p->n])
                      : MPI_Irecv(recv + o, k, MPI_FLOAT, peer, 0, sb_mpi_handle(c), &p->req[p->n]);
        sb_status st = SB_MPI_CHECK_RC(rc, what);
        if (st) { /* requests already started: finish them, within the deadline */
            (void)sb_mpi_wait(p->req, p->n, MPI_STATUSES_IGNORE, what);
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
