/* The "nccl" communicator's state and helpers, shared by its files
 * (private to src/comm/nccl.c: collectives, timing, test and wait;
 * nccl_p2p.c: point-to-point; nccl_setup.c: creation and split). Include
 * only with SB_HAVE_NCCL. */
#ifndef SB_NCCL_IMPL_H
#define SB_NCCL_IMPL_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backend/cuda_check.h"
#include "comm/comm.h"

/* Events for one NCCL call, from the member's pool (created at set-up;
 * nothing is created or allocated per call once the pool is large enough
 * for the calls in flight). */
struct nccl_slot {
    cudaEvent_t ready;       /* compute stream -> communication stream (no timing) */
    cudaEvent_t start, done; /* timing-enabled, around the NCCL call on its stream */
    int kind;                /* the counter its seconds go to (enum sb_comm_kind) */
    int timing;              /* recorded; its seconds not yet added (harvest) */
    int live;                /* held by a non-blocking request (test/wait) */
};

#define SB_NCCL_SLOTS_INITIAL 64

struct nccl_impl {
    ncclComm_t comm;
    int device;
    void *scratch;        /* device staging for host metrics */
    size_t scratch_bytes;
    cudaStream_t comm_stream; /* non-blocking all-reduces (created at set-up) */
    struct nccl_slot *slots;  /* (n_slots) the event pool */
    int n_slots;
};


/* c's state. */
static inline struct nccl_impl *sb_nccl_impl(struct sb_comm *c) { return c->impl; }

/* SB_OK for ncclSuccess, else SB_ERR_COMM "what: NCCL's message". */
sb_status sb_nccl_check(ncclResult_t r, const char *what);

/* The calling thread's stream, on c's device (made current). Errors:
 * SB_ERR_COMM, SB_ERR_DEVICE. */
sb_status sb_nccl_stream_of(struct sb_comm *c, cudaStream_t *out);

/* A free slot of c's event pool for a call of `kind` (finished calls'
 * seconds harvested first; the pool grows when more calls are in flight
 * than it has slots). Errors: SB_ERR_COMM, SB_ERR_NOMEM. */
sb_status sb_nccl_acquire(struct sb_comm *c, int kind, struct nccl_slot **out);

/* Enqueues one device-only NCCL call on stream s between a slot's start
 * and done events; returns without waiting: later work on s is ordered
 * after it, and its seconds are harvested from the events later and
 * credited to `kind` (SB_COMM_NKINDS: none). */
#define SB_NCCL_TIMED(c, kind, s, call, what)                                                      \
    do {                                                                                           \
        struct nccl_slot *q_;                                                                      \
        SB_TRY(sb_nccl_acquire((c), (int)(kind), &q_));                                            \
        SB_TRY(SB_CUDA_CHECK(cudaEventRecord(q_->start, (s)), SB_ERR_COMM));                       \
        SB_TRY(sb_nccl_check((call), (what)));                                                     \
        SB_TRY(SB_CUDA_CHECK(cudaEventRecord(q_->done, (s)), SB_ERR_COMM));                        \
        q_->timing = 1;                                                                            \
    } while (0)

/* Opens a non-blocking call of `kind` on c's communication stream, ordered
 * after the work enqueued so far on the calling thread's stream, and
 * closes it after its NCCL calls returned rc (records the completion
 * event that test polls and wait orders the compute stream after; fills
 * req). Errors: SB_ERR_COMM with CUDA's or NCCL's message. */
sb_status sb_nccl_async_begin(struct sb_comm *c, enum sb_comm_kind kind, struct nccl_slot **out);
sb_status sb_nccl_async_end(struct sb_comm *c, struct nccl_slot *q, ncclResult_t rc,
                            const char *what, struct sb_comm_request *req);

/* A member with no NCCL communicator yet (impl->comm NULL), its
 * communication stream and event pool created on `device`. Errors:
 * SB_ERR_NOMEM, SB_ERR_COMM. */
sb_status sb_nccl_member_new(int device, struct sb_comm **out);

/* The op destroy: frees the member and its NCCL communicator. */
void sb_nccl_destroy(struct sb_comm *c);

/* Point-to-point ops (nccl_p2p.c; see the op comments in comm.h). */
sb_status sb_nccl_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                       enum sb_comm_kind kind);
sb_status sb_nccl_recv(struct sb_comm *c, float *buf, size_t n, int peer, enum sb_comm_kind kind);
sb_status sb_nccl_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                        struct sb_comm_request *req);
sb_status sb_nccl_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                        struct sb_comm_request *req);

/* The op split (nccl_setup.c): ncclCommSplit. */
sb_status sb_nccl_split(struct sb_comm *c, int color, int key, struct sb_comm **out);

#endif
