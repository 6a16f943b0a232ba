/* Memory estimate and check before allocating; see mem_estimate.h. */
#include "harness/mem_estimate.h"

#include <stdio.h>
#include <string.h>

#include "data/mnist.h"
#include "strategies/strategy.h"
#include "workloads/estimate.h"

void sb_mem_estimate(const struct sb_config *cfg, int processes, struct sb_mem_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (processes < 1) processes = 1;
    int max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    struct sb_model_size m = sb_workload_size(cfg, max_batch);
    out->n_params = m.n_params;
    /* The strategy's model-state formula (the memory ledger's: its
     * optimizer, its sharding), the largest of its ranks. */
    const struct sb_strategy_ops *ops = sb_strategy_find(cfg->strategy);
    out->state_bytes = ops ? sb_strategy_model_state_bytes(ops, cfg, m.n_params)
                           : 3.0 * m.n_params * sizeof(float);
    out->activation_bytes = m.activation_bytes +
                            (double)max_batch * (SB_MNIST_SIDE * SB_MNIST_SIDE * sizeof(float) + 1);
    out->replicas = (cfg->replicas + processes - 1) / processes;
    if (out->replicas < 1) out->replicas = 1;
    out->data_bytes = 70000.0 * (SB_MNIST_SIDE * SB_MNIST_SIDE + 1); /* train + test */
    out->process_bytes = out->data_bytes +
                         out->replicas * (out->state_bytes + out->activation_bytes);
}

/* A number from the first line of `path`; 0 if absent or "max". */
static double read_number(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    double v = 0;
    if (fscanf(f, "%lf", &v) != 1) v = 0;
    fclose(f);
    return v;
}

double sb_mem_available(char *source, size_t source_len)
{
    double avail = 0;
    snprintf(source, source_len, "unknown");
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        double kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) {
                avail = kb * 1024;
                snprintf(source, source_len, "MemAvailable");
            }
        fclose(f);
    }
    /* The cgroup's limit (a container, systemd-run -p MemoryMax, Slurm). */
    static const char *const limits[][2] = {
        {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        double limit = read_number(limits[i][0]);
        if (limit <= 0 || limit >= 1e18) continue; /* "max", or v1's "no limit" */
        double left = limit - read_number(limits[i][1]);
        if (left < 0) left = 0;
        if (avail == 0 || left < avail) {
            avail = left;
            snprintf(source, source_len, "the cgroup limit %s", limits[i][0]);
        }
    }
    return avail;
}

sb_status sb_mem_check(const struct sb_config *cfg, int processes, int local_processes)
{
    if (strcmp(cfg->device, "cpu") != 0) return SB_OK;
    struct sb_mem_estimate e;
    sb_mem_estimate(cfg, processes, &e);
    char source[128];
    double avail = sb_mem_available(source, sizeof source);
    double need = e.process_bytes * (local_processes > 0 ? local_processes : 1);
    if (avail <= 0 || need <= avail) return SB_OK;
    return sb_error(SB_ERR_USAGE, "memory: the run needs an estimated %.1f GB on this host (%d "
                    "process%s x %.2f GB: %d replica%s x (%.3g parameters: %.2f GB model state + "
                    "%.2f GB activations) + %.2f GB data) but %.1f GB are available (%s); choose a "
                    "smaller --hidden or --batch, or fewer --replicas", need / 1e9,
                    local_processes, local_processes == 1 ? "" : "es", e.process_bytes / 1e9,
                    e.replicas, e.replicas == 1 ? "" : "s", e.n_params, e.state_bytes / 1e9,
                    e.activation_bytes / 1e9, e.data_bytes / 1e9, avail / 1e9, source);
}
