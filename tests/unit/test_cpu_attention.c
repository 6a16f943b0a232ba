/* The cpu backend's fused attention (src/backend/cpu_attention.c) against
 * the batched path the vit runs without it (heads split by transpose_0213,
 * sgemm_strided_batched, softmax_rows and their backward), bit for bit, at
 * the default vit's shape (T 50, hd 16), patch 7's (T 17), a wider head
 * (hd 32), fewer tokens than a block of rows (T 5) and more than one block
 * of columns (T 65), T 24, 26 and 37 (row blocks of 12, 9 and 10, the
 * last two overlapping); the backward without dprobs (dS kept per head)
 * equal to the one with it; and the context against a double-precision reference
 * within 1e-5 (so that equal-but-wrong cannot pass), also at T 17 with hd
 * 32, where OpenBLAS's batched path itself sums in another order. Skipped where the op
 * does not take the shape (a CPU without AVX-512). Exits 0 when every test
 * passes or is skipped. */
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

static const struct sb_backend_ops *be = &sb_backend_cpu;

static float *random_floats(struct sb_rng *rng, size_t n)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * sb_rng_uniform(rng) - 1.0);
    return x;
}

static float *floats(size_t n)
{
    float *x = calloc(n, sizeof *x);
    assert_non_null(x);
    return x;
}

/* Index of the first differing float, or -1. */
static long first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a)) return (long)i;
    return -1;
}

static void check_shape(int n, int H, int T, int hd, int bitwise)
{
    int Wl = H * hd;
    size_t tok = (size_t)n * T * Wl, pp = (size_t)n * H * T * T;
    long th = (long)T * hd, tt = (long)T * T;
    float scale = 1.0f / sqrtf((float)hd);
    struct sb_rng rng;
    sb_rng_seed(&rng, 7, (uint64_t)T * 100 + hd);
    float *q = random_floats(&rng, tok), *k = random_floats(&rng, tok);
    float *v = random_floats(&rng, tok), *dctx = random_floats(&rng, tok);
    /* the batched path, as vit_pass.c runs it */
    float *qh = floats(tok), *kh = floats(tok), *vh = floats(tok), *dh = floats(tok);
    be->transpose_0213(q, n, T, H, hd, qh);
    be->transpose_0213(k, n, T, H, hd, kh);
    be->transpose_0213(v, n, T, H, hd, vh);
    be->transpose_0213(dctx, n, T, H, hd, dh);
    float *p_ref = floats(pp), *ctx_ref = floats(tok), *ds_ref = floats(pp);
    float *dq_ref = floats(tok), *dk_ref = floats(tok), *dv_ref = floats(tok);
    be->sgemm_strided_batched(0, 1, T, T, hd, scale, qh, hd, th, kh, hd, th, 0.0f, p_ref, T, tt,
                              n * H);
    be->softmax_rows(p_ref, n * H * T, T);
    be->sgemm_strided_batched(0, 1, T, T, hd, 1.0f, dh, hd, th, vh, hd, th, 0.0f, ds_ref, T, tt,
                              n * H);
    be->softmax_rows_backward(ds_ref, p_ref, n * H * T, T);
    for (int s = 0; s < n; s++) {
        size_t o = (size_t)s * T * Wl;
        const float *ps = p_ref + s * H * tt, *dss = ds_ref + s * H * tt;
        be->sgemm_strided_batched(0, 0, T, hd, T, 1.0f, ps, T, tt, vh + s * H * th, hd, th, 0.0f,
                                  ctx_ref + o, Wl, hd, H);
        be->sgemm_strided_batched(1, 0, T, hd, T, 1.0f, ps, T, tt, dh + s * H * th, hd, th, 0.0f,
                                  dv_ref + o, Wl, hd, H);
        be->sgemm_strided_batched(0, 0, T, hd, T, scale, dss, T, tt, kh + s * H * th, hd, th,
                                  0.0f, dq_ref + o, Wl, hd, H);
        be->sgemm_strided_batched(1, 0, T, hd, T, scale, dss, T, tt, qh + s * H * th, hd, th,
                                  0.0f, dk_ref + o, Wl, hd, H);
    }
    /* the fused ops */
    float *p = floats(pp), *ctx = floats(tok), *ds = floats(pp);
    float *dq = floats(tok), *dk = floats(tok), *dv = floats(tok);
    assert_int_equal(be->attention_forward(q, k, v, Wl, n, H, T, hd, scale, p, ctx, Wl), 1);
    assert_int_equal(be->attention_backward(dctx, Wl, q, k, v, Wl, p, n, H, T, hd, scale, ds, dq,
                                            dk, dv, Wl),
                     1);
    /* without dprobs (each head's dS in the op's own block, T <= 64): the
     * same dq, dk, dv; beyond 64 tokens declined, nothing written */
    float *dq2 = floats(tok), *dk2 = floats(tok), *dv2 = floats(tok);
    int took = be->attention_backward(dctx, Wl, q, k, v, Wl, p, n, H, T, hd, scale, NULL, dq2,
                                      dk2, dv2, Wl);
    assert_int_equal(took, T <= 64);
    const float *own[] = {dq2, dk2, dv2}, *kept[] = {dq, dk, dv};
    for (int i = 0; i < 3; i++) {
        long at = took ? first_diff(own[i], kept[i], tok) : -1;
        for (size_t j = 0; !took && j < tok && at < 0; j++)
            if (own[i][j] != 0.0f) at = (long)j;
        if (at >= 0)
            fail_msg("T %d hd %d: dprobs NULL: output %d [%ld] = %a, with dprobs %a", T, hd, i,
                     at, own[i][at], kept[i][at]);
    }
    free(dq2), free(dk2), free(dv2);
    const char *names[] = {"probs", "ctx", "dS", "dq", "dk", "dv"};
    const float *got[] = {p, ctx, ds, dq, dk, dv}, *want[] = {p_ref, ctx_ref, ds_ref,
                                                               dq_ref, dk_ref, dv_ref};
    size_t len[] = {pp, tok, pp, tok, tok, tok};
    for (int i = 0; i < 6 && bitwise; i++) {
        long at = first_diff(got[i], want[i], len[i]);
        if (at >= 0)
            fail_msg("n %d H %d T %d hd %d: %s[%ld] = %a, batched path %a", n, H, T, hd,
                     names[i], at, got[i][at], want[i][at]);
    }
    /* the context against double precision: softmax(scale q k^T) v */
    double worst = 0.0;
    double *row = malloc((size_t)T * sizeof *row);
    assert_non_null(row);
    for (int s = 0; s < n; s++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const float *qi = q + ((size_t)s * T + i) * Wl + h * hd;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < T; j++) {
                    const float *kj = k + ((size_t)s * T + j) * Wl + h * hd;
                    double d = 0.0;
                    for (int c = 0; c < hd; c++) d += (double)qi[c] * kj[c];
                    row[j] = d * scale;
                    mx = fmax(mx, row[j]);
                }
                for (int j = 0; j < T; j++) sum += row[j] = exp(row[j] - mx);
                for (int c = 0; c < hd; c++) {
                    double want_c = 0.0;
                    for (int j = 0; j < T; j++)
                        want_c += row[j] / sum * v[((size_t)s * T + j) * Wl + h * hd + c];
                    double d = fabs(ctx[((size_t)s * T + i) * Wl + h * hd + c] - want_c);
                    worst = fmax(worst, d);
                }
            }
    if (worst > 1e-5) fail_msg("T %d hd %d: context off double precision by %g", T, hd, worst);
    free(row);
    float *bufs[] = {q, k, v, dctx, qh, kh, vh, dh, p_ref, ctx_ref, ds_ref, dq_ref, dk_ref, dv_ref,
                     p, ctx, ds, dq, dk, dv};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

