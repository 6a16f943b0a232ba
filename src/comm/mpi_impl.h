/* The "mpi" communicator's state, shared by its files (private to
 * src/comm/mpi.c, which holds the collectives, and mpi_p2p.c, which holds
 * point-to-point): a duplicate of the caller's MPI communicator and the
 * in-flight state of its non-blocking calls. */
#ifndef SB_MPI_IMPL_H
#define SB_MPI_IMPL_H

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "comm/mpi_allreduce.h"
#include "comm/mpi_hier.h"

/* The communicator's state: a duplicate of the caller's MPI communicator,
 * the sequence number of the next stratbench all-reduce (its message tag)
 * and the pool of their schedules (and of the 16-bit collectives' scratch). */
struct mpi_impl {
    MPI_Comm comm;
    unsigned seq;
    struct sb_ar_pool pool;
    struct sb_hier *hier; /* the host grouping; NULL: none */
};

/* c's MPI communicator. */
static inline MPI_Comm sb_mpi_handle(const struct sb_comm *c)
{
    return ((const struct mpi_impl *)c->impl)->comm;
}

/* MPI counts are int: larger buffers go in chunks of at most 1 Gi floats. */
#define SB_MPI_CHUNK ((size_t)1 << 30)

/* Chunks of at most SB_MPI_CHUNK floats in n. */
static inline int sb_mpi_chunks_of(size_t n)
{
    return n ? (int)((n + SB_MPI_CHUNK - 1) / SB_MPI_CHUNK) : 0;
}

/* Requests for up to `k` chunks: `local` when k is 1 (no allocation on
 * the common path), else malloc'd (free with sb_mpi_release()). */
static inline MPI_Request *sb_mpi_requests(int k, MPI_Request *local)
{
    return k <= 1 ? local : malloc((size_t)k * sizeof(MPI_Request));
}

static inline void sb_mpi_release(MPI_Request *r, MPI_Request *local)
{
    if (r != local) free(r);
}

/* In-flight state of a non-blocking call (req->impl): stratbench's own
 * schedule (op), a hierarchical all-reduce (hier), or one MPI request per
 * chunk of at most SB_MPI_CHUNK floats (req[0..n)); completed and freed by
 * the communicator's test and wait (mpi.c). */
struct mpi_pending {
    struct sb_ar_op *op;
    struct sb_hier_op *hier; /* a hierarchical all-reduce */
    const char *what; /* the MPI call, for error messages; NULL: "MPI_Iallreduce" */
    /* A 16-bit receive (sb_mpi_irecv16): on completion the words `wire`
     * (decode_n of them, in this allocation after req) are decoded from
     * `fmt` into decode_to (floats); NULL for every other call. A 16-bit
     * send's words live in `wire` too (decode_to NULL). */
    float *decode_to;
    uint16_t *wire;
    size_t decode_n;
    enum sb_half_format fmt;
    int n;
    MPI_Request req[];
};

/* Point-to-point ops of the "mpi" communicator (mpi_p2p.c; see the op
 * comments in comm.h): blocking send, receive and receive-from-any on tag
 * 0, and non-blocking isend/irecv whose pending (struct mpi_pending) the
 * communicator's test and wait complete. Errors: SB_ERR_COMM with MPI's
 * message (or the watchdog's line), SB_ERR_NOMEM. */
sb_status sb_mpi_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                      enum sb_comm_kind kind);
sb_status sb_mpi_recv(struct sb_comm *c, float *buf, size_t n, int peer, enum sb_comm_kind kind);
sb_status sb_mpi_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                          enum sb_comm_kind kind);
sb_status sb_mpi_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                       struct sb_comm_request *req);
sb_status sb_mpi_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                       struct sb_comm_request *req);
/* The 16-bit point-to-point ops (comm.h's isend16, irecv16, recv_any16):
 * the same messages on tag 0 as MPI_UINT16_T words, 2 bytes a value; a
 * send encodes buf into words it owns at issue, a receive decodes its
 * words into buf at completion (mpi.c's test and wait). */
sb_status sb_mpi_isend16(struct sb_comm *c, enum sb_half_format fmt, const float *buf, size_t n,
                         int peer, struct sb_comm_request *req);
sb_status sb_mpi_irecv16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                         int peer, struct sb_comm_request *req);
sb_status sb_mpi_recv_any16(struct sb_comm *c, enum sb_half_format fmt, float *buf, size_t n,
                            int *peer);

#endif
