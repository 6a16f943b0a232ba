/* Registry of workloads: name -> ops. A new workload is one file plus one
 * line here; the names list of the usage texts is made from this table. */
#include <stdio.h>
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

#define N_WORKLOADS (sizeof workloads / sizeof workloads[0])

const struct sb_workload_ops *sb_workload_find(const char *name)
{
    for (size_t i = 0; i < N_WORKLOADS; i++)
        if (strcmp(workloads[i]->name, name) == 0) return workloads[i];
    return NULL;
}

const char *sb_workload_names(void)
{
    static char names[256]; /* the same text on every call */
    size_t used = 0;
    names[0] = '\0';
    for (size_t i = 0; i < N_WORKLOADS && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 workloads[i]->name);
    return names;
}
