/* The host path of a replica's step (replica_path.h): backend memory is
 * host memory (cpu), so batches are gathered straight from the loaded data
 * set and each pass is timed with host clocks around it. */
#include "core/clock.h"
#include "core/nvtx.h"
#include "strategies/shared/replica_path.h"

static sb_status data(struct sb_replica *r, struct sb_replica_slot *sl, const int32_t *idx,
                      int n, struct sb_step_result *res)
{
    double t0 = sb_now_s();
    sb_nvtx_push_phase("data", SB_NVTX_DATA);
    sb_mnist_gather(&r->env->data->train, idx, n, sl->x, sl->y);
    sb_nvtx_pop();
    res->phase_ms[SB_PHASE_DATA] += 1e3 * (sb_now_s() - t0);
    return SB_OK;
}

static sb_status forward(struct sb_replica *r, struct sb_replica_slot *sl, int global_batch,
                         struct sb_step_result *res)
{
    struct sb_model *m = r->model;
    double t0 = sb_now_s(), c0 = sb_thread_cpu_s();
    sb_nvtx_push_phase("forward", SB_NVTX_FORWARD);
    /* fp16: the loss scaled by S (1 otherwise: the plain 1/global_batch). */
    sb_status st = m->ops->forward(m, sl->x, sl->y, sl->n,
                                   sb_loss_scaler_factor(&r->scaler) / (float)global_batch,
                                   r->loss_acc);
    if (!st) st = r->env->be->check();
    sb_nvtx_pop();
    if (st) return st;
    double dt = sb_now_s() - t0;
    res->phase_ms[SB_PHASE_FORWARD] += 1e3 * dt;
    res->compute_wall_s += dt;
    res->compute_cpu_s += sb_thread_cpu_s() - c0;
    return SB_OK;
}

static sb_status backward(struct sb_replica *r, struct sb_replica_slot *sl,
                          sb_grad_ready_fn ready, void *ctx, struct sb_step_result *res)
{
    (void)sl; /* the model keeps the one forwarded batch's activations */
    struct sb_model *m = r->model;
    double t0 = sb_now_s(), c0 = sb_thread_cpu_s();
    sb_nvtx_push_phase("backward", SB_NVTX_BACKWARD);
    sb_status st = m->ops->backward(m, ready, ctx);
    sb_nvtx_pop();
    if (st) return st;
    double dt = sb_now_s() - t0;
    res->phase_ms[SB_PHASE_BACKWARD] += 1e3 * dt;
    res->compute_wall_s += dt;
    res->compute_cpu_s += sb_thread_cpu_s() - c0;
    return SB_OK;
}

static sb_status update(struct sb_replica *r, const float *grads, struct sb_step_result *res,
                        int *ran)
{
    *ran = 0; /* the passes ran the step's other phases already */
    double t0 = sb_now_s();
    sb_optimizer_step(&r->opt, r->model->params, grads); /* its own NVTX range */
    sb_status st = r->env->be->check();
    res->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (sb_now_s() - t0);
    return st;
}

static sb_status gather_test(struct sb_replica *r, const int32_t *idx, int n)
{
    sb_mnist_gather(&r->env->data->test, idx, n, r->slot[0].x, r->slot[0].y);
    return SB_OK;
}

const struct sb_replica_path sb_replica_host_path = {
    .on_device = 0,
    .data = data,
    .forward = forward,
    .backward = backward,
    .update = update,
    .gather_test = gather_test,
};
