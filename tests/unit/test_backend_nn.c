/* The cpu backend's transformer ops (src/backend/cpu_nn.c) against naive
 * double-precision references on random inputs: strided batched SGEMM
 * (all four transpose cases), LayerNorm forward and backward, GELU and its
 * derivative, row softmax and its backward, the head transpose and
 * patchify, copy2d. Each comparison allows float32 rounding (1e-5 relative
 * to the largest value); a deliberately wrong reference is caught. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"

#define TOL 1e-5

static const struct sb_backend_ops *be = &sb_backend_cpu;

static float *random_floats(struct sb_rng *rng, size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * sb_rng_uniform(rng));
    return x;
}

/* max |got - want| <= TOL * max(1, max |want|). */
static int close_to(const float *got, const double *want, size_t n)
{
    double diff = 0.0, scale = 1.0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    if (diff > TOL * scale) printf("# max difference %.3g (scale %.3g)\n", diff, scale);
    return diff <= TOL * scale;
}

static void test_sgemm_strided_batched(void **state)
{
    (void)state;
    struct sb_rng rng;
    sb_rng_seed(&rng, 1, 1);
    const int batch = 3, m = 5, n = 4, k = 6;
    float *a = random_floats(&rng, (size_t)batch * m * k, -1, 1);
    float *b = random_floats(&rng, (size_t)batch * k * n, -1, 1);
    float *c = random_floats(&rng, (size_t)batch * m * n, -1, 1);
    float *c0 = malloc((size_t)batch * m * n * sizeof *c0);
    double *want = malloc((size_t)batch * m * n * sizeof *want);
    assert_non_null(c0);
    assert_non_null(want);
    memcpy(c0, c, (size_t)batch * m * n * sizeof *c);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* A_i stored (m, k) or, transposed, (k, m); likewise B */
            int lda = ta ? m : k, ldb = tb ? k : n;
            memcpy(c, c0, (size_t)batch * m * n * sizeof *c);
            be->sgemm_strided_batched(ta, tb, m, n, k, 0.5f, a, lda, (long)m * k, b, ldb,
                                      (long)k * n, 2.0f, c, n, (long)m * n, batch);
            for (int i = 0; i < batch; i++)
                for (int r = 0; r < m; r++)
                    for (int col = 0; col < n; col++) {
                        double acc = 0.0;
                        for (int q = 0; q < k; q++) {
                            double av = ta ? a[i * m * k + q * m + r] : a[i * m * k + r * k + q];
                            double bv = tb ? b[i * k * n + col * k + q] : b[i * k * n + q * n + col];
                            acc += av * bv;
                        }
                        size_t at = (size_t)i * m * n + (size_t)r * n + col;
                        want[at] = 0.5 * acc + 2.0 * c0[at];
                    }
            assert_true(close_to(c, want, (size_t)batch * m * n));
        }
    free(a), free(b), free(c), free(c0), free(want);
}

static void test_layernorm(void **state)
{
    (void)state;
    struct sb_rng rng;
    sb_rng_seed(&rng, 2, 1);
    /* 27 columns: three whole 8-lane groups and a tail of 3 */
    const int rows = 7, cols = 27;
    size_t n = (size_t)rows * cols;
    float *x = random_floats(&rng, n, -3, 5), *g = random_floats(&rng, (size_t)cols, 0.5, 1.5);
    float *bt = random_floats(&rng, (size_t)cols, -1, 1), *dy = random_floats(&rng, n, -1, 1);
    float *y = malloc(n * sizeof *y), *mean = malloc(rows * sizeof *mean);
    float *rstd = malloc(rows * sizeof *rstd), *dx = random_floats(&rng, n, -1, 1);
    float *dx0 = malloc(n * sizeof *dx0), dg[27], db[27];
    double *want = malloc(n * sizeof *want), wdg[27] = {0}, wdb[27] = {0};
    memcpy(dx0, dx, n * sizeof *dx);
    be->layernorm_forward(x, g, bt, rows, cols, 1e-5f, y, mean, rstd);
    be->layernorm_backward(dy, x, g, mean, rstd, rows, cols, dx, dg, db);
    double *wdx = malloc(n * sizeof *wdx);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + r * cols, *dyr = dy + r * cols;
        double mu = 0, var = 0;
        for (int c = 0; c < cols; c++) mu += xr[c];
        mu /= cols;
        for (int c = 0; c < cols; c++) var += (xr[c] - mu) * (xr[c] - mu);
        var /= cols;
        double rs = 1.0 / sqrt(var + 1e-5), sg = 0, sgx = 0;
        for (int c = 0; c < cols; c++) {
            double xhat = (xr[c] - mu) * rs;
            want[r * cols + c] = xhat * g[c] + bt[c];
            sg += dyr[c] * g[c];
            sgx += dyr[c] * g[c] * xhat;
            wdg[c] += dyr[c] * xhat;
            wdb[c] += dyr[c];
        }
        for (int c = 0; c < cols; c++) {
            double xhat = (xr[c] - mu) * rs;
            /* added to what dx held */
            wdx[r * cols + c] = dx0[r * cols + c] + rs * (dyr[c] * g[c] - sg / cols - xhat * sgx / cols);
        }
    }
    assert_true(close_to(y, want, n));
    assert_true(close_to(dx, wdx, n));
    assert_true(close_to(dg, wdg, (size_t)cols));
    assert_true(close_to(db, wdb, (size_t)cols));
    /* the check can fail: one output off by 1e-3 is caught */
    want[0] += 1e-3;
    assert_false(close_to(y, want, n));
    free(x), free(g), free(bt), free(dy), free(y), free(mean), free(rstd), free(dx), free(dx0);
    free(want), free(wdx);
}

