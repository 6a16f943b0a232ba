/* The CPU backend's fused attention (backend.h: attention_forward,
 * attention_backward): the six matrix products of one (sample, head) and
 * its softmax in one pass over data that stays in the L1/L2 cache, where
 * the batched path made 9,216 cblas_sgemm calls a step (1,536 of them
 * through OpenBLAS's packing path, with its zeroing of C) and a softmax pass
 * over all heads between them.
 *
 * Same bits as OpenBLAS 0.3.21's SGEMM on SkylakeX/Sapphire Rapids at these
 * shapes: each output element is one fused multiply-add chain over the
 * inner dimension in index order, starting from zero, times alpha at the
 * end (what both its small-matrix and its packed kernels compute for
 * K <= 256, checked element by element by tests/unit/test_cpu_attention.c
 * against cblas_sgemm), and the softmax is sb_cpu_softmax_rows's. So the
 * vit's parameters are byte-identical to the batched path's
 * (tools/params_identity.sh).
 *
 * q, k and v are read in token layout (the projections' GEMM output, no
 * head split), the context and the q, k, v gradients written so.
 *
 * AVX-512 only (hd a multiple of 16, one vector per 16 columns of a head,
 * 8 rows a block so that 8 independent chains hide the FMA latency); on
 * another CPU, or a shape beyond the fixed scratch, the ops return 0 and
 * the caller runs the batched products. */
#include "backend/cpu_nn.h"

#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SB_ATTN_AVX512 1
#else
#define SB_ATTN_AVX512 0
#endif

/* The transposed operand's scratch: hd x Tp floats, Tp = T rounded up to
 * 16 (on the stack: 32 KiB). */
#define ATTN_SCRATCH 8192

/* Tokens up to which the backward keeps each head's dS (T, T) in a block of
 * its own on the stack (16 KiB, in L1 while the head is done) when the
 * caller passes no dprobs: the vit's n heads T^2 floats (2.6 MB a block at
 * the default) were written and read back through the caches for nothing,
 * since dS is wanted only inside its head's products. */
#define ATTN_DS_ROWS 64

/* Shapes the fused ops take: hd a multiple of 16 up to 64, the transposed
 * operand within the scratch, and a CPU with AVX-512F. */
static int attn_fits(int T, int hd)
{
#if SB_ATTN_AVX512
    int tp = (T + 15) / 16 * 16;
    return hd % 16 == 0 && hd <= 64 && T >= 1 && (long)hd * tp <= ATTN_SCRATCH &&
           __builtin_cpu_supports("avx512f");
#else
    (void)T, (void)hd;
    return 0;
#endif
}

#if SB_ATTN_AVX512
#define ATTN_TARGET __attribute__((target("avx512f")))

/* yt (hd, tp) = y (T, hd) transposed, rows of y ldy apart; columns T..tp
 * zero. Blocks of 16 x 16 transposed in registers (unpack pairs of rows,
 * then pairs of pairs, then 128-bit lanes), hd a multiple of 16. */
ATTN_TARGET static void transpose_rows(const float *y, int ldy, int T, int hd, int tp, float *yt)
{
    for (int j0 = 0; j0 < tp; j0 += 16)
        for (int d0 = 0; d0 < hd; d0 += 16) {
            __m512 r[16], t[16], u[16];
            for (int j = 0; j < 16; j++)
                r[j] = j0 + j < T ? _mm512_loadu_ps(y + (size_t)(j0 + j) * ldy + d0)
                                  : _mm512_setzero_ps();
            for (int j = 0; j < 16; j += 2) {
                t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
                t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
            }
            /* u[4g + e], 128-bit lane L: rows 4g..4g+3 at column 4L + e */
            for (int g = 0; g < 16; g += 4) {
                __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]);
                __m512d c = _mm512_castps_pd(t[g + 2]), d = _mm512_castps_pd(t[g + 3]);
                u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
                u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
                u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
                u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
            }
            for (int e = 0; e < 4; e++) {
                __m512 x0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x44);
                __m512 x1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xee);
                __m512 y0 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x44);
                __m512 y1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xee);
                float *o = yt + (size_t)(d0 + e) * tp + j0;
                _mm512_storeu_ps(o, _mm512_shuffle_f32x4(x0, y0, 0x88));
                _mm512_storeu_ps(o + (size_t)4 * tp, _mm512_shuffle_f32x4(x0, y0, 0xdd));
                _mm512_storeu_ps(o + (size_t)8 * tp, _mm512_shuffle_f32x4(x1, y1, 0x88));
                _mm512_storeu_ps(o + (size_t)12 * tp, _mm512_shuffle_f32x4(x1, y1, 0xdd));
            }
        }
}

