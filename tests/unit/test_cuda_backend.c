/* The cuda backend against the cpu backend: every op on the same random
 * inputs, results compared elementwise (max abs diff within a tolerance
 * scaled to the op: exact for data movement, ~1e-5 relative for sums).
 * Exits 0 pass, 1 fail, 77 skip ("skipped: no CUDA device") when the build
 * has no CUDA or no device is visible, so CI without a GPU skips it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda.h"

#define SKIP 77

#ifndef SB_HAVE_CUDA
int main(void)
{
    printf("skipped: no CUDA device (built without CUDA)\n");
    return SKIP;
}
#else

static const struct sb_backend_ops *cpu = &sb_backend_cpu;
static const struct sb_backend_ops *gpu = &sb_backend_cuda;
static int failures;
static unsigned long long rng_state = 12345;

static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("FAIL: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static float *host_random(size_t n)
{
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

static void report(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

/* Device copy of `bytes` bytes of host memory. */
static void *dev_copy(const void *host, size_t bytes)
{
    void *d = NULL;
    if (gpu->alloc(&d, bytes) || gpu->upload(d, host, bytes)) {
        printf("FAIL: device alloc/upload of %zu bytes: %s\n", bytes, sb_error_message());
        exit(1);
    }
    return d;
}

/* Host copy of `bytes` bytes of device memory, after a sync that must
 * report no failure. */
static void *host_copy(const char *op, const void *d, size_t bytes)
{
    void *got = xmalloc(bytes);
    if (gpu->sync() || gpu->download(got, d, bytes)) {
        printf("FAIL %s: %s\n", op, sb_error_message());
        exit(1);
    }
    return got;
}

/* Downloads n floats of d and compares with want (max abs diff <= tol;
 * NaN fails); frees d. */
static void expect(const char *op, void *d, const float *want, size_t n, double tol)
{
    float *got = host_copy(op, d, n * sizeof *got);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
    int ok = worst <= tol;
    printf("%s %-22s max abs diff %.3g (tol %.3g)\n", ok ? "ok  " : "FAIL", op, worst, tol);
    failures += !ok;
    free(got);
    gpu->free(d);
}

/* Same for n bytes that must match exactly (labels, int32 indices). */
static void expect_bytes(const char *op, void *d, const void *want, size_t n)
{
    void *got = host_copy(op, d, n);
    report(memcmp(got, want, n) == 0, op);
    free(got);
    gpu->free(d);
}

/* alloc returns zeroed memory; upload/download round-trip; free(NULL). */
static void test_memory(void)
{
    const size_t n = 1000003; /* not a multiple of any block size */
    void *d = NULL;
    if (gpu->alloc(&d, n)) {
        printf("FAIL alloc: %s\n", sb_error_message());
        exit(1);
    }
    unsigned char *zeros = calloc(n, 1);
    if (!zeros) exit(1);
    expect_bytes("alloc zeroed", d, zeros, n);
    float *h = host_random(n);
    expect("upload/download", dev_copy(h, n * sizeof *h), h, n, 0.0);
    gpu->free(NULL);
    free(zeros), free(h);
}

/* Row-major C (m, n) with ldc = n + 5, A and B with padded leading
 * dimensions (lda, ldb beyond the minimum), so that a mapping which ignores
 * or swaps them reads the padding. The padding of C must stay untouched:
 * the whole (m, ldc) buffer is compared. */
static void test_sgemm(int ta, int tb, int m, int n, int k)
{
    int a_rows = ta ? k : m, a_cols = ta ? m : k; /* A as stored */
    int b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + 3, ldb = b_cols + 7, ldc = n + 5;
    float *a = host_random((size_t)a_rows * lda), *b = host_random((size_t)b_rows * ldb);
    float *c = host_random((size_t)m * ldc);
    void *da = dev_copy(a, (size_t)a_rows * lda * 4), *db = dev_copy(b, (size_t)b_rows * ldb * 4);
    void *dc = dev_copy(c, (size_t)m * ldc * 4);
    cpu->sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.25f, c, ldc);
    gpu->sgemm(ta, tb, m, n, k, 0.5f, da, lda, db, ldb, 0.25f, dc, ldc);
    char name[48];
    snprintf(name, sizeof name, "sgemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
    /* |terms| <= 0.5, k of them: fp32 sums in different orders. */
    expect(name, dc, c, (size_t)m * ldc, 1e-5 * k);
    gpu->free(da), gpu->free(db), free(a), free(b), free(c);
}

