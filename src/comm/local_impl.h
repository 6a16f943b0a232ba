/* The "local" communicator's shared-memory group (private to
 * src/comm/local.c, which holds the collectives and split, and
 * local_p2p.c, which holds point-to-point between the threads). */
#ifndef SB_LOCAL_IMPL_H
#define SB_LOCAL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/barrier.h"

/* A message sent and not yet received: n floats from replica src to dst,
 * copied at the send (the sender's buffer is free at once). */
struct sb_local_msg {
    struct sb_local_msg *next;
    int src, dst;
    size_t n;
    float data[];
};

struct sb_local_group {
    int n;
    struct sb_barrier barrier;
    _Atomic int64_t *arrived; /* (n) flight sequence number each thread last entered */
    float **bufs;   /* (n) published float buffers */
    double **dbufs; /* (n) published double buffers */
    /* split: each member's color and key, and the group each new
     * communicator's first member made (n each). */
    int *split_color, *split_key;
    struct sb_local_group **split_made;
    /* A group made by split belongs to its members: the last one destroyed
     * frees it (owned = 1, refs = members left); one made by
     * sb_local_group_create belongs to its caller (owned = 0). */
    int owned;
    atomic_int refs;
    /* Point-to-point: messages in send order (head first), guarded by
     * mbox_lock; mbox_cond wakes receivers when one arrives. */
    pthread_mutex_t mbox_lock;
    pthread_cond_t mbox_cond;
    struct sb_local_msg *head, *tail;
};

/* Point-to-point ops of "local" (local_p2p.c; see the op comments in
 * comm.h). A send copies the buffer into a message and returns (isend is
 * complete at issue); a receive takes the first message from `peer` (any
 * sender for recv_any) to this member, waiting for it with the watchdog's
 * deadline. Errors: SB_ERR_NOMEM; SB_ERR_COMM on a size mismatch or at the
 * deadline (naming the call and the peer); SB_ERR_INTERRUPTED. */
sb_status sb_local_send(struct sb_comm *c, const float *buf, size_t n, int peer,
                        enum sb_comm_kind kind);
sb_status sb_local_recv(struct sb_comm *c, float *buf, size_t n, int peer,
                        enum sb_comm_kind kind);
sb_status sb_local_recv_any(struct sb_comm *c, float *buf, size_t n, int *peer,
                            enum sb_comm_kind kind);
sb_status sb_local_isend(struct sb_comm *c, const float *buf, size_t n, int peer,
                         struct sb_comm_request *req);
sb_status sb_local_irecv(struct sb_comm *c, float *buf, size_t n, int peer,
                         struct sb_comm_request *req);
sb_status sb_local_test(struct sb_comm *c, struct sb_comm_request *req, int *done);
sb_status sb_local_wait(struct sb_comm *c, struct sb_comm_request *req);

/* Frees the messages still in g's mailbox (at the group's destruction). */
void sb_local_mbox_free(struct sb_local_group *g);

#endif
