/* A pipeline rank's model chunks: their construction (parts of the
 * workload's model, activation slots, point-to-point buffers, dp
 * synchronisation with --replicas) and the gather of every chunk's
 * parameters into the whole model on world rank 0 (evaluation and
 * read_params). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/shared/pipeline_exec.h"
#include "strategies/shared/tp_shards.h"

/* Allocates chunk c's slots, buffers and requests for n_slots
 * micro-batches in flight. */
static sb_status chunk_buffers(struct pipeline *p, struct chunk *c, int n_slots)
{
    const struct sb_backend_ops *be = c->r->env->be;
    size_t mb = (size_t)p->mb;
    c->slot_of = malloc((size_t)p->M * sizeof *c->slot_of);
    c->free_slot = malloc((size_t)n_slots * sizeof *c->free_slot);
    c->send_act = calloc((size_t)n_slots, sizeof *c->send_act);
    c->send_grad = calloc((size_t)p->M, sizeof *c->send_grad);
    if (!c->slot_of || !c->free_slot || !c->send_act || !c->send_grad)
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    if (!c->first) {
        SB_TRY(be->alloc((void **)&c->act_in, n_slots * mb * c->in_floats * sizeof(float)));
        SB_TRY(be->alloc((void **)&c->grad_in,
                         (size_t)p->M * mb * c->in_floats * sizeof(float)));
    }
    if (!c->last) SB_TRY(be->alloc((void **)&c->grad_out, mb * c->out_floats * sizeof(float)));
    return SB_OK;
}

/* The workload's activation bytes per slot and of its scratch for chunk
 * c's `part` (built with 1 and with 2 slots, then freed). */
static sb_status probe_slot_bytes(struct sb_strategy *s, struct pipeline *p,
                                  const struct sb_part *part, struct chunk *c)
{
    double bytes[2];
    for (int k = 0; k < 2; k++) {
        struct sb_part one = *part;
        one.slots = k + 1;
        struct sb_model *m = NULL;
        SB_TRY(s->env->workload->create_part(s->env->cfg, s->env->be, p->mb, &one, &m));
        bytes[k] = (double)m->activation_bytes;
        m->ops->destroy(m);
    }
    c->per_slot = bytes[1] - bytes[0];
    c->scratch = 2 * bytes[0] - bytes[1];
    return SB_OK;
}

/* Builds this rank's chunks: virtual stages stage, stage + P, ... */
sb_status sb_pp_make_chunks(struct sb_strategy *s, struct pipeline *p, const int *slots)
{
    const struct sb_config *cfg = s->env->cfg;
    long steps = (long)cfg->epochs * (s->env->data->train.n / sb_config_global_batch(cfg));
    if (cfg->max_steps && cfg->max_steps < steps) steps = cfg->max_steps;
    if (!(p->chunk = calloc((size_t)p->V, sizeof *p->chunk)))
        return sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    for (int v = 0; v < p->V; v++) {
        struct chunk *c = &p->chunk[v];
        c->vstage = v * p->P + p->stage;
        c->first_layer = p->layer_first[c->vstage];
        c->n_layers = p->layer_first[c->vstage + 1] - c->first_layer;
        c->first = c->vstage == 0;
        c->last = c->vstage == p->P * p->V - 1;
        struct sb_part part = {c->first_layer, c->n_layers, p->tp_rank, p->T, slots[v], p->sp,
                               p->sched.shape.kind == SB_PP_ZBH1, p->M > 1};
        SB_TRY(sb_replica_create_part(s->env, 1, &part, p->mb, &c->r));
        struct sb_model *m = c->r->model;
        /* Every chunk's hook sums over the one tp communicator (the
         * chunks' passes never overlap). */
        if (p->T > 1) sb_tp_ops_install(&p->tp, m, p->grid->tp_comm);
        c->in_floats = m->layers[0].in_floats;
        c->out_floats = m->layers[m->n_layers - 1].out_floats;
        SB_TRY(chunk_buffers(p, c, slots[v]));
        SB_TRY(probe_slot_bytes(s, p, &part, c));
        p->comm_bytes += (double)((c->first ? 0 : (size_t)slots[v] + (size_t)p->M) * p->mb *
                                  c->in_floats + (c->last ? 0 : (size_t)p->mb * c->out_floats)) *
                         sizeof(float);
        if (p->D > 1 && p->zero_stage == 1) {
            /* ZeRO stage 1 over dp: after the last micro-batch's backward the
             * chunk's gradients are reduce-scattered, each dp rank steps its
             * shard of the optimizer state, and the parameters all-gathered. */
            struct sb_zero_sync_cfg zc = {.stage = 1, .bucket_mb = SB_BUCKET_MB_DEFAULT,
                                          .overlap = 0, .run = cfg};
            SB_TRY(sb_zero_sync_create(p->grid->dp_comm, m, s->env->be,
                                       sb_grad_range_whole(m), &zc, &c->zsync));
        } else if (p->D > 1) {
            struct sb_dp_sync_cfg sc = {.bucket_mb = SB_BUCKET_MB_DEFAULT, .overlap = 1,
                                        .host_memory = s->env->be->host_memory,
                                        .last_step = steps - 1};
            SB_TRY(sb_dp_sync_create(p->grid->dp_comm, m, sb_grad_range_whole(m), &sc,
                                     &c->sync));
        }
    }
    s->replica = p->chunk[0].r;
    return SB_OK;
}

