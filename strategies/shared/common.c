/* The shared defaults of the strategy interface: what a strategy with one
 * replica per process (s->replica) would otherwise copy, and the sums over
 * the communicators a strategy lists (s->comms, s->world); see strategy.h. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda.h"
#include "workloads/model_table.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/precision.h"
#include "strategies/shared/replica.h"

sb_status sb_strategy_place(const struct sb_strategy_ops *ops, const struct sb_config *cfg,
                            int local_rank, int local_size, struct sb_placement *out)
{
    int host = cfg->backend->host_memory;
    struct sb_placement_request q = {
        .host_memory = host,
        .gpu_per_member = cfg->comm_entry && cfg->comm_entry->gpu_per_member,
        .devices = host ? 0 : sb_cuda_device_count(),
        .local_rank = local_rank,
        .local_size = local_size,
        .replicas = ops->uses_mpi ? 1 : cfg->replicas,
    };
    return sb_placement_decide(&q, out);
}

size_t sb_strategy_n_params(const struct sb_strategy *s)
{
    return s->ops->model_n_params ? s->ops->model_n_params(s) : s->replica->model->n_params;
}

int sb_strategy_layer_summaries(const struct sb_strategy *s, struct sb_layer_summary *out,
                                int cap)
{
    const struct sb_model *m = s->replica ? s->replica->model : NULL;
    if (!m || m->part.first_layer != 0 || m->part.n_layers != m->whole_layers ||
        m->part.tp_size != 1)
        return 0;
    return sb_model_layer_summaries(m, out, cap);
}

size_t sb_strategy_local_n_params(const struct sb_strategy *s)
{
    return s->replica->model->n_params;
}

int sb_strategy_consistency_group(const struct sb_strategy *s)
{
    return s->ops->consistency_group ? s->ops->consistency_group(s) : 0;
}

sb_status sb_strategy_p2p_max_bytes(const struct sb_strategy_ops *ops,
                                    const struct sb_config *cfg, size_t *bytes)
{
    *bytes = 0;
    return ops->p2p_max_bytes ? ops->p2p_max_bytes(cfg, bytes) : SB_OK;
}

int sb_strategy_world_size(const struct sb_strategy_ops *ops, const struct sb_config *cfg)
{
    if (ops->world_size) return ops->world_size(cfg);
    return ops->uses_mpi ? cfg->replicas : 1;
}

int sb_strategy_replicas_of_world(const struct sb_strategy_ops *ops, const struct sb_config *cfg,
                                  int world)
{
    if (ops->replicas_of_world) return ops->replicas_of_world(cfg, world);
    return ops->uses_mpi ? world : cfg->replicas;
}

sb_status sb_strategy_after_step(struct sb_strategy *s, long step, struct sb_step_result *out)
{
    return s->ops->after_step ? s->ops->after_step(s, step, out) : SB_OK;
}

sb_status sb_strategy_reduce_sum(struct sb_strategy *s, double *vals, int n)
{
    return s->world ? sb_comm_allreduce_f64(s->world, vals, (size_t)n) : SB_OK;
}

sb_status sb_strategy_read_params(struct sb_strategy *s, float *host)
{
    if (s->ops->read_params) return s->ops->read_params(s, host);
    const struct sb_model *m = s->replica->model;
    return s->env->be->download(host, m->params, m->n_params * sizeof(float));
}

static void add(struct sb_comm_counter *to, const struct sb_comm_counter *c)
{
    to->calls += c->calls;
    to->bytes += c->bytes;
    to->seconds += c->seconds;
}

void sb_strategy_comm_counters(const struct sb_strategy *s,
                               struct sb_comm_counter out[SB_COMM_NKINDS], int *ranks)
{
    memset(out, 0, SB_COMM_NKINDS * sizeof *out);
    *ranks = s->n_comms > 0 ? s->comms[0]->size : 1;
    for (int i = 0; i < s->n_comms; i++)
        for (int k = 0; k < SB_COMM_NKINDS; k++) add(&out[k], &s->comms[i]->counters[k]);
}

void sb_strategy_comm_by_role(const struct sb_strategy *s,
                              struct sb_comm_role_totals out[SB_COMM_NROLES])
{
    memset(out, 0, SB_COMM_NROLES * sizeof *out);
    for (int i = 0; i < s->n_comms; i++)
        if ((unsigned)s->comms[i]->role < SB_COMM_NROLES)
            sb_comm_role_add(&out[s->comms[i]->role], s->comms[i]);
}

void sb_strategy_comm_algorithms(const struct sb_strategy *s,
                                 struct sb_comm_counter by_algo[SB_ALLREDUCE_NALGOS],
                                 const char *names[SB_ALLREDUCE_NALGOS],
                                 struct sb_comm_stage stages[SB_COMM_STAGES_MAX], int *n_stages)
{
    memset(by_algo, 0, SB_ALLREDUCE_NALGOS * sizeof *by_algo);
    for (int a = 0; a < SB_ALLREDUCE_NALGOS; a++) names[a] = NULL;
    *n_stages = 0;
    for (int i = 0; i < s->n_comms; i++) {
        const struct sb_comm *c = s->comms[i];
        for (int a = 0; a < SB_ALLREDUCE_NALGOS; a++) {
            if (c->allreduce_by_algo[a].calls == 0) continue;
            add(&by_algo[a], &c->allreduce_by_algo[a]);
            if (!names[a]) names[a] = sb_comm_algo_name(c, (enum sb_allreduce_algo)a);
        }
        for (int k = 0; k < c->n_stages && *n_stages < SB_COMM_STAGES_MAX; k++)
            stages[(*n_stages)++] = c->stages[k];
    }
}

void sb_strategy_reset_comm_counters(struct sb_strategy *s)
{
    for (int i = 0; i < s->n_comms; i++) sb_comm_reset_counters(s->comms[i]);
    if (s->ops->reset_counters) s->ops->reset_counters(s);
}

void sb_strategy_model_state_formula(const struct sb_strategy_ops *ops,
                                     const struct sb_config *cfg, double n_params, int server,
                                     struct sb_model_state *out)
{
    if (ops->model_state_formula) {
        ops->model_state_formula(cfg, n_params, server, out);
        return;
    }
    /* A full replica: the ZeRO paper's baseline (its section 3.1), b bytes
     * a value (4 fp32, 2 bf16/fp16). */
    double b = sb_precision_value_bytes(cfg);
    out->param_bytes = b * n_params;
    out->grad_bytes = b * n_params;
    out->optimizer_bytes = 4.0 * sb_optimizer_state_floats(cfg) * n_params;
}

