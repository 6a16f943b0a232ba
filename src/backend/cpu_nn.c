/* The CPU backend's transformer ops: batched SGEMM for attention,
 * LayerNorm, GELU, row softmax and the reshapes around attention heads and
 * patches. Plain loops over contiguous rows; every op works on a whole
 * batch. GELU and softmax use cpu_math.h's exp and Gaussian CDF, not
 * libm's, so that their loops vectorise. Semantics in backend.h. */
#include "backend/cpu_nn.h"

#include "backend/cpu_math.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

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

/* Lanes of the row reductions below: LANES partial results, combined in
 * lane order at the end, so that the loop over a row is SIMD code (gcc
 * keeps a float sum's order, and so never vectorises one loop-carried
 * sum). */
#define LANES 8

/* The elementwise and row loops are built three times, for AVX-512 (16
 * floats a vector, masks for the selects: the exp and the Gaussian CDF are
 * compute-bound), AVX2 (8 floats, blends) and the x86-64 baseline (SSE2),
 * and the loader picks one for the CPU (gcc's function multiversioning, an
 * ifunc). No FMA: -std=c11 keeps every multiply and add rounded apart, and
 * each lane of a row reduction sums in the source's order, so all three
 * versions give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_SIMD
#endif

/* 8 floats and 8 doubles as one value (gcc's vector extension): the
 * LayerNorm lanes spelled out, since gcc vectorises no loop that mixes
 * float lanes with double sums. Each element's arithmetic is the scalar
 * code's, in the same order. */
typedef float sb_v8f __attribute__((vector_size(32)));
typedef double sb_v8d __attribute__((vector_size(64)));

/* Unaligned load and store; always inlined, so that no call passes a
 * 32-byte vector (gcc warns that the baseline build's ABI for one differs
 * from AVX's; no such call exists, hence the pragma). */
