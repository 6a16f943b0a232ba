/* The host path of a replica's step (replica_path.h): backend memory is
 * host memory (cpu), so batches are gathered straight from the loaded data
 * set and phases are timed with host clocks around each phase. */
#include "core/clock.h"
#include "core/nvtx.h"
#include "strategies/shared/replica_path.h"

static sb_status gradients(struct sb_replica *r, const int32_t *idx, int n, int global_batch,
                           sb_grad_ready_fn ready, void *ctx, struct sb_step_result *res,
                           int *ran)
{
    struct sb_model *m = r->model;
    *ran = 0;
    double t0 = sb_now_s();
    sb_nvtx_push_phase("data", SB_NVTX_DATA);
    sb_mnist_gather(&r->env->data->train, idx, n, r->x, r->y);
    sb_nvtx_pop();
    double t1 = sb_now_s();

    sb_nvtx_push_phase("forward", SB_NVTX_FORWARD);
    sb_status st = m->ops->forward(m, r->x, r->y, n, 1.0f / (float)global_batch, r->loss_acc);
    if (!st) st = r->env->be->check();
    sb_nvtx_pop();
    if (st) return st;
    double t2 = sb_now_s();

    sb_nvtx_push_phase("backward", SB_NVTX_BACKWARD);
    st = m->ops->backward(m, ready, ctx);
    sb_nvtx_pop();
    if (st) return st;
    double t3 = sb_now_s();

    res->phase_ms[SB_PHASE_DATA] += 1e3 * (t1 - t0);
    res->phase_ms[SB_PHASE_FORWARD] += 1e3 * (t2 - t1);
    res->phase_ms[SB_PHASE_BACKWARD] += 1e3 * (t3 - t2);
    *ran = 1;
    return SB_OK;
}

static sb_status update(struct sb_replica *r, const float *grads, struct sb_step_result *res,
                        int *ran)
{
    *ran = 0; /* gradients ran the step's other phases already */
    double t0 = sb_now_s();
    sb_optimizer_step(&r->opt, r->model->params, grads); /* its own NVTX range */
    sb_status st = r->env->be->check();
    res->phase_ms[SB_PHASE_OPTIMIZER] += 1e3 * (sb_now_s() - t0);
    return st;
}

static sb_status gather_test(struct sb_replica *r, const int32_t *idx, int n)
{
    sb_mnist_gather(&r->env->data->test, idx, n, r->x, r->y);
    return SB_OK;
}

const struct sb_replica_path sb_replica_host_path = {
    .on_device = 0,
    .gradients = gradients,
    .update = update,
    .gather_test = gather_test,
};
