/* The memory ledger: what one replica or server holds, by kind, in bytes
 * of backend memory, with the ZeRO paper's formula for its model state
 * beside it (docs/zero.md). Strategies fill it (strategies/strategy.h,
 * the memory op), the harness gathers every rank's to rank 0, and the
 * report writes memory.by_rank[] (reports/README.md). */
#ifndef SB_MEMORY_H
#define SB_MEMORY_H

/* Entries one process may state (mirrored: one per replica thread). */
#define SB_MEMORY_ENTRIES_MAX 64

/* Model state: parameters, gradients and optimizer state, in bytes. */
struct sb_model_state {
    double param_bytes;
    double grad_bytes;
    double optimizer_bytes;
};

struct sb_memory_entry {
    char role[16];            /* "replica", "worker", "server", "server+worker" */
    int rank;                 /* world rank (set by the harness) */
    int replica;              /* replica index, job-wide; -1: none (a server) */
    struct sb_model_state held;    /* what the strategy allocated */
    double comm_bytes;        /* communication buffers and gathered parameters */
    double activation_bytes;  /* activations and backward scratch (the workload's) */
    struct sb_model_state formula; /* the ZeRO paper's accounting for the run's precision */
    double peak_rss_bytes;    /* the process's VmHWM (set by the harness); < 0 unknown */
    double peak_device_bytes; /* the process's peak device memory; < 0: not on a device */
    /* --precision bf16|fp16: `held` counts each 16-bit parameter and
     * gradient at 2 bytes, as a device storing them so would; this suite
     * stores them rounded in float buffers (4 bytes), and the 2 bytes a
     * value that adds are here (docs/precision.md). 0 under fp32. */
    double emulation_bytes;
};

/* param + grad + optimizer bytes. */
static inline double sb_model_state_bytes(const struct sb_model_state *m)
{
    return m->param_bytes + m->grad_bytes + m->optimizer_bytes;
}

/* Total bytes of a ledger entry, as the report's total_bytes: model state
 * + emulation + communication buffers + activations. */
static inline double sb_memory_entry_total_bytes(const struct sb_memory_entry *e)
{
    return sb_model_state_bytes(&e->held) + e->emulation_bytes + e->comm_bytes +
           e->activation_bytes;
}

#endif
