/* Build provenance; see build_info.h. The only file that includes the
 * generated build/gen/build_info.h (configure.py makes this object depend on
 * it), so a new commit recompiles this file alone and relinks. */
#include "core/build_info.h"

#include "build/gen/build_info.h"

static const struct sb_build_component components[] = {
    {"compiler", "compiler", SB_BUILD_COMPILER},
    {"MPI", "mpi", SB_BUILD_MPI},
    {"OpenBLAS", "openblas", SB_BUILD_OPENBLAS},
    {"cJSON", "cjson", SB_BUILD_CJSON},
    {"zlib", "zlib", SB_BUILD_ZLIB},
    {"OpenSSL", "openssl", SB_BUILD_OPENSSL},
    {"CUDA", "cuda", SB_BUILD_CUDA},
    {"cuBLAS", "cublas", SB_BUILD_CUBLAS},
    {"NCCL", "nccl", SB_BUILD_NCCL},
    {"NVTX", "nvtx", SB_BUILD_NVTX},
};

const char *sb_build_version(void) { return SB_VERSION; }
const char *sb_build_commit(void) { return SB_GIT_COMMIT; }
int sb_build_dirty(void) { return SB_GIT_DIRTY; }
const char *sb_build_source_dir(void) { return SB_SOURCE_DIR; }
const char *sb_build_prefix(void) { return SB_PREFIX; }
const char *sb_build_type(void) { return SB_BUILD_TYPE; }

const char *sb_build_backends(void)
{
#ifdef SB_HAVE_CUDA
    return "cpu, cuda";
#else
    return "cpu";
#endif
}

const char *sb_build_comms(void)
{
#ifdef SB_HAVE_NCCL
    return "mpi, local, nccl";
#else
    return "mpi, local";
#endif
}

int sb_build_component_count(void)
{
    return (int)(sizeof components / sizeof components[0]);
}

const struct sb_build_component *sb_build_component_at(int i)
{
    return i >= 0 && i < sb_build_component_count() ? &components[i] : 0;
}