/* A failed cuBLAS call is recorded and returned by the next sync, once. */
static void test_error_reporting(void)
{
    void *d = dev_copy((float[4]){0}, 16);
    /* lda = 0 < k: cuBLAS refuses (CUBLAS_STATUS_INVALID_VALUE). */
    gpu->sgemm(0, 0, 2, 2, 2, 1.0f, d, 0, d, 2, 0.0f, d, 2);
    sb_status first = gpu->sync(), second = gpu->sync();
    report(first == SB_ERR_DEVICE && second == SB_OK, "sticky error reported once by sync");
    /* check() reports it too, without waiting, and once. */
    gpu->sgemm(0, 0, 2, 2, 2, 1.0f, d, 0, d, 2, 0.0f, d, 2);
    first = gpu->check();
    int named = strstr(sb_error_message(), "cublasSgemm") != NULL;
    second = gpu->check();
    report(first == SB_ERR_DEVICE && second == SB_OK, "sticky error reported once by check");
    report(named, "check names the failed call (cublasSgemm)");
    gpu->free(d);
}

static void test_elementwise(int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    char name[64];
    float *y = host_random(n), *x = host_random(n), *bias = host_random((size_t)cols);
    float *v = host_random(n);
    void *dy = dev_copy(y, n * 4), *dx = dev_copy(x, n * 4), *dbias = dev_copy(bias, (size_t)cols * 4);

    cpu->add_bias(y, bias, rows, cols), gpu->add_bias(dy, dbias, rows, cols);
    snprintf(name, sizeof name, "add_bias %dx%d", rows, cols);
    expect(name, dy, y, n, 0.0);
    dy = dev_copy(y, n * 4);
    cpu->relu_forward(y, n), gpu->relu_forward(dy, n);
    expect("relu_forward", dy, y, n, 0.0);
    dy = dev_copy(y, n * 4);
    void *dv = dev_copy(v, n * 4);
    cpu->relu_backward(v, y, n), gpu->relu_backward(dv, dy, n);
    expect("relu_backward", dv, v, n, 0.0);
    float *db = host_random((size_t)cols); /* overwritten, not accumulated */
    void *ddb = dev_copy(db, (size_t)cols * 4);
    cpu->bias_grad(db, x, rows, cols), gpu->bias_grad(ddb, dx, rows, cols);
    snprintf(name, sizeof name, "bias_grad %dx%d", rows, cols);
    expect(name, ddb, db, (size_t)cols, 1e-6 * rows);
    float *p = host_random(n), *vel = host_random(n);
    void *dp = dev_copy(p, n * 4), *dvel = dev_copy(vel, n * 4);
    cpu->sgd_momentum(p, vel, x, n, 0.03f, 0.9f), gpu->sgd_momentum(dp, dvel, dx, n, 0.03f, 0.9f);
    expect("sgd_momentum p", dp, p, n, 1e-6);
    expect("sgd_momentum v", dvel, vel, n, 1e-6);
    /* Adam's step 2 (bias corrections 1 - 0.9^2, sqrt(1 - 0.999^2)); v >= 0. */
    float *am = host_random(n), *av = host_random(n);
    for (size_t i = 0; i < n; i++) av[i] = av[i] < 0 ? -av[i] : av[i];
    void *dam = dev_copy(am, n * 4), *dav = dev_copy(av, n * 4);
    dp = dev_copy(p, n * 4); /* expect freed the device copies above */
    float ss = 0.001f / (1.0f - 0.81f), bc2 = sqrtf(1.0f - 0.998001f);
    cpu->adam(p, am, av, x, n, 0.9f, 0.999f, 1e-8f, ss, bc2);
    gpu->adam(dp, dam, dav, dx, n, 0.9f, 0.999f, 1e-8f, ss, bc2);
    expect("adam p", dp, p, n, 1e-6);
    expect("adam m", dam, am, n, 1e-6);
    expect("adam v", dav, av, n, 1e-6);
    free(am), free(av);
    void *dcopy = dev_copy(v, n * 4);
    cpu->copy(v, x, n), gpu->copy(dcopy, dx, n);
    expect("copy", dcopy, v, n, 0.0);
    cpu->add(y, x, n), gpu->add(dy, dx, n);
    expect("add", dy, y, n, 0.0);
    gpu->free(dx);
    dx = dev_copy(x, n * 4);
    cpu->scale(x, 0.37f, n), gpu->scale(dx, 0.37f, n);
    expect("scale", dx, x, n, 0.0);
    gpu->free(dbias), free(y), free(x), free(bias), free(v), free(p), free(vel), free(db);
}