/* out (T, T), rows ldo apart: out[i][j] = alpha * sum_d x[i][d] y[j][d]
 * (one FMA chain over d in order), x rows ldx apart, yt = y transposed
 * (hd, tp). Four rows and four 16-column chunks at a time: 16 chains, so
 * that the FMA latency is hidden with room to spare, and 8 loads (4
 * broadcasts of x, 4 rows of yt) feed 16 FMAs. Rows past T in the last
 * block repeat row T - 1 and are not stored. */
ATTN_TARGET static void rows_by_rows(const float *x, int ldx, const float *yt, int T, int hd,
                                     int tp, float alpha, float *out, int ldo)
{
    __m512 va = _mm512_set1_ps(alpha);
    for (int j0 = 0; j0 < T; j0 += 64) {
        int nc = (T - j0 + 15) / 16;
        nc = nc > 4 ? 4 : nc;
        __mmask16 last = (__mmask16)((T - j0 - 16 * (nc - 1)) >= 16
                                         ? 0xffff
                                         : ((1u << (T - j0 - 16 * (nc - 1))) - 1));
        for (int i = 0; i < T; i += 4) {
            int nr = T - i < 4 ? T - i : 4;
            __m512 acc[4][4];
            const float *xr[4];
            for (int r = 0; r < 4; r++) {
                xr[r] = x + (size_t)(i + (r < nr ? r : nr - 1)) * ldx;
                for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
            }
            if (nc == 4)
                for (int d = 0; d < hd; d++) {
                    const float *yr = yt + (size_t)d * tp + j0;
                    __m512 y0 = _mm512_loadu_ps(yr), y1 = _mm512_loadu_ps(yr + 16);
                    __m512 y2 = _mm512_loadu_ps(yr + 32), y3 = _mm512_loadu_ps(yr + 48);
                    for (int r = 0; r < 4; r++) {
                        __m512 br = _mm512_set1_ps(xr[r][d]);
                        acc[r][0] = _mm512_fmadd_ps(br, y0, acc[r][0]);
                        acc[r][1] = _mm512_fmadd_ps(br, y1, acc[r][1]);
                        acc[r][2] = _mm512_fmadd_ps(br, y2, acc[r][2]);
                        acc[r][3] = _mm512_fmadd_ps(br, y3, acc[r][3]);
                    }
                }
            else
                for (int d = 0; d < hd; d++) {
                    const float *yr = yt + (size_t)d * tp + j0;
                    for (int c = 0; c < nc; c++) {
                        __m512 y = _mm512_loadu_ps(yr + 16 * c);
                        for (int r = 0; r < 4; r++)
                            acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(xr[r][d]), y, acc[r][c]);
                    }
                }
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) {
                    __mmask16 k = c == nc - 1 ? last : (__mmask16)0xffff;
                    _mm512_mask_storeu_ps(out + (size_t)(i + r) * ldo + j0 + 16 * c, k,
                                          _mm512_mul_ps(va, acc[r][c]));
                }
        }
    }
}

/* Rows i..i+R-1, columns c0..c0+15 of rows_by_matrix's out: R chains, one
 * vector of b and R broadcasts of a (one load each) feeding R FMAs a step
 * of j. R a compile-time constant at each call (rbm_rows' switch), so that
 * the accumulators stay in registers. */
ATTN_TARGET static inline __attribute__((always_inline)) void
rbm_block(const float *a, long sai, long saj, const float *b, int ldb, int T, int i, int c0,
          int R, __m512 va, float *out, int ldo)
{
    __m512 acc[12];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    const float *ai = a + i * sai;
    for (int j = 0; j < T; j++) {
        __m512 bj = _mm512_loadu_ps(b + (size_t)j * ldb + c0);
        const float *aj = ai + j * saj;
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(aj[r * sai]), bj, acc[r]);
    }
    for (int r = 0; r < R; r++)
        _mm512_storeu_ps(out + (size_t)(i + r) * ldo + c0, _mm512_mul_ps(va, acc[r]));
}

/* rbm_block with R = rb (1..12) as a constant. */
ATTN_TARGET static void rbm_rows(const float *a, long sai, long saj, const float *b, int ldb,
                                 int T, int i, int c0, int rb, __m512 va, float *out, int ldo)
{
    switch (rb) {
#define RBM_CASE(R)                                                                        \
    case R: rbm_block(a, sai, saj, b, ldb, T, i, c0, R, va, out, ldo); break;
        RBM_CASE(1) RBM_CASE(2) RBM_CASE(3) RBM_CASE(4) RBM_CASE(5) RBM_CASE(6)
        RBM_CASE(7) RBM_CASE(8) RBM_CASE(9) RBM_CASE(10) RBM_CASE(11) RBM_CASE(12)
#undef RBM_CASE
    default: break;
    }
}