static void test_fused_equals_batched(void **state)
{
    (void)state;
    if (!be->attention_forward || !be->attention_forward(NULL, NULL, NULL, 64, 0, 4, 50, 16, 1.0f,
                                                         NULL, NULL, 64))
        skip(); /* no AVX-512: the vit runs the batched path */
    check_shape(2, 4, 50, 16, 1); /* the default vit */
    check_shape(2, 2, 17, 16, 1); /* patch 7 */
    check_shape(2, 2, 50, 32, 1); /* a wider head */
    check_shape(3, 1, 5, 16, 1);  /* fewer tokens than a block of 8 rows */
    check_shape(1, 2, 65, 16, 1); /* more than 64 columns of scores */
    /* rows_by_matrix's row blocks: 24 = 2 x 12; 26 = 3 x 9 and 37 = 4 x 10,
     * the last block overlapping the one before */
    check_shape(2, 2, 24, 16, 1);
    check_shape(2, 2, 26, 16, 1);
    check_shape(2, 1, 37, 16, 1);
    /* few tokens and a wide head: OpenBLAS 0.3.21 takes another kernel for
     * the batched scores (its sums not one FMA chain in order), so only
     * the double-precision check */
    check_shape(2, 2, 17, 32, 0);
}

/* Shapes beyond the op (hd not a multiple of 16) are declined, nothing
 * written. */
static void test_declines(void **state)
{
    (void)state;
    if (!be->attention_forward) skip();
    assert_int_equal(be->attention_forward(NULL, NULL, NULL, 32, 0, 4, 50, 8, 1.0f, NULL, NULL,
                                           32),
                     0);
    assert_int_equal(be->attention_backward(NULL, 32, NULL, NULL, NULL, 32, NULL, 0, 4, 50, 8,
                                            1.0f, NULL, NULL, NULL, NULL, 32),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_equals_batched),
        cmocka_unit_test(test_declines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