/* Logits spread over [-scale, scale] (large scales test the max shift);
 * every 7th row has a tie for the maximum, which the first column wins. */
static void test_loss(int rows, int cols, float spread)
{
    size_t n = (size_t)rows * cols;
    float *z = host_random(n), *d = host_random(n);
    for (size_t i = 0; i < n; i++) z[i] *= spread;
    uint8_t *labels = xmalloc((size_t)rows);
    for (int r = 0; r < rows; r++) {
        labels[r] = (uint8_t)(r * 7 % cols);
        if (r % 7 == 0) { /* tie: the first of two equal maxima counts */
            float *row = z + (size_t)r * cols;
            row[cols - 1] = row[labels[r]] = 2.0f * spread;
            if (r % 14 == 0) row[0] = 2.0f * spread; /* ... and here it is not the label */
        }
    }
    void *dz = dev_copy(z, n * 4), *dd = dev_copy(d, n * 4), *dl = dev_copy(labels, (size_t)rows);
    /* The loss is ADDED to a sum in backend memory: start both at 1.5, call
     * twice, and expect 1.5 + 2 * (row sum) on each side. */
    double loss_cpu = 1.5, loss_gpu = 0, start = 1.5;
    double *dloss = dev_copy(&start, sizeof start);
    cpu->softmax_xent(z, labels, rows, cols, 1.0f / 64, d, &loss_cpu);
    cpu->softmax_xent(z, labels, rows, cols, 1.0f / 64, d, &loss_cpu);
    gpu->softmax_xent(dz, dl, rows, cols, 1.0f / 64, dd, dloss);
    gpu->softmax_xent(dz, dl, rows, cols, 1.0f / 64, dd, dloss);
    double *got_loss = host_copy("softmax_xent loss", dloss, sizeof *dloss);
    loss_gpu = *got_loss;
    free(got_loss);
    gpu->free(dloss);
    char name[64];
    snprintf(name, sizeof name, "softmax_xent %dx%d grad", rows, cols);
    expect(name, dd, d, n, 1e-6);
    int ok = fabs(loss_cpu - loss_gpu) <= 1e-5 * (fabs(loss_cpu) + rows);
    printf("%s softmax_xent loss       cpu %.6f cuda %.6f\n", ok ? "ok  " : "FAIL", loss_cpu,
           loss_gpu);
    failures += !ok;
    long c_cpu = -1, c_gpu = -1;
    cpu->count_correct(z, labels, rows, cols, &c_cpu);
    gpu->count_correct(dz, dl, rows, cols, &c_gpu);
    ok = c_cpu == c_gpu && gpu->sync() == SB_OK;
    printf("%s count_correct %dx%d     cpu %ld cuda %ld\n", ok ? "ok  " : "FAIL", rows, cols,
           c_cpu, c_gpu);
    failures += !ok;
    gpu->free(dz), gpu->free(dl);
    free(z), free(d), free(labels);
}