/* out (T, hd), rows ldo apart: out[i][c] = alpha * sum_j a(i, j) b[j][c]
 * (one FMA chain over j in order), a(i, j) = a[i * sai + j * saj] (a
 * matrix or its transpose), b rows ldb apart. One vector per 16 columns;
 * the rows in ceil(T / 12) blocks of equal size rb <= 12 (T 50: 5 blocks
 * of 10, where blocks of 8 took 7 with 6 rows computed twice): each step of
 * j is rb + 1 loads for rb FMAs, the load ports' bound. When the blocks do
 * not divide T the last one overlaps the one before (its rows computed
 * twice, the same values). */
ATTN_TARGET static void rows_by_matrix(const float *a, long sai, long saj, const float *b,
                                       int ldb, int T, int hd, float alpha, float *out, int ldo)
{
    __m512 va = _mm512_set1_ps(alpha);
    int nb = (T + 11) / 12, rb = (T + nb - 1) / nb;
    for (int c0 = 0; c0 < hd; c0 += 16)
        for (int i = 0; i < T; i += rb)
            rbm_rows(a, sai, saj, b, ldb, T, i + rb > T ? T - rb : i, c0, rb, va, out, ldo);
}

#endif

int sb_cpu_attention_forward(const float *q, const float *k, const float *v, int ldq, int n,
                             int heads, int T, int hd, float scale, float *probs, float *ctx,
                             int ldc)
{
    if (!attn_fits(T, hd)) return 0;
#if SB_ATTN_AVX512
    int tp = (T + 15) / 16 * 16;
    float kt[ATTN_SCRATCH];
    long tt = (long)T * T;
    for (int s = 0; s < n; s++)
        for (int h = 0; h < heads; h++) {
            long sh = (long)s * heads + h;
            size_t in = (size_t)s * T * ldq + (size_t)h * hd; /* head h's rows of sample s */
            float *p = probs + sh * tt;
            transpose_rows(k + in, ldq, T, hd, tp, kt);
            rows_by_rows(q + in, ldq, kt, T, hd, tp, scale, p, T);
            sb_cpu_softmax_rows(p, T, T);
            rows_by_matrix(p, T, 1, v + in, ldq, T, hd, 1.0f,
                           ctx + (size_t)s * T * ldc + (size_t)h * hd, ldc);
        }
#else
    (void)q, (void)k, (void)v, (void)ldq, (void)n, (void)heads, (void)scale, (void)probs;
    (void)ctx, (void)ldc;
#endif
    return 1;
}

int sb_cpu_attention_backward(const float *dctx, int ldd, const float *q, const float *k,
                              const float *v, int ldq, const float *probs, int n, int heads,
                              int T, int hd, float scale, float *dprobs, float *dq, float *dk,
                              float *dv, int ldo)
{
    if (!attn_fits(T, hd)) return 0;
#if SB_ATTN_AVX512
    if (!dprobs && T > ATTN_DS_ROWS) return 0;
    int tp = (T + 15) / 16 * 16;
    float vt[ATTN_SCRATCH], dsl[ATTN_DS_ROWS * ATTN_DS_ROWS];
    long tt = (long)T * T;
    for (int s = 0; s < n; s++)
        for (int h = 0; h < heads; h++) {
            long sh = (long)s * heads + h;
            size_t in = (size_t)s * T * ldq + (size_t)h * hd;
            const float *p = probs + sh * tt, *dc = dctx + (size_t)s * T * ldd + (size_t)h * hd;
            float *ds = dprobs ? dprobs + sh * tt : dsl; /* dS of this head: L1 */
            size_t o = (size_t)s * T * ldo + (size_t)h * hd;
            /* dP = dctx v^T; dv = P^T dctx; dS = P (dP - rowsum(dP P)) */
            transpose_rows(v + in, ldq, T, hd, tp, vt);
            rows_by_rows(dc, ldd, vt, T, hd, tp, 1.0f, ds, T);
            rows_by_matrix(p, 1, T, dc, ldd, T, hd, 1.0f, dv + o, ldo);
            sb_cpu_softmax_rows_backward(ds, p, T, T);
            /* dq = scale dS k; dk = scale dS^T q */
            rows_by_matrix(ds, T, 1, k + in, ldq, T, hd, scale, dq + o, ldo);
            rows_by_matrix(ds, 1, T, q + in, ldq, T, hd, scale, dk + o, ldo);
        }
#else
    (void)dctx, (void)ldd, (void)q, (void)k, (void)v, (void)ldq, (void)probs, (void)n;
    (void)heads, (void)scale, (void)dprobs, (void)dq, (void)dk, (void)dv, (void)ldo;
#endif
    return 1;
}
