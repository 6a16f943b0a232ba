/* The CPU backend: OpenBLAS SGEMM and plain C loops over contiguous arrays.
 *
 * Memory is ordinary host memory (64-byte aligned, zeroed). Nothing loops per
 * sample around a GEMM: every op works on a whole (rows, cols) batch. */
#include "backend/backend.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS extensions (declared in its cblas.h; repeated here in case the
 * generic cblas.h is the one found first). */
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);

static sb_status cpu_alloc(void **ptr, size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    *ptr = aligned_alloc(64, rounded ? rounded : 64);
    if (!*ptr) return sb_error(SB_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", bytes);
    memset(*ptr, 0, rounded ? rounded : 64);
    return SB_OK;
}

static void cpu_free(void *ptr) { free(ptr); }

static sb_status cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (dst != src) memcpy(dst, src, bytes);
    return SB_OK;
}

static sb_status cpu_sync(void) { return SB_OK; }

static void cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb,
                      float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
}

static void cpu_add_bias(float *y, const float *bias, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *row = y + (size_t)r * cols;
        for (int c = 0; c < cols; c++) row[c] += bias[c];
    }
}

static void cpu_relu_forward(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

static void cpu_relu_backward(float *dy, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void cpu_bias_grad(float *db, const float *dy, int rows, int cols)
{
    memset(db, 0, (size_t)cols * sizeof *db);
    for (int r = 0; r < rows; r++) {
        const float *row = dy + (size_t)r * cols;
        for (int c = 0; c < cols; c++) db[c] += row[c];
    }
}

static void cpu_softmax_xent(const float *logits, const uint8_t *labels, int rows,
                             int cols, float scale, float *dlogits, double *loss_sum)
{
    double total = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * cols;
        float *d = dlogits + (size_t)r * cols;
        float zmax = z[0];
        for (int c = 1; c < cols; c++) zmax = z[c] > zmax ? z[c] : zmax;
        float sum = 0.0f;
        for (int c = 0; c < cols; c++) {
            d[c] = expf(z[c] - zmax);
            sum += d[c];
        }
        float inv = 1.0f / sum;
        int label = labels[r];
        /* -log softmax[label] = log(sum) - (z[label] - zmax) */
        total += (double)logf(sum) - (double)(z[label] - zmax);
        for (int c = 0; c < cols; c++) d[c] = d[c] * inv * scale;
        d[label] -= scale;
    }
    *loss_sum = total;
}

static void cpu_count_correct(const float *logits, const uint8_t *labels, int rows,
                              int cols, long *correct)
{
    long hits = 0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (z[c] > z[best]) best = c;
        hits += best == labels[r];
    }
    *correct = hits;
}

static void cpu_sgd_momentum(float *p, float *v, const float *g, size_t n,
                             float lr, float mu)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = mu * v[i] + g[i];
        p[i] -= lr * v[i];
    }
}

static void cpu_copy_floats(float *dst, const float *src, size_t n)
{
    memcpy(dst, src, n * sizeof *dst);
}

static void cpu_add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void cpu_scale(float *y, float a, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] *= a;
}

const struct sb_backend_ops sb_backend_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .sgemm = cpu_sgemm,
    .add_bias = cpu_add_bias,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .bias_grad = cpu_bias_grad,
    .softmax_xent = cpu_softmax_xent,
    .count_correct = cpu_count_correct,
    .sgd_momentum = cpu_sgd_momentum,
    .copy = cpu_copy_floats,
    .add = cpu_add,
    .scale = cpu_scale,
};

void sb_backend_cpu_set_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

const char *sb_backend_cpu_blas_version(void)
{
    static _Thread_local char version[128];
    const char *cfg = openblas_get_config();
    /* openblas_get_config() begins "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
    snprintf(version, sizeof version, "%s", cfg ? cfg : "unknown");
    return version;
}
