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

static float *host_random(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = frand();
    return p;
}

/* Device copy of n host floats (or bytes with elem = 1). */
static void *dev_copy(const void *host, size_t bytes)
{
    void *d = NULL;
    if (gpu->alloc(&d, bytes) || gpu->upload(d, host, bytes)) {
        printf("FAIL: device alloc/upload of %zu bytes: %s\n", bytes, sb_error_message());
        exit(1);
    }
    return d;
}

/* Downloads n floats of d and compares with want; frees d. */
static void expect(const char *op, void *d, const float *want, size_t n, double tol)
{
    float *got = malloc(n * sizeof *got);
    if (!got || gpu->sync() || gpu->download(got, d, n * sizeof *got)) {
        printf("FAIL %s: %s\n", op, sb_error_message());
        exit(1);
    }
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
    int ok = worst <= tol;
    printf("%s %-18s max abs diff %.3g (tol %.3g)\n", ok ? "ok  " : "FAIL", op, worst, tol);
    failures += !ok;
    free(got);
    gpu->free(d);
}

static void test_sgemm(int ta, int tb, int m, int n, int k)
{
    int lda = ta ? m : k, ldb = tb ? k : n;
    float *a = host_random((size_t)m * k), *b = host_random((size_t)k * n);
    float *c = host_random((size_t)m * n);
    void *da = dev_copy(a, (size_t)m * k * 4), *db = dev_copy(b, (size_t)k * n * 4);
    void *dc = dev_copy(c, (size_t)m * n * 4);
    cpu->sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.25f, c, n);
    gpu->sgemm(ta, tb, m, n, k, 0.5f, da, lda, db, ldb, 0.25f, dc, n);
    char name[32];
    snprintf(name, sizeof name, "sgemm %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
    expect(name, dc, c, (size_t)m * n, 1e-4 * k);
    gpu->free(da), gpu->free(db), free(a), free(b), free(c);
}

static void test_elementwise(void)
{
    const int rows = 67, cols = 33;
    size_t n = (size_t)rows * cols;
    float *y = host_random(n), *x = host_random(n), *bias = host_random(cols);
    float *v = host_random(n);
    void *dy = dev_copy(y, n * 4), *dx = dev_copy(x, n * 4), *dbias = dev_copy(bias, cols * 4);

    cpu->add_bias(y, bias, rows, cols), gpu->add_bias(dy, dbias, rows, cols);
    expect("add_bias", dy, y, n, 0.0);
    dy = dev_copy(y, n * 4);
    cpu->relu_forward(y, n), gpu->relu_forward(dy, n);
    expect("relu_forward", dy, y, n, 0.0);
    dy = dev_copy(y, n * 4);
    void *dv = dev_copy(v, n * 4);
    cpu->relu_backward(v, y, n), gpu->relu_backward(dv, dy, n);
    expect("relu_backward", dv, v, n, 0.0);
    float db[33];
    void *ddb = dev_copy(bias, cols * 4);
    cpu->bias_grad(db, x, rows, cols), gpu->bias_grad(ddb, dx, rows, cols);
    expect("bias_grad", ddb, db, cols, 1e-5 * rows);
    float *p = host_random(n), *vel = host_random(n);
    void *dp = dev_copy(p, n * 4), *dvel = dev_copy(vel, n * 4);
    cpu->sgd_momentum(p, vel, x, n, 0.03f, 0.9f), gpu->sgd_momentum(dp, dvel, dx, n, 0.03f, 0.9f);
    expect("sgd_momentum p", dp, p, n, 1e-6);
    expect("sgd_momentum v", dvel, vel, n, 1e-6);
    void *dcopy = dev_copy(v, n * 4);
    cpu->copy(v, x, n), gpu->copy(dcopy, dx, n);
    expect("copy", dcopy, v, n, 0.0);
    cpu->add(y, x, n), gpu->add(dy, dx, n);
    expect("add", dy, y, n, 0.0);
    gpu->free(dx);
    dx = dev_copy(x, n * 4);
    cpu->scale(x, 0.37f, n), gpu->scale(dx, 0.37f, n);
    expect("scale", dx, x, n, 0.0);
    gpu->free(dbias), free(y), free(x), free(bias), free(v), free(p), free(vel);
}

