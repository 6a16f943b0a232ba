/* What the report and the CLI need to know about the GPU stack: how many
 * devices, their model, and the driver, runtime, cuBLAS and NCCL versions.
 * Compiled in every build; without CUDA it answers "no devices". Never
 * fails: a missing driver or device reads as 0 devices (cudaGetDeviceCount
 * returns cudaErrorNoDevice or cudaErrorInsufficientDriver there). */
#include "backend/cuda.h"

#include <stdio.h>
#include <string.h>

#ifdef SB_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif
#ifdef SB_HAVE_NCCL
#include <nccl.h>
#endif

#ifndef SB_HAVE_CUDA
void sb_cuda_release_thread(void) {} /* no thread context without CUDA */
#endif

int sb_cuda_device_count(void)
{
#ifdef SB_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the error so later calls do not see it */
        return 0;
    }
    return n > 0 ? n : 0;
#else
    return 0;
#endif
}

void sb_cuda_device_name(int device, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
#ifdef SB_HAVE_CUDA
    struct cudaDeviceProp prop;
    if (device < 0 || device >= sb_cuda_device_count()) return;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    snprintf(buf, n, "%s", prop.name);
#else
    (void)device;
#endif
}

#ifdef SB_HAVE_CUDA
/* CUDA's version integers are 1000 * major + 10 * minor. */
static void cuda_version_text(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}
#endif

void sb_cuda_describe(char *buf, size_t n)
{
    if (n == 0) return;
#ifndef SB_HAVE_CUDA
    snprintf(buf, n, "built without CUDA");
#else
    int count = sb_cuda_device_count();
    int driver = 0, runtime = 0;
    char drv[32] = "?", rt[32] = "?", blas[32] = "?", nccl[32] = "none";
    if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
        cuda_version_text(driver, drv, sizeof drv);
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
        cuda_version_text(runtime, rt, sizeof rt);
    cudaGetLastError();
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        snprintf(blas, sizeof blas, "%d.%d.%d", major, minor, patch);
#ifdef SB_HAVE_NCCL
    int nv = 0;
    /* NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch. */
    if (ncclGetVersion(&nv) == ncclSuccess)
        snprintf(nccl, sizeof nccl, "%d.%d.%d", nv / 10000, (nv % 10000) / 100, nv % 100);
#endif
    char model[320] = "no CUDA device";
    if (count > 0) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
            snprintf(model, sizeof model, "%.200s (sm_%d%d, %.1f GiB) x %d", prop.name, prop.major,
                     prop.minor, (double)prop.totalGlobalMem / (1 << 30), count);
        cudaGetLastError();
    }
    snprintf(buf, n, "%s; driver %s; runtime %s; cuBLAS %s; NCCL %s", model, drv, rt, blas,
             nccl);
#endif
}

void sb_cuda_versions(struct sb_cuda_versions *v)
{
    memset(v, 0, sizeof *v);
#ifdef SB_HAVE_CUDA
    v->count = sb_cuda_device_count();
    if (v->count > 0) sb_cuda_device_name(0, v->model, sizeof v->model);
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
        cuda_version_text(driver, v->driver, sizeof v->driver);
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
        cuda_version_text(runtime, v->runtime, sizeof v->runtime);
    cudaGetLastError();
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        snprintf(v->cublas, sizeof v->cublas, "%d.%d.%d", major, minor, patch);
#ifdef SB_HAVE_NCCL
    int nv = 0;
    if (ncclGetVersion(&nv) == ncclSuccess) /* major * 10000 + minor * 100 + patch */
        snprintf(v->nccl, sizeof v->nccl, "%d.%d.%d", nv / 10000, (nv % 10000) / 100, nv % 100);
#endif
#endif
}