static void test_gather(void)
{
    const int samples = 500, dim = 784, n = 64;
    uint8_t *pixels = xmalloc((size_t)samples * dim), pix_labels[500];
    for (int s = 0; s < samples; s++) pix_labels[s] = (uint8_t)(s % 10);
    for (size_t i = 0; i < (size_t)samples * dim; i++) pixels[i] = (uint8_t)(i * 131 % 256);
    int32_t idx[64];
    for (int i = 0; i < n; i++) idx[i] = (i * 37 + 11) % samples;
    idx[0] = 0, idx[1] = samples - 1; /* both ends of the split */
    float *x = host_random((size_t)n * dim);
    uint8_t y[64];
    void *dpix = dev_copy(pixels, (size_t)samples * dim), *dlab = dev_copy(pix_labels, samples);
    void *didx = dev_copy(idx, sizeof idx), *dx = dev_copy(x, sizeof(float) * n * dim);
    void *dy = dev_copy(idx, sizeof y);
    cpu->gather(x, y, pixels, pix_labels, idx, n, dim);
    gpu->gather(dx, dy, dpix, dlab, didx, n, dim);
    expect("gather x (bit-exact)", dx, x, (size_t)n * dim, 0.0);
    expect_bytes("gather y", dy, y, sizeof y);
    gpu->free(dpix), gpu->free(dlab), gpu->free(didx);
    free(pixels), free(x);
}

static void test_cnn_ops(int n, int c, int h, int w, int k)
{
    int oh = h - k + 1, ow = w - k + 1;
    size_t nx = (size_t)n * c * h * w, ncols = (size_t)n * oh * ow * c * k * k;
    char name[64];
    /* Values on a coarse grid (multiples of 1/4): pooling windows hold
     * ties, which the first in row-major window order must win. */
    float *x = host_random(nx);
    for (size_t i = 0; i < nx; i++) x[i] = floorf(x[i] * 4.0f) / 4.0f;
    float *cols = host_random(ncols), *dx = host_random(nx);
    void *d_x = dev_copy(x, nx * 4), *d_cols = dev_copy(cols, ncols * 4);
    cpu->im2col(x, n, c, h, w, k, cols), gpu->im2col(d_x, n, c, h, w, k, d_cols);
    snprintf(name, sizeof name, "im2col k=%d %dx%d", k, h, w);
    expect(name, d_cols, cols, ncols, 0.0);
    float *dcols = host_random(ncols);
    d_cols = dev_copy(dcols, ncols * 4);
    void *d_dx = dev_copy(dx, nx * 4); /* overwritten, not accumulated */
    cpu->col2im(dcols, n, c, h, w, k, dx), gpu->col2im(d_cols, n, c, h, w, k, d_dx);
    expect("col2im", d_dx, dx, nx, 1e-6 * k * k);
    gpu->free(d_cols);
    /* (n*c, h, w) -> (n*c, w, h), h != w */
    float *t = host_random(nx);
    void *d_t = dev_copy(t, nx * 4);
    cpu->transpose_batched(x, n * c, h, w, t), gpu->transpose_batched(d_x, n * c, h, w, d_t);
    expect("transpose_batched", d_t, t, nx, 0.0);
    size_t np = (size_t)n * c * (h / 2) * (w / 2);
    float *py = host_random(np);
    int32_t *arg = xmalloc(np * sizeof *arg);
    for (size_t i = 0; i < np; i++) arg[i] = -1;
    void *d_py = dev_copy(py, np * 4), *d_arg = dev_copy(arg, np * 4);
    cpu->maxpool2_forward(x, n, c, h, w, py, arg);
    gpu->maxpool2_forward(d_x, n, c, h, w, d_py, d_arg);
    snprintf(name, sizeof name, "maxpool2_forward %dx%d", h, w);
    expect(name, d_py, py, np, 0.0);
    expect_bytes("maxpool2_forward argmax", d_arg, arg, np * sizeof *arg);
    float *dyp = host_random(np);
    void *d_dyp = dev_copy(dyp, np * 4);
    d_dx = dev_copy(dx, nx * 4); /* stale values: backward must zero them */
    void *d_arg_cpu = dev_copy(arg, np * 4); /* the same argmax on both sides */
    cpu->maxpool2_backward(dyp, arg, n, c, h, w, dx);
    gpu->maxpool2_backward(d_dyp, d_arg_cpu, n, c, h, w, d_dx);
    expect("maxpool2_backward", d_dx, dx, nx, 0.0);
    gpu->free(d_x), gpu->free(d_dyp), gpu->free(d_arg_cpu);
    free(x), free(cols), free(dcols), free(dx), free(t), free(py), free(arg), free(dyp);
}

