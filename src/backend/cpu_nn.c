/* The CPU backend's transformer ops: batched SGEMM for attention,
 * LayerNorm, GELU, row softmax and the reshapes around attention heads and
 * patches. Plain loops over contiguous rows; every op works on a whole
 * batch. Semantics in backend.h. */
#include "backend/cpu_nn.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* e^x for x in [-87, 88] without a library call, so that the loops over
 * rows vectorise (libm's expf and erff are scalar calls without
 * -ffast-math): x = n ln2 + r, |r| <= ln2/2, e^r by Cephes' expf
 * polynomial (Moshier, Cephes Math Library, expf.c: relative error below
 * 2e-7 on the range), 2^n put into the exponent bits. Below -87 it
 * returns e^-87 (~1.6e-38, as good as zero next to 1). */
static inline float fast_expf(float x)
{
    /* quiet comparisons (isless, isgreater) raise no FP exception, so the
     * compiler may turn them into selects and vectorise the caller's loop */
    x = isless(x, -87.0f) ? -87.0f : isgreater(x, 88.0f) ? 88.0f : x;
    float n = (float)(int32_t)(x * 1.44269504088896341f + (isless(x, 0.0f) ? -0.5f : 0.5f));
    float r = x - n * 0.693359375f + n * 2.12194440e-4f; /* ln2 in two parts */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) << 23};
    return p * scale.f;
}

/* Phi(x) = (1 + erf(x / sqrt 2)) / 2 given e = exp(-x^2 / 2), by
 * Abramowitz & Stegun 7.1.26 (|error of erf| <= 1.5e-7): erf(z) = 1 -
 * t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-z^2), t = 1 / (1 + p z),
 * z = |x| / sqrt 2, odd in z. */
static inline float normal_cdf(float x, float e)
{
    float z = fabsf(x) * 0.70710678118654752f;
    float t = 1.0f / (1.0f + 0.3275911f * z);
    float poly = t * (0.254829592f +
                      t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float erf_abs = 1.0f - poly * e;
    return 0.5f + 0.5f * copysignf(erf_abs, x);
}

void sb_cpu_sgemm_strided_batched(int trans_a, int trans_b, int m, int n, int k, float alpha,
                                  const float *a, int lda, long stride_a, const float *b,
                                  int ldb, long stride_b, float beta, float *c, int ldc,
                                  long stride_c, int batch)
{
    for (int i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a + i * stride_a, lda,
                    b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
}

void sb_cpu_layernorm_forward(const float *x, const float *gamma, const float *beta, int rows,
                              int cols, float eps, float *y, float *mean, float *rstd)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        double sum = 0.0, sq = 0.0;
        for (int c = 0; c < cols; c++) sum += xr[c];
        double mu = sum / cols;
        for (int c = 0; c < cols; c++) sq += (xr[c] - mu) * (xr[c] - mu);
        float rs = (float)(1.0 / sqrt(sq / cols + eps));
        float m = (float)mu;
        for (int c = 0; c < cols; c++) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
        mean[r] = m;
        rstd[r] = rs;
    }
}

void sb_cpu_layernorm_backward(const float *dy, const float *x, const float *gamma,
                               const float *mean, const float *rstd, int rows, int cols,
                               float *dx, float *dgamma, float *dbeta)
{
    memset(dgamma, 0, (size_t)cols * sizeof *dgamma);
    memset(dbeta, 0, (size_t)cols * sizeof *dbeta);
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * cols, *xr = x + (size_t)r * cols;
        float *dxr = dx + (size_t)r * cols;
        float m = mean[r], rs = rstd[r];
        double sum_g = 0.0, sum_gx = 0.0;
        for (int c = 0; c < cols; c++) {
            float xhat = (xr[c] - m) * rs, g = dyr[c] * gamma[c];
            sum_g += g;
            sum_gx += (double)g * xhat;
            dgamma[c] += dyr[c] * xhat;
            dbeta[c] += dyr[c];
        }
        float mg = (float)(sum_g / cols), mgx = (float)(sum_gx / cols);
        for (int c = 0; c < cols; c++) {
            float xhat = (xr[c] - m) * rs;
            dxr[c] += rs * (dyr[c] * gamma[c] - mg - xhat * mgx);
        }
    }
}

void sb_cpu_gelu_forward(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v * normal_cdf(v, fast_expf(-0.5f * v * v));
    }
}

void sb_cpu_gelu_backward(float *dy, const float *x, size_t n)
{
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < n; i++) {
        float v = x[i], e = fast_expf(-0.5f * v * v);
        dy[i] *= normal_cdf(v, e) + v * inv_sqrt_2pi * e;
    }
}

void sb_cpu_softmax_rows(float *x, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * cols;
        float mx = xr[0];
        for (int c = 1; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
        float sum = 0.0f;
        for (int c = 0; c < cols; c++) xr[c] = fast_expf(xr[c] - mx);
        for (int c = 0; c < cols; c++) sum += xr[c];
        float inv = 1.0f / sum;
        for (int c = 0; c < cols; c++) xr[c] *= inv;
    }
}

void sb_cpu_softmax_rows_backward(float *dy, const float *y, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *dr = dy + (size_t)r * cols;
        const float *yr = y + (size_t)r * cols;
        float dot = 0.0f;
        for (int c = 0; c < cols; c++) dot += dr[c] * yr[c];
        for (int c = 0; c < cols; c++) dr[c] = yr[c] * (dr[c] - dot);
    }
}

void sb_cpu_transpose_0213(const float *x, int a, int b, int c, int d, float *y)
{
    size_t run = (size_t)d * sizeof *x;
    for (int i = 0; i < a; i++)
        for (int j = 0; j < b; j++)
            for (int k = 0; k < c; k++)
                memcpy(y + (((size_t)i * c + k) * b + j) * d, x + (((size_t)i * b + j) * c + k) * d,
                       run);
}

void sb_cpu_patchify(const float *x, int n, int side, int p, float *y)
{
    int g = side / p;
    for (int s = 0; s < n; s++) {
        const float *img = x + (size_t)s * side * side;
        for (int pr = 0; pr < g; pr++)
            for (int pc = 0; pc < g; pc++)
                for (int i = 0; i < p; i++, y += p)
                    memcpy(y, img + (size_t)(pr * p + i) * side + pc * p, (size_t)p * sizeof *y);
    }
}

void sb_cpu_copy2d(float *dst, long dst_stride, const float *src, long src_stride, int rows,
                   int cols)
{
    for (int r = 0; r < rows; r++)
        memcpy(dst + r * dst_stride, src + r * src_stride, (size_t)cols * sizeof *dst);
}

void sb_cpu_zero(float *y, size_t n) { memset(y, 0, n * sizeof *y); }