/* With --tp: every rank of dp replica 0 places its chunks' shards in a
 * zeroed buffer of the whole model's layout (tp_shards.h: the replicated
 * tensors from tp rank 0 only), every other rank contributes zeros, and
 * the buffers are summed over the world's uncounted copy onto every rank
 * (x + 0 = x: exact); world rank 0 keeps the whole model. Collective over
 * the world. */
static sb_status gather_shards(struct sb_strategy *s, struct pipeline *p)
{
    struct sb_model *whole = p->whole ? p->whole->model : NULL;
    size_t n = p->whole_n_params, most = 0;
    for (int v = 0; v < p->V; v++)
        if (p->chunk[v].r->model->n_params > most) most = p->chunk[v].r->model->n_params;
    float *sum = calloc(n, sizeof *sum), *mine = malloc(most * sizeof *mine);
    sb_status st = sum && mine ? SB_OK : sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
    for (int v = 0; v < p->V && !st && p->grid->me.dp_rank == 0; v++) {
        const struct sb_model *m = p->chunk[v].r->model;
        int *idx = malloc((size_t)m->n_tensors * sizeof *idx);
        if (!idx) st = sb_error(SB_ERR_NOMEM, "pipeline: out of memory");
        if (!st) st = sb_tp_shard_match(m, p->chunk_whole, idx);
        if (!st) st = s->env->be->download(mine, m->params, m->n_params * sizeof *mine);
        if (!st) sb_tp_shard_place(m, p->chunk_whole, idx, p->tp_rank, mine, sum);
        free(idx);
    }
    if (!st) st = sb_comm_allreduce(p->gather_world, sum, n);
    if (!st && whole) st = s->env->be->upload(whole->params, sum, n * sizeof *sum);
    free(sum);
    free(mine);
    return st;
}

/* Copies every virtual stage's parameters into the whole model on world
 * rank 0 (dp replica 0's stages, over the uncounted gather communicator;
 * with --tp, gather_shards). */
sb_status sb_pp_gather_whole(struct sb_strategy *s, struct pipeline *p)
{
    const struct sb_backend_ops *be = s->env->be;
    if (p->T > 1) return gather_shards(s, p);
    if (p->grid->me.dp_rank != 0) return SB_OK;
    struct sb_model *whole = p->whole ? p->whole->model : NULL;
    for (int vs = 0; vs < p->P * p->V; vs++) {
        int owner = vs % p->P, v = vs / p->P;
        if (p->stage == 0 && owner == 0) {
            const struct sb_model *m = p->chunk[v].r->model;
            size_t off = whole->layers[p->layer_first[vs]].offset;
            be->copy(whole->params + off, m->params, m->n_params);
        } else if (p->stage == 0) {
            size_t off = whole->layers[p->layer_first[vs]].offset;
            const struct sb_layer_desc *end = &whole->layers[p->layer_first[vs + 1] - 1];
            struct sb_comm_request req = {0};
            SB_TRY(sb_comm_irecv(p->gather, whole->params + off, end->offset + end->count - off,
                                 owner, SB_COMM_SENDRECV, &req));
            SB_TRY(sb_comm_wait(p->gather, &req));
        } else if (owner == p->stage) {
            const struct sb_model *m = p->chunk[v].r->model;
            struct sb_comm_request req = {0};
            SB_TRY(sb_comm_isend(p->gather, m->params, m->n_params, 0, SB_COMM_SENDRECV, &req));
            SB_TRY(sb_comm_wait(p->gather, &req));
        }
    }
    return SB_OK;
}
