/* Registry of tensor backends: name -> ops. A new backend is one file plus
 * one line here. */
#include "backend/backend.h"
#include "backend/cuda.h"

#include <string.h>

static const struct sb_backend_ops *const backends[] = {
    &sb_backend_cpu,
#ifdef SB_HAVE_CUDA
    &sb_backend_cuda,
#endif
};

const struct sb_backend_ops *sb_backend_find(const char *name)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i]->name, name) == 0) return backends[i];
    return NULL;
}