#pragma GCC diagnostic ignored "-Wpsabi"
static inline __attribute__((always_inline)) sb_v8f v8f_load(const float *p)
{
    sb_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void v8f_store(float *p, sb_v8f v)
{
    memcpy(p, &v, sizeof v);
}

/* 8 floats widened to 8 doubles (a macro: no 32-byte vector passed) */
#define v8f_wide(v) __builtin_convertvector((v), sb_v8d)

/* Rows a LayerNorm block: each pass below runs over LN_BLOCK rows before
 * the next, so that the rows' scalar tails (lane sums, division, square
 * root: ~150 cycles of dependent latency a row) overlap instead of each
 * row waiting on its own; the block's rows (8 x 64 floats a tensor) stay in
 * L1 between the passes. */
#define LN_BLOCK 8

/* The LANES lanes of v summed in lane order from zero (the scalar lane
 * loop's order); the caller adds the columns past the last whole lane. */
static inline __attribute__((always_inline)) double lane_sum(const sb_v8d *v)
{
    double sum = 0.0;
    for (int j = 0; j < LANES; j++) sum += (*v)[j];
    return sum;
}

/* Per row: mean and variance in LANES double lanes (lane j: columns c = j
 * mod LANES, in column order; the lanes summed in order, then the columns
 * past the last whole lane), rstd = 1 / sqrt(var + eps) rounded once to
 * float, then y = (x - mean) rstd gamma + beta in float. */
CPU_SIMD void sb_cpu_layernorm_forward(const float *x, const float *gamma, const float *beta,
                                       int rows, int cols, float eps, float *y, float *mean,
                                       float *rstd)
{
    int vec = cols - cols % LANES; /* columns in whole lanes */
    for (int r0 = 0; r0 < rows; r0 += LN_BLOCK) {
        int nr = rows - r0 < LN_BLOCK ? rows - r0 : LN_BLOCK;
        const float *xb = x + (size_t)r0 * cols;
        sb_v8d acc[LN_BLOCK];
        double mu[LN_BLOCK];
        for (int i = 0; i < nr; i++) {
            const float *xr = xb + (size_t)i * cols;
            sb_v8d s = {0};
            for (int c = 0; c < vec; c += LANES) s += v8f_wide(v8f_load(xr + c));
            acc[i] = s;
        }
        for (int i = 0; i < nr; i++) {
            double sum = lane_sum(&acc[i]);
            for (int c = vec; c < cols; c++) sum += xb[(size_t)i * cols + c];
            mu[i] = sum / cols;
        }
        for (int i = 0; i < nr; i++) {
            const float *xr = xb + (size_t)i * cols;
            sb_v8d q = {0};
            for (int c = 0; c < vec; c += LANES) {
                sb_v8d d = v8f_wide(v8f_load(xr + c)) - mu[i];
                q += d * d;
            }
            acc[i] = q;
        }
        for (int i = 0; i < nr; i++) {
            const float *xr = xb + (size_t)i * cols;
            double sq = lane_sum(&acc[i]);
            for (int c = vec; c < cols; c++) sq += (xr[c] - mu[i]) * (xr[c] - mu[i]);
            float rs = (float)(1.0 / sqrt(sq / cols + eps)), m = (float)mu[i];
            float *yr = y + (size_t)(r0 + i) * cols;
            for (int c = 0; c < cols; c++) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
            mean[r0 + i] = m;
            rstd[r0 + i] = rs;
        }
    }
}

/* Floats a cache line: the step of the prefetches below (a row block's
 * for LayerNorm backward, the next destination row's for copy2d). */
#define LINE_FLOATS 16

/* Asks for rows r0 .. r0 + LN_BLOCK - 1 (those below `rows`) of dy and x
 * (read) and dx (read, then written) ahead of the block that reads them:
 * the backward's inputs come from L3 (kept activations, gradients written
 * a GEMM before), and each block's rows otherwise arrive only once its
 * loads miss. Hints only: no value changes. */
static inline __attribute__((always_inline)) void ln_prefetch_block(const float *dy,
                                                                    const float *x, float *dx,
                                                                    int r0, int rows, int cols)
{
    if (r0 >= rows) return;
    int nr = rows - r0 < LN_BLOCK ? rows - r0 : LN_BLOCK;
    size_t first = (size_t)r0 * cols, end = first + (size_t)nr * cols;
    for (size_t o = first; o < end; o += LINE_FLOATS) {
        __builtin_prefetch(dy + o, 0, 3);
        __builtin_prefetch(x + o, 0, 3);
        __builtin_prefetch(dx + o, 1, 3);
    }
}

/* Per row, two passes: the sums of g = dy gamma and g xhat in LANES
 * double lanes (lane j: columns c = j mod LANES, in column order; lanes
 * summed in order, then the columns past the last whole lane) with dgamma
 * and dbeta accumulated alongside, row after row; then dx. Rows in blocks
 * of LN_BLOCK (the first pass over the block's rows, then the second). */
CPU_SIMD void sb_cpu_layernorm_backward(const float *dy, const float *x, const float *gamma,
                                        const float *mean, const float *rstd, int rows, int cols,
                                        float *dx, float *dgamma, float *dbeta)
{
    memset(dgamma, 0, (size_t)cols * sizeof *dgamma);
    memset(dbeta, 0, (size_t)cols * sizeof *dbeta);
    int vec = cols - cols % LANES; /* columns in whole lanes */
    for (int r0 = 0; r0 < rows; r0 += LN_BLOCK) {
        int nr = rows - r0 < LN_BLOCK ? rows - r0 : LN_BLOCK;
        sb_v8d ag[LN_BLOCK], agx[LN_BLOCK];
        float mg[LN_BLOCK], mgx[LN_BLOCK];
        ln_prefetch_block(dy, x, dx, r0 + LN_BLOCK, rows, cols);
        for (int i = 0; i < nr; i++) {
            size_t off = (size_t)(r0 + i) * cols;
            const float *dyr = dy + off, *xr = x + off;
            float m = mean[r0 + i], rs = rstd[r0 + i];
            sb_v8d g1 = {0}, gx = {0};
            for (int c = 0; c < vec; c += LANES) {
                sb_v8f dyv = v8f_load(dyr + c);
                sb_v8f xhat = (v8f_load(xr + c) - m) * rs, g = dyv * v8f_load(gamma + c);
                sb_v8d gw = v8f_wide(g);
                g1 += gw;
                gx += gw * v8f_wide(xhat);
                v8f_store(dgamma + c, v8f_load(dgamma + c) + dyv * xhat);
                v8f_store(dbeta + c, v8f_load(dbeta + c) + dyv);
            }
            ag[i] = g1, agx[i] = gx;
        }
        for (int i = 0; i < nr; i++) {
            size_t off = (size_t)(r0 + i) * cols;
            const float *dyr = dy + off, *xr = x + off;
            float m = mean[r0 + i], rs = rstd[r0 + i];
            double sum_g = lane_sum(&ag[i]);
            double sum_gx = lane_sum(&agx[i]);
            for (int c = vec; c < cols; c++) {
                float xhat = (xr[c] - m) * rs, g = dyr[c] * gamma[c];
                sum_g += g;
                sum_gx += (double)g * xhat;
                dgamma[c] += dyr[c] * xhat;
                dbeta[c] += dyr[c];
            }
            mg[i] = (float)(sum_g / cols), mgx[i] = (float)(sum_gx / cols);
        }
        for (int i = 0; i < nr; i++) {
            size_t off = (size_t)(r0 + i) * cols;
            const float *dyr = dy + off, *xr = x + off;
            float *dxr = dx + off;
            float m = mean[r0 + i], rs = rstd[r0 + i];
            int c = 0;
            for (; c < vec; c += LANES) {
                sb_v8f xhat = (v8f_load(xr + c) - m) * rs;
                sb_v8f d = rs * (v8f_load(dyr + c) * v8f_load(gamma + c) - mg[i] - xhat * mgx[i]);
                v8f_store(dxr + c, v8f_load(dxr + c) + d);
            }
            for (; c < cols; c++) {
                float xhat = (xr[c] - m) * rs;
                dxr[c] += rs * (dyr[c] * gamma[c] - mg[i] - xhat * mgx[i]);
            }
        }
    }
}

CPU_SIMD void sb_cpu_add_bias(float *restrict y, const float *restrict bias, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *restrict row = y + (size_t)r * cols;
        for (int c = 0; c < cols; c++) row[c] += bias[c];
    }
}