static void test_loss_and_gather(void)
{
    const int rows = 100, cols = 10, samples = 500, dim = 784;
    float *z = host_random((size_t)rows * cols), *d = host_random((size_t)rows * cols);
    uint8_t labels[100], pix_labels[500], *pixels = malloc((size_t)samples * dim);
    for (int r = 0; r < rows; r++) labels[r] = (uint8_t)(r * 7 % cols);
    for (int s = 0; s < samples; s++) pix_labels[s] = (uint8_t)(s % 10);
    for (size_t i = 0; i < (size_t)samples * dim; i++) pixels[i] = (uint8_t)(i * 131 % 256);
    void *dz = dev_copy(z, sizeof(float) * rows * cols), *dd = dev_copy(d, sizeof(float) * rows * cols);
    void *dl = dev_copy(labels, sizeof labels);
    double loss_cpu = 0, loss_gpu = 0;
    cpu->softmax_xent(z, labels, rows, cols, 1.0f / 64, d, &loss_cpu);
    gpu->softmax_xent(dz, dl, rows, cols, 1.0f / 64, dd, &loss_gpu);
    expect("softmax_xent grad", dd, d, (size_t)rows * cols, 1e-6);
    int ok = fabs(loss_cpu - loss_gpu) <= 1e-4 * rows;
    printf("%s softmax_xent loss   cpu %.6f cuda %.6f\n", ok ? "ok  " : "FAIL", loss_cpu, loss_gpu);
    failures += !ok;
    long c_cpu = 0, c_gpu = 0;
    cpu->count_correct(z, labels, rows, cols, &c_cpu);
    gpu->count_correct(dz, dl, rows, cols, &c_gpu);
    ok = c_cpu == c_gpu && gpu->sync() == SB_OK;
    printf("%s count_correct       cpu %ld cuda %ld\n", ok ? "ok  " : "FAIL", c_cpu, c_gpu);
    failures += !ok;

    int32_t idx[64];
    for (int i = 0; i < 64; i++) idx[i] = (i * 37 + 11) % samples;
    float *x = malloc(sizeof(float) * 64 * dim);
    uint8_t y[64];
    void *dpix = dev_copy(pixels, (size_t)samples * dim), *dlab = dev_copy(pix_labels, samples);
    void *didx = dev_copy(idx, sizeof idx), *dx = dev_copy(x, sizeof(float) * 64 * dim);
    void *dy = dev_copy(y, sizeof y);
    cpu->gather(x, y, pixels, pix_labels, idx, 64, dim);
    gpu->gather(dx, dy, dpix, dlab, didx, 64, dim);
    expect("gather x", dx, x, (size_t)64 * dim, 0.0);
    uint8_t ygot[64];
    ok = gpu->download(ygot, dy, sizeof ygot) == SB_OK && memcmp(ygot, y, sizeof y) == 0;
    printf("%s gather y\n", ok ? "ok  " : "FAIL");
    failures += !ok;
    gpu->free(dz), gpu->free(dl), gpu->free(dpix), gpu->free(dlab), gpu->free(didx), gpu->free(dy);
    free(z), free(d), free(pixels), free(x);
}

static void test_cnn_ops(void)
{
    const int n = 3, c = 2, h = 9, w = 8, k = 3, oh = h - k + 1, ow = w - k + 1;
    size_t nx = (size_t)n * c * h * w, ncols = (size_t)n * oh * ow * c * k * k;
    float *x = host_random(nx), *cols = host_random(ncols), *dx = host_random(nx);
    void *d_x = dev_copy(x, nx * 4), *d_cols = dev_copy(cols, ncols * 4);
    cpu->im2col(x, n, c, h, w, k, cols), gpu->im2col(d_x, n, c, h, w, k, d_cols);
    expect("im2col", d_cols, cols, ncols, 0.0);
    d_cols = dev_copy(cols, ncols * 4);
    void *d_dx = dev_copy(dx, nx * 4);
    cpu->col2im(cols, n, c, h, w, k, dx), gpu->col2im(d_cols, n, c, h, w, k, d_dx);
    expect("col2im", d_dx, dx, nx, 1e-5 * k * k);
    float *t = host_random(nx);
    void *d_t = dev_copy(t, nx * 4);
    cpu->transpose_batched(x, n * c, h, w, t), gpu->transpose_batched(d_x, n * c, h, w, d_t);
    expect("transpose_batched", d_t, t, nx, 0.0);
    size_t np = (size_t)n * c * (h / 2) * (w / 2);
    float *py = host_random(np);
    int32_t *arg = calloc(np, sizeof *arg);
    void *d_py = dev_copy(py, np * 4), *d_arg = dev_copy(arg, np * 4);
    cpu->maxpool2_forward(x, n, c, h, w, py, arg), gpu->maxpool2_forward(d_x, n, c, h, w, d_py, d_arg);
    expect("maxpool2_forward", d_py, py, np, 0.0);
    float *dyp = host_random(np);
    void *d_dyp = dev_copy(dyp, np * 4);
    d_dx = dev_copy(dx, nx * 4);
    void *d_arg_cpu = dev_copy(arg, np * 4); /* same argmax on both sides */
    cpu->maxpool2_backward(dyp, arg, n, c, h, w, dx);
    gpu->maxpool2_backward(d_dyp, d_arg_cpu, n, c, h, w, d_dx);
    expect("maxpool2_backward", d_dx, dx, nx, 0.0);
    gpu->free(d_x), gpu->free(d_arg), gpu->free(d_dyp), gpu->free(d_arg_cpu);
    free(x), free(cols), free(dx), free(t), free(py), free(arg), free(dyp);
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
    test_sgemm(0, 0, 64, 256, 784);
    test_sgemm(0, 1, 64, 10, 256);
    test_sgemm(1, 0, 256, 784, 64);
    test_sgemm(1, 1, 17, 23, 31);
    test_elementwise();
    test_loss_and_gather();
    test_cnn_ops();
    if (gpu->sync()) {
        printf("FAIL: %s\n", sb_error_message());
        return 1;
    }
    sb_cuda_release_thread();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
#endif
