/* The device path of a replica's step (strategies/shared/replica_device.c), used by
 * strategies/shared/replica.c when the backend keeps its memory on a device
 * (backend.h, host_memory 0: cuda). Internal to the replica;
 * strategies call the functions of replica.h. */
#ifndef SB_REPLICA_DEVICE_H
#define SB_REPLICA_DEVICE_H

#include "strategies/shared/replica.h"

/* Counts the step and reads the loss sum when due (replica.c; shared by
 * both paths): on the epoch's last step or the --max-steps step. */
sb_status sb_replica_count_step(struct sb_replica *r, struct sb_step_result *res);

#ifdef SB_HAVE_CUDA
/* Device set-up after the dataset upload: reduction scratch, permutation
 * buffers, position, phase timer. Errors: SB_ERR_NOMEM, SB_ERR_DEVICE. */
sb_status sb_replica_device_init(struct sb_replica *r);
/* Frees what sb_replica_device_init made and the captured graph. */
void sb_replica_device_free(struct sb_replica *r);
/* sb_replica_gradients and sb_replica_update on a device (replica.h). */
sb_status sb_replica_device_gradients(struct sb_replica *r, const int32_t *idx, int n,
                                      int global_batch, sb_grad_ready_fn ready, void *ctx,
                                      struct sb_step_result *res);
sb_status sb_replica_device_update(struct sb_replica *r, const float *grads,
                                   struct sb_step_result *res);
#else
/* A build without CUDA has only host-memory backends (backend.h,
 * host_memory), so replica.c never takes the device path: these keep it
 * free of build conditions and say so if ever reached. */
static inline sb_status sb_replica_device_init(struct sb_replica *r)
{
    (void)r;
    return sb_error(SB_ERR_INTERNAL, "replica: device path in a build without CUDA");
}
static inline void sb_replica_device_free(struct sb_replica *r) { (void)r; }
static inline sb_status sb_replica_device_gradients(struct sb_replica *r, const int32_t *idx,
                                                    int n, int global_batch,
                                                    sb_grad_ready_fn ready, void *ctx,
                                                    struct sb_step_result *res)
{
    (void)idx, (void)n, (void)global_batch, (void)ready, (void)ctx, (void)res;
    return sb_replica_device_init(r);
}
static inline sb_status sb_replica_device_update(struct sb_replica *r, const float *grads,
                                                 struct sb_step_result *res)
{
    (void)grads, (void)res;
    return sb_replica_device_init(r);
}
#endif

#endif