/* The vit's ops (cuda_nn.cu against cpu_nn.c): batched attention GEMMs,
 * LayerNorm (forward, and the backward that adds into dx), GELU, row
 * softmax, the head transpose, patchify, copy2d and zero. rows x cols is a
 * LayerNorm's shape; the attention is batch x (t, hd). */
static void test_vit_ops(int rows, int cols, int batch, int t, int hd)
{
    size_t n = (size_t)rows * cols;
    char name[80];
    /* batched GEMM: scores (t, t) = q (t, hd) . k^T, then (t, hd) = p . v */
    size_t nq = (size_t)batch * t * hd, ns = (size_t)batch * t * t;
    float *q = host_random(nq), *k = host_random(nq), *sc = host_random(ns);
    void *d_q = dev_copy(q, nq * 4), *d_k = dev_copy(k, nq * 4), *d_s = dev_copy(sc, ns * 4);
    cpu->sgemm_strided_batched(0, 1, t, t, hd, 0.25f, q, hd, (long)t * hd, k, hd, (long)t * hd,
                               0.0f, sc, t, (long)t * t, batch);
    gpu->sgemm_strided_batched(0, 1, t, t, hd, 0.25f, d_q, hd, (long)t * hd, d_k, hd,
                               (long)t * hd, 0.0f, d_s, t, (long)t * t, batch);
    snprintf(name, sizeof name, "sgemm_strided_batched %dx(%d,%d)", batch, t, hd);
    expect(name, d_s, sc, ns, 1e-5 * hd);
    float *sc_cpu = xmalloc(ns * 4);
    memcpy(sc_cpu, sc, ns * 4);
    d_s = dev_copy(sc, ns * 4); /* the cpu's scores on both sides for softmax */
    cpu->softmax_rows(sc, batch * t, t), gpu->softmax_rows(d_s, batch * t, t);
    expect("softmax_rows", d_s, sc, ns, 1e-6);
    float *dp = host_random(ns);
    void *d_dp = dev_copy(dp, ns * 4), *d_p = dev_copy(sc, ns * 4);
    cpu->softmax_rows_backward(dp, sc, batch * t, t), gpu->softmax_rows_backward(d_dp, d_p, batch * t, t);
    expect("softmax_rows_backward", d_dp, dp, ns, 1e-5);
    gpu->free(d_p);
    void *d_c = dev_copy(q, nq * 4);
    float *ctx = xmalloc(nq * 4);
    cpu->sgemm_strided_batched(1, 0, t, hd, t, 1.0f, sc, t, (long)t * t, k, hd, (long)t * hd,
                               0.0f, ctx, hd, (long)t * hd, batch);
    d_p = dev_copy(sc, ns * 4);
    gpu->sgemm_strided_batched(1, 0, t, hd, t, 1.0f, d_p, t, (long)t * t, d_k, hd, (long)t * hd,
                               0.0f, d_c, hd, (long)t * hd, batch);
    snprintf(name, sizeof name, "sgemm_strided_batched^T %dx(%d,%d)", batch, t, hd);
    expect(name, d_c, ctx, nq, 1e-5 * t);
    gpu->free(d_p);
    /* LayerNorm */
    float *x = host_random(n), *g = host_random((size_t)cols), *b = host_random((size_t)cols);
    float *y = xmalloc(n * 4), *mean = xmalloc((size_t)rows * 4), *rstd = xmalloc((size_t)rows * 4);
    void *d_x = dev_copy(x, n * 4), *d_g = dev_copy(g, (size_t)cols * 4);
    void *d_b = dev_copy(b, (size_t)cols * 4), *d_y = dev_copy(y, n * 4);
    void *d_m = dev_copy(mean, (size_t)rows * 4), *d_r = dev_copy(rstd, (size_t)rows * 4);
    cpu->layernorm_forward(x, g, b, rows, cols, 1e-5f, y, mean, rstd);
    gpu->layernorm_forward(d_x, d_g, d_b, rows, cols, 1e-5f, d_y, d_m, d_r);
    snprintf(name, sizeof name, "layernorm_forward %dx%d", rows, cols);
    expect(name, d_y, y, n, 1e-5);
    expect("layernorm mean", d_m, mean, (size_t)rows, 1e-6);
    expect("layernorm rstd", d_r, rstd, (size_t)rows, 1e-4);
    float *dy = host_random(n), *dx = host_random(n), *dg = xmalloc((size_t)cols * 4);
    float *db = xmalloc((size_t)cols * 4);
    void *d_dy = dev_copy(dy, n * 4), *d_dx = dev_copy(dx, n * 4);
    void *d_dg = dev_copy(g, (size_t)cols * 4), *d_db = dev_copy(b, (size_t)cols * 4);
    d_m = dev_copy(mean, (size_t)rows * 4), d_r = dev_copy(rstd, (size_t)rows * 4);
    cpu->layernorm_backward(dy, x, g, mean, rstd, rows, cols, dx, dg, db);
    gpu->layernorm_backward(d_dy, d_x, d_g, d_m, d_r, rows, cols, d_dx, d_dg, d_db);
    expect("layernorm_backward dx", d_dx, dx, n, 1e-5);
    expect("layernorm_backward dgamma", d_dg, dg, (size_t)cols, 1e-5 * rows);
    expect("layernorm_backward dbeta", d_db, db, (size_t)cols, 1e-6 * rows);
    /* GELU */
    for (size_t i = 0; i < n; i++) x[i] *= 4.0f;
    void *d_x4 = dev_copy(x, n * 4);
    d_y = dev_copy(y, n * 4);
    cpu->gelu_forward(x, y, n), gpu->gelu_forward(d_x4, d_y, n); /* x: GELU'(x) after */
    expect("gelu_forward", d_y, y, n, 1e-6);
    expect("gelu_forward derivative", d_x4, x, n, 1e-6);
    d_dy = dev_copy(dy, n * 4);
    d_x4 = dev_copy(x, n * 4); /* expect freed the device's derivative: the cpu's, on both */
    cpu->gelu_backward(dy, x, n), gpu->gelu_backward(d_dy, d_x4, n);
    expect("gelu_backward", d_dy, dy, n, 1e-6);
    /* reshapes: (2, t, heads, hd) <-> (2, heads, t, hd); patchify; copy2d; zero */
    int heads = 4;
    size_t nt = (size_t)2 * t * heads * hd;
    float *a = host_random(nt), *at = xmalloc(nt * 4);
    void *d_a = dev_copy(a, nt * 4), *d_at = dev_copy(a, nt * 4);
    cpu->transpose_0213(a, 2, t, heads, hd, at), gpu->transpose_0213(d_a, 2, t, heads, hd, d_at);
    expect("transpose_0213", d_at, at, nt, 0.0);
    float *img = host_random(3 * 784), *pt = xmalloc(3 * 784 * 4);
    void *d_img = dev_copy(img, 3 * 784 * 4), *d_pt = dev_copy(img, 3 * 784 * 4);
    cpu->patchify(img, 3, 28, 4, pt), gpu->patchify(d_img, 3, 28, 4, d_pt);
    expect("patchify p=4", d_pt, pt, 3 * 784, 0.0);
    d_pt = dev_copy(img, 3 * 784 * 4);
    cpu->patchify(img, 3, 28, 7, pt), gpu->patchify(d_img, 3, 28, 7, d_pt);
    expect("patchify p=7", d_pt, pt, 3 * 784, 0.0);
    void *d_cp = dev_copy(pt, 3 * 784 * 4);
    cpu->copy2d(pt + 5, 100, img, 0, 7, 30), gpu->copy2d((float *)d_cp + 5, 100, d_img, 0, 7, 30);
    expect("copy2d (repeated row)", d_cp, pt, 3 * 784, 0.0);
    d_cp = dev_copy(pt, 3 * 784 * 4);
    cpu->zero(pt, 3 * 784), gpu->zero(d_cp, 3 * 784);
    expect("zero", d_cp, pt, 3 * 784, 0.0);
    /* (expect frees the buffer it reads: d_dp, d_s, d_c, d_y, ... are gone) */
    gpu->free(d_q), gpu->free(d_k), gpu->free(d_x), gpu->free(d_g);
    gpu->free(d_b), gpu->free(d_x4), gpu->free(d_a), gpu->free(d_img);
    free(q), free(k), free(sc), free(sc_cpu), free(dp), free(ctx), free(x), free(g), free(b);
    free(y), free(mean), free(rstd), free(dy), free(dx), free(dg), free(db), free(a), free(at);
    free(img), free(pt);
}

