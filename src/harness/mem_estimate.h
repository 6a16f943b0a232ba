/* How much host memory a training process will need, estimated from the
 * configuration before anything is allocated, and the check against the
 * memory available (issue 23 item 9: `--hidden 65536,65536` is refused with
 * the figure instead of being ended by the OOM killer).
 *
 * One function for the figure (sb_mem_estimate), in a file of its own, so
 * that the memory ledger of the ZeRO work can replace it. Only host memory
 * is estimated (--device cpu); with --device cuda the model lives on the
 * GPU and the check is skipped. */
#ifndef SB_MEM_ESTIMATE_H
#define SB_MEM_ESTIMATE_H

#include <stddef.h>

#include "core/config.h"
#include "core/status.h"

struct sb_mem_estimate {
    double n_params;          /* parameters of one replica's model */
    double state_bytes;       /* per replica: parameters, gradients, optimizer state */
    double activation_bytes;  /* per replica: activations, their gradients, batch buffers */
    int replicas;             /* replicas in one process */
    double data_bytes;        /* per process: the MNIST pixels and labels (uint8) */
    double process_bytes;     /* one process: data + replicas x (state + activations) */
};

/* Estimates one process of a run of cfg whose strategy starts `processes`
 * processes: replicas per process = ceil(cfg->replicas / processes) (all
 * of mirrored's replicas are in its one process; ddp has one each; central's
 * servers hold one model). Formulas: state = the strategy's model-state
 * bytes of its largest rank (sb_strategy_model_state_bytes: fp32
 * parameters, gradients and SGD's 1 or Adam's 2 optimizer floats per
 * parameter, sharded where the strategy shards them; docs/zero.md);
 * activations from workloads/estimate.h for max(--batch, --eval-batch)
 * samples plus the (batch, 784) float input buffer. */
void sb_mem_estimate(const struct sb_config *cfg, int processes, struct sb_mem_estimate *out);

/* The memory available to this process, in bytes: the smaller of
 * /proc/meminfo's MemAvailable and the cgroup's limit minus its usage
 * (v2 memory.max - memory.current, v1 memory.limit_in_bytes -
 * memory.usage_in_bytes). Writes where the figure came from to `source`.
 * Returns 0 when nothing could be read. */
double sb_mem_available(char *source, size_t source_len);

/* Refuses (SB_ERR_USAGE, one line with both figures and a hint) a cpu run
 * whose `local_processes` processes on this host would need more than the
 * memory available. SB_OK on cuda or when the available memory is unknown. */
sb_status sb_mem_check(const struct sb_config *cfg, int processes, int local_processes);

#endif
