/* Registry of workloads: name -> ops. A new workload is one file plus one
 * line here. */
#include <string.h>

#include "workloads/workload.h"

extern const struct sb_workload_ops sb_workload_mlp;
extern const struct sb_workload_ops sb_workload_cnn;
extern const struct sb_workload_ops sb_workload_vit;

static const struct sb_workload_ops *const workloads[] = {
    &sb_workload_mlp,
    &sb_workload_cnn,
    &sb_workload_vit,
};

const struct sb_workload_ops *sb_workload_find(const char *name)
{
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
        if (strcmp(workloads[i]->name, name) == 0) return workloads[i];
    return NULL;
}

const char *sb_workload_names(void) { return "mlp, cnn, vit"; }
