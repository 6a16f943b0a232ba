/* The two paths of a replica's step, internal to the replica (strategies
 * call the functions of replica.h): the host path (replica_host.c: backend
 * memory is host memory, host clocks) and the device path
 * (replica_device.c: the data set uploaded once, graph-ready steps, CUDA
 * events, --cuda-graph). sb_replica_create picks one from the backend's
 * host_memory (backend.h) and replica.c calls only that one; neither path
 * calls the other or back into replica.c: counting the step, its samples
 * and the once-per-epoch loss read happen in replica.c after a path
 * returns. */
#ifndef SB_REPLICA_PATH_H
#define SB_REPLICA_PATH_H

#include "strategies/shared/replica.h"

struct sb_replica_path {
    /* 1 when the path times phases with device events (so a strategy whose
     * synchronisation runs on the stream may set r->device_comm). */
    int on_device;
    /* Sets up the path's state once the replica's model, batch buffers and
     * loss sum exist (may be NULL). Errors: SB_ERR_NOMEM, SB_ERR_DEVICE. */
    sb_status (*init)(struct sb_replica *r);
    /* Frees what init made; safe after a failed or absent init (may be NULL). */
    void (*release)(struct sb_replica *r);
    /* The passes of sb_replica_data, sb_replica_forward and
     * sb_replica_backward (replica.h) on slot `sl`, adding their phase
     * times to res; replica.c has checked the slot and the arguments. NULL
     * on a path that runs only the fused gradients below (the device path).
     * Forward adds the loss sum to r->loss_acc and nothing to res->samples
     * (replica.c counts the samples). */
    sb_status (*data)(struct sb_replica *r, struct sb_replica_slot *sl, const int32_t *idx,
                      int n, struct sb_step_result *res);
    sb_status (*forward)(struct sb_replica *r, struct sb_replica_slot *sl, int global_batch,
                         struct sb_step_result *res);
    sb_status (*backward)(struct sb_replica *r, struct sb_replica_slot *sl,
                          sb_grad_ready_fn ready, void *ctx, struct sb_step_result *res);
    /* Data, forward and backward of one step fused, as sb_replica_gradients
     * (replica.h), adding phase times to res; NULL on a path with the
     * passes above (sb_replica_gradients then calls them). *ran = 1 when
     * the step's work has been issued, 0 when it was only captured (it runs
     * in update). */
    sb_status (*gradients)(struct sb_replica *r, const int32_t *idx, int n, int global_batch,
                           sb_grad_ready_fn ready, void *ctx, struct sb_step_result *res,
                           int *ran);
    /* The optimizer step as sb_replica_update (r->opt exists). *ran = 1
     * when this call ran a step that gradients only captured. */
    sb_status (*update)(struct sb_replica *r, const float *grads, struct sb_step_result *res,
                        int *ran);
    /* Gathers test samples idx[0..n) (host indices) into slot 0's buffers. */
    sb_status (*gather_test)(struct sb_replica *r, const int32_t *idx, int n);
};

/* The host path (replica_host.c). */
extern const struct sb_replica_path sb_replica_host_path;

#ifdef SB_HAVE_CUDA
/* The device path (replica_device.c). */
extern const struct sb_replica_path sb_replica_device_path;
#define SB_REPLICA_DEVICE_PATH (&sb_replica_device_path)
#else
/* A build without CUDA has only host-memory backends, so no device path. */
#define SB_REPLICA_DEVICE_PATH ((const struct sb_replica_path *)0)
#endif

#endif
