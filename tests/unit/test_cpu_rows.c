/* The cpu backend's row ops (src/backend/cpu_nn.c: LayerNorm forward and
 * backward, bias add and bias gradient) bit for bit against plain scalar
 * loops that spell out the documented order of every sum (the code these
 * ops replaced, issue 33), at the vit's shapes and at ones with partial
 * lanes and partial row blocks (rows 1-9, cols 5-130); and LayerNorm
 * against double precision, so that a reference wrong in the same way
 * would not pass unnoticed. Exits 0 when every test passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_nn.h"

#define LANES 8

/* LayerNorm forward, row by row: mean and variance in LANES double lanes
 * (lane j: columns j mod LANES in order), lanes summed in order, then the
 * columns past the last whole lane. */
static void ln_forward_ref(const float *x, const float *gamma, const float *beta, int rows,
                           int cols, float eps, float *y, float *mean, float *rstd)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        double s[LANES] = {0}, q[LANES] = {0}, sum = 0.0, sq = 0.0;
        int c = 0;
        for (; c + LANES <= cols; c += LANES)
            for (int j = 0; j < LANES; j++) s[j] += xr[c + j];
        for (int j = 0; j < LANES; j++) sum += s[j];
        for (; c < cols; c++) sum += xr[c];
        double mu = sum / cols;
        for (c = 0; c + LANES <= cols; c += LANES)
            for (int j = 0; j < LANES; j++) q[j] += (xr[c + j] - mu) * (xr[c + j] - mu);
        for (int j = 0; j < LANES; j++) sq += q[j];
        for (; c < cols; c++) sq += (xr[c] - mu) * (xr[c] - mu);
        float rs = (float)(1.0 / sqrt(sq / cols + eps)), m = (float)mu;
        for (c = 0; c < cols; c++) y[(size_t)r * cols + c] = (xr[c] - m) * rs * gamma[c] + beta[c];
        mean[r] = m, rstd[r] = rs;
    }
}

/* LayerNorm backward, row by row, the same lanes for sum(g) and sum(g xhat). */
static void ln_backward_ref(const float *dy, const float *x, const float *gamma,
                            const float *mean, const float *rstd, int rows, int cols, float *dx,
                            float *dgamma, float *dbeta)
{
    memset(dgamma, 0, (size_t)cols * sizeof *dgamma);
    memset(dbeta, 0, (size_t)cols * sizeof *dbeta);
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * cols, *xr = x + (size_t)r * cols;
        float m = mean[r], rs = rstd[r];
        double g1[LANES] = {0}, gx[LANES] = {0}, sum_g = 0.0, sum_gx = 0.0;
        int c = 0;
        for (; c + LANES <= cols; c += LANES)
            for (int j = 0; j < LANES; j++) {
                float xhat = (xr[c + j] - m) * rs, g = dyr[c + j] * gamma[c + j];
                g1[j] += g;
                gx[j] += (double)g * xhat;
                dgamma[c + j] += dyr[c + j] * xhat;
                dbeta[c + j] += dyr[c + j];
            }
        for (int j = 0; j < LANES; j++) sum_g += g1[j], sum_gx += gx[j];
        for (; c < cols; c++) {
            float xhat = (xr[c] - m) * rs, g = dyr[c] * gamma[c];
            sum_g += g;
            sum_gx += (double)g * xhat;
            dgamma[c] += dyr[c] * xhat;
            dbeta[c] += dyr[c];
        }
        float mg = (float)(sum_g / cols), mgx = (float)(sum_gx / cols);
        for (c = 0; c < cols; c++) {
            float xhat = (xr[c] - m) * rs;
            dx[(size_t)r * cols + c] += rs * (dyr[c] * gamma[c] - mg - xhat * mgx);
        }
    }
}

static float uniform(unsigned *s, float lo, float hi)
{
    *s = *s * 1103515245u + 12345u;
    return lo + (hi - lo) * (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

static float *filled(size_t n, unsigned *seed, float lo, float hi)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = uniform(seed, lo, hi);
    return p;
}

static void same_bits(const char *what, const float *got, const float *want, size_t n, int rows,
                      int cols)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]))
            fail_msg("%s %dx%d: [%zu] = %a, want %a", what, rows, cols, i, got[i], want[i]);
}

static const int SHAPES[][2] = {{1, 64}, {7, 64}, {8, 64}, {9, 64},  {3200, 64}, {17, 128},
                                {5, 5},  {9, 20}, {3, 130}, {16, 8}, {64, 16}};