double sb_strategy_model_state_bytes(const struct sb_strategy_ops *ops,
                                     const struct sb_config *cfg, double n_params)
{
    struct sb_model_state worker, server;
    sb_strategy_model_state_formula(ops, cfg, n_params, 0, &worker);
    double most = sb_model_state_bytes(&worker);
    /* Ranks besides the replicas are servers (central). */
    if (sb_strategy_world_size(ops, cfg) > cfg->replicas) {
        sb_strategy_model_state_formula(ops, cfg, n_params, 1, &server);
        if (sb_model_state_bytes(&server) > most) most = sb_model_state_bytes(&server);
    }
    return most;
}

void sb_memory_entry_of_replica(const struct sb_strategy *s, const struct sb_replica *r,
                                int replica, struct sb_memory_entry *out)
{
    const struct sb_model *m = r->model;
    memset(out, 0, sizeof *out);
    snprintf(out->role, sizeof out->role, "replica");
    out->replica = replica;
    out->held.param_bytes = (double)m->n_params * sizeof(float);
    out->held.grad_bytes = (double)m->n_params * sizeof(float);
    out->held.optimizer_bytes = (double)sb_optimizer_state_bytes(&r->opt);
    out->activation_bytes = (double)m->activation_bytes;
    sb_strategy_model_state_formula(s->ops, s->env->cfg, (double)m->n_params, 0, &out->formula);
}

void sb_strategy_precision_state(const struct sb_strategy *s, double *loss_scale, long *skipped)
{
    if (s->ops->precision_state) {
        s->ops->precision_state(s, loss_scale, skipped);
        return;
    }
    *loss_scale = s->replica ? s->replica->scaler.scale : 1.0;
    *skipped = s->replica ? s->replica->scaler.skipped : 0;
}

int sb_strategy_memory(const struct sb_strategy *s, struct sb_memory_entry *out, int cap)
{
    int n = 0;
    if (s->ops->memory) {
        n = s->ops->memory(s, out, cap);
    } else if (cap >= 1 && s->replica) {
        sb_memory_entry_of_replica(s, s->replica, s->world ? s->world->rank : 0, out);
        n = 1;
    }
    /* Every strategy allocates float buffers: restated in the run's precision. */
    for (int i = 0; i < n; i++) sb_precision_ledger(s->env->cfg, &out[i]);
    return n;
}
