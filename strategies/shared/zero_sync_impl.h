/* Internal to the zero_sync piece (zero_sync.c: units, shards,
 * reduce-scatters, optimizer, phases; zero_gather.c: stage 3's gathers):
 * its state and the functions the two files share. Strategies use
 * zero_sync.h. */
#ifndef SB_ZERO_SYNC_IMPL_H
#define SB_ZERO_SYNC_IMPL_H

#include "core/clock.h"
#include "strategies/shared/buckets.h"
#include "strategies/shared/optimizer.h"
#include "strategies/shared/zero_sync.h"

enum sb_zero_unit_state { SB_ZERO_UNIT_FREE = 0, SB_ZERO_UNIT_GATHERING, SB_ZERO_UNIT_READY };

/* One unit: a bucket (stages 1-2) or a layer (stage 3). */
struct sb_zero_unit {
    size_t off, count;  /* in the model's flat buffers */
    size_t *counts;     /* (size) block of each rank */
    size_t mine_off;    /* this rank's block: [off + mine_off, + mine) */
    size_t mine;
    size_t soff;        /* where the block lives in the shard buffers */
    size_t pending;     /* floats of the unit not yet ready this step */
    int rs_issued, rs_freed;
    struct sb_comm_request rs, ag;
    enum sb_zero_unit_state state; /* stage 3: its parameters in m->params */
    int gathered_for;      /* stage 3: 0 forward, 1 backward */
};

struct sb_zero_sync {
    struct sb_model *model;      /* not owned */
    const struct sb_backend_ops *be;
    struct sb_grad_range range;
    struct sb_comm *comm;  /* training traffic, counted in the report (not owned) */
    struct sb_comm *quiet; /* evaluation and --save-params gathers (a duplicate, owned) */
    struct sb_comm *gcomm; /* the one stage 3's hook gathers over now */
    int stage, size, rank, overlap;
    struct sb_bucket_plan plan;
    int n_units;
    struct sb_zero_unit *u; /* (n_units) in backward (launch) order: u[0] ends the range */
    size_t shard;          /* floats of this rank's shard */
    float *gshard;         /* (shard) reduced gradients; stages 1-2: also the all-gather's send */
    float *pshard;         /* (shard) stage 3: the parameters */
    struct sb_optimizer opt; /* (shard) */
    sb_status cb_status;   /* first error inside a callback */
    int launched;          /* units whose reduce-scatter started this step, in order */
    int backward_phase;    /* stage 3: the hook has seen backward this step */
    int half;              /* 16-bit reduce-scatters */
    enum sb_half_format fmt;
    int param_half;        /* 16-bit parameter all-gathers in param_fmt (sb_zero_sync_cfg) */
    enum sb_half_format param_fmt;
    double convert_s;      /* this step's 16-bit conversion seconds (compress phase) */
    /* This step's seconds inside the hooks (the layer hook, the ready
     * callback) that the model's forward (0) and backward (1) timed as
     * theirs: on collectives (blocked_s; frees and conversions excluded)
     * and on conversions (hook_convert_s, backward only); step_phases
     * moves them to comm_exposed and compress. free_s: the frees' seconds
     * (they stay compute). */
    double blocked_s[2], hook_convert_s, free_s;
    /* (3 n_units) this step's collectives, for the comm phase's union of
     * their spans: n_iv of them, stage 3's gathers as each completes (two
     * a unit), then every unit's reduce-scatter. */
    struct sb_comm_request *iv;
    int n_iv;
};

/* The clocks at a hook's entry (see sb_zero_hook_leave). */
struct sb_zero_hook_mark {
    double t, free_s, convert_s;
};

static inline struct sb_zero_hook_mark sb_zero_hook_enter(const struct sb_zero_sync *z)
{
    return (struct sb_zero_hook_mark){sb_now_s(), z->free_s, z->convert_s};
}

/* Leaves a hook entered at `at`, run inside the model's forward (backward
 * 0) or backward (1): its seconds less the frees and 16-bit conversions
 * inside it were spent on collectives (issuing, polling, waiting for
 * them: compute waited) and go to z->blocked_s[backward]; the
 * conversions to z->hook_convert_s. */
static inline void sb_zero_hook_leave(struct sb_zero_sync *z, int backward,
                                      struct sb_zero_hook_mark at)
{
    double convert = z->convert_s - at.convert_s;
    double s = sb_now_s() - at.t - (z->free_s - at.free_s) - convert;
    z->blocked_s[backward] += s > 0.0 ? s : 0.0;
    z->hook_convert_s += convert;
}

/* Starts the all-gather of send (this rank's counts[rank] parameters) into
 * recv over c as req: 16-bit on the wire (blocking, complete at issue;
 * its conversions count as its communication) under z->param_half where
 * c has the op, else sb_comm_iallgather (zero_gather.c). */
sb_status sb_zero_gather_params(struct sb_zero_sync *z, struct sb_comm *c, const float *send,
                                float *recv, const size_t *counts, struct sb_comm_request *req);

/* Polls every unit in flight (stratbench's rings advance only when their
 * owner polls them, src/comm/mpi_allreduce.h); stages 2-3 free a unit's
 * full gradients once its reduce-scatter has completed (zero_sync.c). */
sb_status sb_zero_poll_units(struct sb_zero_sync *z);

/* Stages 2-3: frees unit u's full gradients once its reduce-scatter has
 * completed; the seconds go to z->free_s (zero_sync.c). */
void sb_zero_discard_grads(struct sb_zero_sync *z, struct sb_zero_unit *u);

/* Stage 3: frees unit u's gathered parameters; the seconds go to
 * z->free_s (zero_gather.c). */
void sb_zero_discard_params(struct sb_zero_sync *z, struct sb_zero_unit *u);

/* Stage 3: unit u's gather has completed (u->ag.done_s set); a training
 * step's (over z->comm) is kept for the comm phase (zero_gather.c). */
void sb_zero_gathered(struct sb_zero_sync *z, struct sb_zero_unit *u);

/* Stage 3's layer hook (workloads/workload.h; ctx = the piece): the layer
 * of `off` is about to run (zero_gather.c); layers outside the range are
 * left alone. */
void sb_zero_on_layer(void *ctx, size_t off, size_t count, int backward);

#endif