static void test_layernorm_bits(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (size_t t = 0; t < sizeof SHAPES / sizeof SHAPES[0]; t++) {
        int rows = SHAPES[t][0], cols = SHAPES[t][1];
        size_t n = (size_t)rows * cols;
        float *x = filled(n, &seed, -3.0f, 5.0f), *g = filled(cols, &seed, 0.5f, 1.5f);
        float *b = filled(cols, &seed, -0.5f, 0.5f), *dy = filled(n, &seed, -1.0f, 1.0f);
        float *y = malloc(n * 4), *yr = malloc(n * 4), *m = malloc(rows * 4), *mr = malloc(rows * 4);
        float *rs = malloc(rows * 4), *rsr = malloc(rows * 4), *dg = malloc(cols * 4);
        float *dgr = malloc(cols * 4), *db = malloc(cols * 4), *dbr = malloc(cols * 4);
        float *dx = filled(n, &seed, -1.0f, 1.0f), *dxr = malloc(n * 4);
        memcpy(dxr, dx, n * 4);
        sb_cpu_layernorm_forward(x, g, b, rows, cols, 1e-5f, y, m, rs);
        ln_forward_ref(x, g, b, rows, cols, 1e-5f, yr, mr, rsr);
        same_bits("layernorm y", y, yr, n, rows, cols);
        same_bits("layernorm mean", m, mr, rows, rows, cols);
        same_bits("layernorm rstd", rs, rsr, rows, rows, cols);
        sb_cpu_layernorm_backward(dy, x, g, m, rs, rows, cols, dx, dg, db);
        ln_backward_ref(dy, x, g, mr, rsr, rows, cols, dxr, dgr, dbr);
        same_bits("layernorm dx", dx, dxr, n, rows, cols);
        same_bits("layernorm dgamma", dg, dgr, cols, rows, cols);
        same_bits("layernorm dbeta", db, dbr, cols, rows, cols);
        /* and the value itself: y against double precision */
        for (int r = 0; r < rows; r++) {
            double mu = 0.0, var = 0.0;
            for (int c = 0; c < cols; c++) mu += x[(size_t)r * cols + c];
            mu /= cols;
            for (int c = 0; c < cols; c++)
                var += (x[(size_t)r * cols + c] - mu) * (x[(size_t)r * cols + c] - mu);
            double inv = 1.0 / sqrt(var / cols + 1e-5);
            for (int c = 0; c < cols; c++) {
                double want = (x[(size_t)r * cols + c] - mu) * inv * g[c] + b[c];
                if (fabs(y[(size_t)r * cols + c] - want) > 1e-5 * (1.0 + fabs(want)))
                    fail_msg("layernorm %dx%d y[%d][%d] = %g, want %g", rows, cols, r, c,
                             y[(size_t)r * cols + c], want);
            }
        }
        free(x), free(g), free(b), free(dy), free(y), free(yr), free(m), free(mr), free(rs);
        free(rsr), free(dg), free(dgr), free(db), free(dbr), free(dx), free(dxr);
    }
}

static void test_bias_bits(void **state)
{
    (void)state;
    unsigned seed = 777;
    for (size_t t = 0; t < sizeof SHAPES / sizeof SHAPES[0]; t++) {
        int rows = SHAPES[t][0], cols = SHAPES[t][1];
        size_t n = (size_t)rows * cols;
        float *dy = filled(n, &seed, -1.0f, 1.0f), *b = filled(cols, &seed, -1.0f, 1.0f);
        float *db = malloc(cols * 4), *dbr = calloc(cols, 4), *y = malloc(n * 4);
        float *yr = malloc(n * 4);
        sb_cpu_bias_grad(db, dy, rows, cols);
        for (int r = 0; r < rows; r++) /* column sums in row order from zero */
            for (int c = 0; c < cols; c++) dbr[c] += dy[(size_t)r * cols + c];
        same_bits("bias_grad", db, dbr, cols, rows, cols);
        memcpy(y, dy, n * 4), memcpy(yr, dy, n * 4);
        sb_cpu_add_bias(y, b, rows, cols);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) yr[(size_t)r * cols + c] += b[c];
        same_bits("add_bias", y, yr, n, rows, cols);
        free(dy), free(b), free(db), free(dbr), free(y), free(yr);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_bits),
        cmocka_unit_test(test_bias_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