/* Column sums in row order from zero; restrict (db is never a row of dy)
 * lets gcc keep db in vector registers across a row. */
CPU_SIMD void sb_cpu_bias_grad(float *restrict db, const float *restrict dy, int rows, int cols)
{
    memset(db, 0, (size_t)cols * sizeof *db);
    for (int r = 0; r < rows; r++) {
        const float *restrict row = dy + (size_t)r * cols;
        for (int c = 0; c < cols; c++) db[c] += row[c];
    }
}

CPU_SIMD void sb_cpu_gelu_forward(float *restrict x, float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float pdf, v = x[i];
        float cdf = sb_cpu_gauss_cdf_pdf(v, &pdf);
        y[i] = v * cdf;
        x[i] = cdf + v * pdf;
    }
}

CPU_SIMD void sb_cpu_gelu_backward(float *restrict dy, const float *restrict dgelu, size_t n)
{
    for (size_t i = 0; i < n; i++) dy[i] *= dgelu[i];
}

/* max over x[0, n), n >= 1. */
static inline float row_max(const float *x, int n)
{
    float m[LANES];
    for (int j = 0; j < LANES; j++) m[j] = x[0];
    int c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int j = 0; j < LANES; j++) m[j] = x[c + j] > m[j] ? x[c + j] : m[j];
    float mx = m[0];
    for (int j = 1; j < LANES; j++) mx = m[j] > mx ? m[j] : mx;
    for (; c < n; c++) mx = x[c] > mx ? x[c] : mx;
    return mx;
}