/* Events: a wait on an event recorded on this stream, and the phase timer
 * (the first step reports nothing; the next reports the previous one's). */
static void test_events_and_timer(void)
{
    void *ev = NULL;
    sb_status st = sb_cuda_event_create(&ev);
    if (!st) st = sb_cuda_event_record(ev);
    if (!st) st = sb_cuda_stream_wait_event(ev);
    if (!st) st = gpu->sync();
    report(!st, "event create/record/wait");
    sb_cuda_event_destroy(ev);

    struct sb_cuda_timer *t = NULL;
    double first = 0.0, second = -1.0;
    st = sb_cuda_timer_create(&t);
    const size_t n = 1 << 20;
    void *d = NULL;
    if (!st) st = gpu->alloc(&d, n * sizeof(float));
    for (int step = 0; step < 2 && !st; step++) {
        sb_cuda_timer_begin_step(t);
        st = sb_cuda_timer_previous_ms(t, 0, 1, step == 0 ? &first : &second);
        if (!st) st = sb_cuda_timer_mark(t, 0);
        if (!st) gpu->scale(d, 0.5f, n);
        if (!st) st = sb_cuda_timer_mark(t, 1);
    }
    if (!st) st = gpu->sync();
    report(!st && first == -1.0 && second >= 0.0, "timer: previous step's marks");
    gpu->free(d);
    sb_cuda_timer_destroy(t);
}