static void test_gelu(void **state)
{
    (void)state;
    struct sb_rng rng;
    sb_rng_seed(&rng, 3, 1);
    const size_t n = 200;
    float *x = random_floats(&rng, n, -6, 6), *y = malloc(n * sizeof *y);
    float *dy = random_floats(&rng, n, -1, 1);
    double want[200], wderiv[200], wd[200];
    for (size_t i = 0; i < n; i++) {
        double v = x[i], cdf = 0.5 * (1.0 + erf(v / sqrt(2.0)));
        want[i] = v * cdf;
        wderiv[i] = cdf + v * exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
        wd[i] = dy[i] * wderiv[i];
    }
    be->gelu_forward(x, y, n); /* x becomes GELU'(x) */
    assert_true(close_to(y, want, n));
    assert_true(close_to(x, wderiv, n));
    be->gelu_backward(dy, x, n);
    assert_true(close_to(dy, wd, n));
    /* not the tanh approximation: at x = 1 they differ by ~1.6e-4 */
    float one = 1.0f, g1;
    be->gelu_forward(&one, &g1, 1);
    double tanh_form = 0.5 * (1.0 + tanh(sqrt(2.0 / M_PI) * (1.0 + 0.044715)));
    assert_true(fabs(g1 - 0.8413447460685429) < 1e-6 && fabs(g1 - tanh_form) > 1e-4);
    free(x), free(y), free(dy);
}

static void test_softmax_rows(void **state)
{
    (void)state;
    struct sb_rng rng;
    sb_rng_seed(&rng, 4, 1);
    const int rows = 5, cols = 9;
    size_t n = (size_t)rows * cols;
    float *x = random_floats(&rng, n, -30, 30), *dy = random_floats(&rng, n, -1, 1);
    double want[45], wdx[45];
    for (int r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0, dot = 0;
        for (int c = 0; c < cols; c++) mx = fmax(mx, x[r * cols + c]);
        for (int c = 0; c < cols; c++) sum += exp(x[r * cols + c] - mx);
        for (int c = 0; c < cols; c++) want[r * cols + c] = exp(x[r * cols + c] - mx) / sum;
        for (int c = 0; c < cols; c++) dot += dy[r * cols + c] * want[r * cols + c];
        for (int c = 0; c < cols; c++)
            wdx[r * cols + c] = want[r * cols + c] * (dy[r * cols + c] - dot);
    }
    be->softmax_rows(x, rows, cols);
    assert_true(close_to(x, want, n));
    be->softmax_rows_backward(dy, x, rows, cols);
    assert_true(close_to(dy, wdx, n));
    free(x), free(dy);
}

static void test_reshapes(void **state)
{
    (void)state;
    /* transpose_0213: x (2, 3, 4, 2) -> y (2, 4, 3, 2), and back */
    float x[48], y[48], z[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i;
    be->transpose_0213(x, 2, 3, 4, 2, y);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 2; l++)
                    assert_true(y[((i * 4 + k) * 3 + j) * 2 + l] == x[((i * 3 + j) * 4 + k) * 2 + l]);
    be->transpose_0213(y, 2, 4, 3, 2, z);
    assert_memory_equal(x, z, sizeof x);

    /* patchify: 28 x 28, p = 7: patch (1, 2) is index 1 * 4 + 2 = 6; its
     * pixel (3, 5) is image pixel (1*7 + 3, 2*7 + 5) = (10, 19) */
    float img[2 * 784], patches[2 * 784];
    for (int i = 0; i < 2 * 784; i++) img[i] = (float)i;
    be->patchify(img, 2, 28, 7, patches);
    assert_true(patches[6 * 49 + 3 * 7 + 5] == img[10 * 28 + 19]);
    assert_true(patches[784 + 15 * 49 + 48] == img[784 + 27 * 28 + 27]);
    float sorted_in = 0, sorted_out = 0; /* a permutation: same sum */
    for (int i = 0; i < 2 * 784; i++) sorted_in += img[i], sorted_out += patches[i];
    assert_true(sorted_in == sorted_out);

    /* copy2d with a zero source stride repeats one row */
    float dst[12] = {0}, row[2] = {7, 8};
    be->copy2d(dst + 1, 4, row, 0, 3, 2);
    const float want[12] = {0, 7, 8, 0, 0, 7, 8, 0, 0, 7, 8, 0};
    assert_memory_equal(dst, want, sizeof dst);
    be->zero(dst, 12);
    for (int i = 0; i < 12; i++) assert_true(dst[i] == 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_strided_batched),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_reshapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
