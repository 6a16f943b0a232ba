/* The shared defaults of the strategy interface: what a strategy with one
 * replica and one communicator per process (s->replica, s->comm) would
 * otherwise copy; see strategy.h. */
#include <string.h>

#include "strategies/replica.h"

size_t sb_strategy_n_params(const struct sb_strategy *s) { return s->replica->model->n_params; }

sb_status sb_strategy_reduce_sum(struct sb_strategy *s, double *vals, int n)
{
    if (s->ops->reduce_sum) return s->ops->reduce_sum(s, vals, n);
    return s->comm ? sb_comm_allreduce_f64(s->comm, vals, (size_t)n) : SB_OK;
}

sb_status sb_strategy_read_params(struct sb_strategy *s, float *host)
{
    if (s->ops->read_params) return s->ops->read_params(s, host);
    const struct sb_model *m = s->replica->model;
    return s->env->be->download(host, m->params, m->n_params * sizeof(float));
}

void sb_strategy_comm_counters(const struct sb_strategy *s,
                               struct sb_comm_counter out[SB_COMM_NKINDS], int *ranks)
{
    if (s->ops->comm_counters) {
        s->ops->comm_counters(s, out, ranks);
        return;
    }
    memset(out, 0, SB_COMM_NKINDS * sizeof *out);
    *ranks = 1;
    if (!s->comm) return;
    memcpy(out, s->comm->counters, SB_COMM_NKINDS * sizeof *out);
    *ranks = s->comm->size;
}

void sb_strategy_reset_comm_counters(struct sb_strategy *s)
{
    if (s->ops->reset_comm_counters) s->ops->reset_comm_counters(s);
    else if (s->comm) sb_comm_reset_counters(s->comm);
}