int main(void)
{
    if (sb_cuda_device_count() == 0) {
        printf("skipped: no CUDA device\n");
        return SKIP;
    }
    char info[512];
    sb_cuda_describe(info, sizeof info);
    printf("# %s\n", info);
    if (sb_cuda_set_device(0)) {
        printf("FAIL: %s\n", sb_error_message());
        return 1;
    }
    test_memory();
    /* The four transpose combinations, at the mlp's shapes and odd ones. */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_sgemm(ta, tb, 64, 256, 784);
            test_sgemm(ta, tb, 17, 23, 31);
            test_sgemm(ta, tb, 1, 10, 1);
        }
    test_sgemm(0, 1, 64, 10, 256);  /* forward of the last layer */
    test_sgemm(1, 0, 256, 784, 64); /* its weight gradient */
    test_error_reporting();
    test_elementwise(67, 33);
    test_elementwise(36864, 20); /* conv bias_grad: many rows, few columns */
    test_elementwise(3, 2000);
    /* bias_grad's column reduction: cnn conv1 (36,864 x 6), one chunk,
     * several chunks with a partial last tile, more columns than one pass. */
    test_elementwise(36864, 6);
    test_elementwise(64, 256);
    test_elementwise(1000, 4100);
    test_elementwise(130, 33);
    test_loss(100, 10, 1.0f);
    test_loss(257, 100, 1.0f); /* more columns than a warp */
    test_loss(33, 3, 80.0f);   /* large logits: exp overflows without the max shift */
    test_gather();
    test_cnn_ops(3, 2, 9, 8, 3);
    test_cnn_ops(4, 3, 12, 11, 5); /* the cnn's kernel side, odd output sides */
    test_cnn_ops(2, 1, 28, 28, 5);
    test_vit_ops(64 * 50, 64, 64 * 4, 50, 16); /* the default vit at batch 64 */
    test_vit_ops(37, 200, 3, 17, 8);           /* more columns than a warp, odd sizes */
    test_events_and_timer();
    if (gpu->sync()) {
        printf("FAIL: %s\n", sb_error_message());
        return 1;
    }
    sb_cuda_release_thread();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
#endif
