/* The strategy interface: how replicas are placed and kept in sync.
 *
 * A strategy owns its replicas (model, optimizer state, batch buffers) and
 * its communicators. The harness drives it step by step and never knows
 * which strategy it runs; strategies reach models only through
 * workloads/workload.h and other replicas only through src/comm. A new
 * strategy is one file plus one line in strategies/registry.c. */
#ifndef SB_STRATEGY_H
#define SB_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "core/config.h"
#include "core/details.h"
#include "core/phase.h"
#include "core/status.h"
#include "data/mnist.h"
#include "workloads/workload.h"

/* What one process did in one step. */
struct sb_step_result {
    double phase_ms[SB_PHASE_COUNT]; /* this process's (replica 0's) phases */
    double loss_sum;                 /* sum of per-sample losses computed here */
    long samples;                    /* samples computed here */
};

/* What the harness gives a strategy; valid for the strategy's lifetime. */
struct sb_strategy_env {
    const struct sb_config *cfg;
    const struct sb_mnist *data;
    const struct sb_backend_ops *be;
    const struct sb_workload_ops *workload;
    int local_rank;         /* rank among this node's processes (GPU choice) */
    const void *mpi_world;  /* MPI_Comm * of the world, NULL without MPI */
};

struct sb_strategy {
    const struct sb_strategy_ops *ops;
    const struct sb_strategy_env *env;
    void *impl;
};

struct sb_strategy_ops {
    const char *name;
    const char *summary;  /* one line for --help */
    int uses_mpi;         /* one process per replica (and server), via mpirun */
    /* Processes the strategy needs for `cfg` (1 if !uses_mpi). */
    int (*processes)(const struct sb_config *cfg);
    /* Creates replicas and communicators and makes every replica hold rank
     * 0's initial parameters (a broadcast where replicas are separate). */
    sb_status (*init)(struct sb_strategy *s);
    /* One synchronous step on the global batch `global_idx`
     * (replicas * batch training-set indices; replica r takes slice r):
     * forward, backward, synchronise, update. Fills `out` for this
     * process. */
    sb_status (*step)(struct sb_strategy *s, long step, const int32_t *global_idx,
                      struct sb_step_result *out);
    /* Test accuracy (0..1) of the current parameters over the whole test
     * set; valid on world rank 0 (other ranks may return anything). */
    sb_status (*evaluate)(struct sb_strategy *s, double *accuracy);
    /* vals (n) = sum over all processes of vals, on every process. */
    sb_status (*reduce_sum)(struct sb_strategy *s, double *vals, int n);
    /* Copies the current parameters (n_params floats, layout order) to
     * host memory; valid on world rank 0. */
    sb_status (*read_params)(struct sb_strategy *s, float *host);
    /* Number of parameters of the model. */
    size_t (*n_params)(const struct sb_strategy *s);
    /* This process's communicator (counters for the report), or NULL when
     * the strategy does not communicate. */
    struct sb_comm *(*comm)(struct sb_strategy *s);
    /* Optional (may be NULL): adds what the strategy states about itself
     * (e.g. ddp's bucket count and sizes, central's staleness) to `d`. */
    void (*describe)(const struct sb_strategy *s, struct sb_strategy_details *d);
    void (*destroy)(struct sb_strategy *s);
};

/* The strategy registered under `name`, or NULL. */
const struct sb_strategy_ops *sb_strategy_find(const char *name);

/* Comma-separated names of all strategies, for usage texts. */
const char *sb_strategy_names(void);

/* Number of registered strategies and the i-th (for --help listings). */
int sb_strategy_count(void);
const struct sb_strategy_ops *sb_strategy_at(int i);

#endif
