/* Strategy "central": fp16's dynamic loss scaling (--precision fp16) across
 * workers and servers; see central.h and docs/precision.md ("fp16 under
 * central").
 *
 * Every rank must decide alike whether a step runs, and every worker must
 * scale its next loss by the S the servers unscale with:
 *   - the flag: a worker whose gradient holds an inf or a NaN anywhere
 *     writes +inf into the first value of every shard it pushes (0 extra
 *     bytes: the gradient is discarded anyway), so every server finds a
 *     non-finite value in its sum, whatever shard held the worker's inf;
 *   - sync: every server sees every worker's flag and decides alike on the
 *     same step; server 0 appends its decision, one word, to its pulls, and
 *     every worker updates its scaler with it: every rank's S then follows
 *     the same sequence (GradScaler's update is deterministic);
 *   - async: every push is one scaler step of its worker: worker w's S
 *     changes only with w's own flags, which every server sees in w's
 *     pushes (in order: one pair of ranks, one tag), so each server drives
 *     a copy of w's scaler that makes w's decisions, and no word is sent. */
#include <math.h>

#include "strategies/shared/central.h"

sb_status sb_central_flag_push(struct central *c, int *found)
{
    *found = 0;
    if (!c->scaled) return SB_OK;
    const struct sb_backend_ops *be = c->replica->env->be;
    struct sb_model *m = c->replica->model;
    /* x *= 1 leaves every value as it was: the check alone. */
    be->unscale_check(m->grads, 1.0f, m->n_params, found);
    SB_TRY(be->check());
    if (!*found) return SB_OK;
    const float inf = INFINITY;
    for (int k = 0; k < c->n_servers; k++) {
        int first, count;
        sb_central_shard(c, k, &first, &count);
        SB_TRY(be->upload(m->grads + first, &inf, sizeof inf));
    }
    return SB_OK;
}

sb_status sb_central_decide(struct central *c, struct sb_loss_scaler *ls, float *grads,
                            size_t n, int *skip)
{
    const struct sb_backend_ops *be = c->replica->env->be;
    int found = 0;
    sb_loss_scaler_unscale(ls, be, grads, n, &found);
    SB_TRY(be->check());
    *skip = sb_loss_scaler_update(ls, found);
    return SB_OK;
}

int sb_central_pull_word(const struct central *c)
{
    return c->scaled && !c->async && c->server == 0;
}

sb_status sb_central_pull_with_word(struct central *c, int skip)
{
    const struct sb_backend_ops *be = c->replica->env->be;
    size_t n = (size_t)c->shard_count;
    be->copy(c->sum, c->replica->model->params + c->shard_first, n);
    const float word = skip ? 1.0f : 0.0f;
    return be->upload(c->sum + n, &word, sizeof word);
}

sb_status sb_central_read_word(struct central *c, int found)
{
    const struct sb_backend_ops *be = c->replica->env->be;
    int first, count;
    sb_central_shard(c, 0, &first, &count);
    be->copy(c->replica->model->params + first, c->pull0, (size_t)count);
    float word = 0.0f;
    SB_TRY(be->download(&word, c->pull0 + count, sizeof word));
    int skip = word != 0.0f;
    if (found && !skip)
        return sb_error(SB_ERR_INTERNAL, "central: worker %d flagged an inf in its gradient "
                        "but server 0 did not skip the step", c->worker);
    sb_loss_scaler_update(&c->replica->scaler, skip);
    return SB_OK;
}

void sb_central_precision_state(const struct central *c, double *loss_scale, long *skipped)
{
    const struct sb_loss_scaler *own = &c->replica->scaler;
    *loss_scale = own->scale;
    *skipped = own->skipped;
    if (!c->push_scaler) return; /* sync, or a worker: its own scaler */
    /* An async server: the workers' scalers it drives, and rank 0's own
     * with --servers 0 (whose skips pushes_skipped already counts). */
    double least = c->worker >= 0 ? own->scale : INFINITY;
    for (int w = c->worker >= 0 ? 1 : 0; w < c->n_workers; w++)
        if (c->push_scaler[w].scale < least) least = c->push_scaler[w].scale;
    *loss_scale = least;
    *skipped = c->pushes_skipped;
}