/* sum over x[0, n) of x[c] * (y ? y[c] : 1), in LANES partial sums. */
static inline float row_dot(const float *x, const float *y, int n)
{
    float s[LANES] = {0};
    int c = 0;
    if (y)
        for (; c + LANES <= n; c += LANES)
            for (int j = 0; j < LANES; j++) s[j] += x[c + j] * y[c + j];
    else
        for (; c + LANES <= n; c += LANES)
            for (int j = 0; j < LANES; j++) s[j] += x[c + j];
    float sum = 0.0f;
    for (int j = 0; j < LANES; j++) sum += s[j];
    for (; c < n; c++) sum += x[c] * (y ? y[c] : 1.0f);
    return sum;
}

/* Rows of about SOFTMAX_CHUNK floats at a time: each row's max subtracted,
 * then exp over the chunk as one flat run (whole vectors, where a row of
 * an attention's 50 columns would leave a scalar tail of 2 exps to every
 * row), then each row's sum and scale. The same arithmetic as row by row:
 * exp(x - max), the sum in row_dot's lanes. */
#define SOFTMAX_CHUNK 2048

CPU_SIMD void sb_cpu_softmax_rows(float *x, int rows, int cols)
{
    int chunk = cols < SOFTMAX_CHUNK ? SOFTMAX_CHUNK / cols : 1;
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int r1 = r0 + chunk < rows ? r0 + chunk : rows;
        for (int r = r0; r < r1; r++) {
            float *xr = x + (size_t)r * cols;
            float mx = row_max(xr, cols);
            for (int c = 0; c < cols; c++) xr[c] -= mx;
        }
        float *xc = x + (size_t)r0 * cols;
        size_t n = (size_t)(r1 - r0) * cols;
        for (size_t i = 0; i < n; i++) xc[i] = sb_cpu_exp_nonpos(xc[i]); /* x - max <= 0 */
        for (int r = r0; r < r1; r++) {
            float *xr = x + (size_t)r * cols;
            float inv = 1.0f / row_dot(xr, NULL, cols);
            for (int c = 0; c < cols; c++) xr[c] *= inv;
        }
    }
}

CPU_SIMD void sb_cpu_softmax_rows_backward(float *dy, const float *y, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *dr = dy + (size_t)r * cols;
        const float *yr = y + (size_t)r * cols;
        float dot = row_dot(dr, yr, cols);
        for (int c = 0; c < cols; c++) dr[c] = yr[c] * (dr[c] - dot);
    }
}

void sb_cpu_transpose_0213(const float *x, int a, int b, int c, int d, float *y)
{
    /* runs of d floats (a head's 16) copied by a loop, not memcpy: a call
     * per 64 bytes cost more than the copy */
    for (int i = 0; i < a; i++)
        for (int j = 0; j < b; j++)
            for (int k = 0; k < c; k++) {
                float *restrict dst = y + (((size_t)i * c + k) * b + j) * d;
                const float *restrict src = x + (((size_t)i * b + j) * c + k) * d;
                for (int l = 0; l < d; l++) dst[l] = src[l];
            }
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

/* Rows copied by a loop, not memcpy: the vit's bias rows (src_stride 0,
 * 64-192 floats, one a token) cost more in memcpy calls than in copying.
 * It asks for the next destination row's lines for ownership while it
 * writes the current row: its destinations are mostly the first write of a
 * kept activation (the vit's bias fills), whose lines come from L3
 * (measured: docs/workloads.md, "Software prefetch"). */
CPU_SIMD void sb_cpu_copy2d(float *dst, long dst_stride, const float *src, long src_stride,
                            int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *restrict d = dst + r * dst_stride;
        const float *restrict s = src + r * src_stride;
        if (r + 1 < rows) /* the next row's lines asked for, for writing: a hint only */
            for (int j = 0; j < cols; j += LINE_FLOATS)
                __builtin_prefetch(d + dst_stride + j, 1, 3);
        for (int j = 0; j < cols; j++) d[j] = s[j];
    }
}

void sb_cpu_zero(float *y, size_t n) { memset(y, 0, n * sizeof *y); }
