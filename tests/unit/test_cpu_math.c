/* The cpu backend's branch-free exp and Gaussian CDF (src/backend/cpu_math.h)
 * against libm's double precision over the floats of the ranges the vit
 * uses (every 61st float in [-104, 89] for exp, every 61st in [-12, 12] for
 * the CDF and density: about 36 million each):
 *
 * - exp within 2 ulp (relative 2.4e-7) where the result is a normal float
 *   above 2.4e-38, 0 or that below (no denormals), inf above 88.73;
 * - Phi(x) within 1e-6 relative where Phi < 0.5 (the tail: GELU's output
 *   at negative x is x Phi(x)) and 1.2e-7 absolute above; phi(x) within
 *   4e-7 relative where it is above 1e-37;
 * - the error bounds bite: a Phi with erf's first coefficient off by 1e-6
 *   fails them (the check is not vacuous).
 * Exits 0 when every test passes, non-zero otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "backend/cpu_math.h"

static void test_exp(void **state)
{
    (void)state;
    double worst = 0.0;
    float at = 0.0f;
    for (int sign = -1; sign <= 1; sign += 2)
        for (uint32_t u = 0; u <= sb_cpu_float_bits(sign < 0 ? 104.0f : 89.0f); u += 61) {
        float x = sign * sb_cpu_bits_float(u);
        double want = exp((double)x);
        float got = sb_cpu_exp(x);
        if (want < 2.4e-38) { /* below about 2^-125: 0, or the value */
            if (got != 0.0f && fabs(got - want) > 2.4e-7 * want)
                fail_msg("exp(%a) = %a, want 0 or %g", x, got, want);
            continue;
        }
        if (want > 3.4028234663852886e38) {
            if (!isinf(got)) fail_msg("exp(%a) = %a, want inf", x, got);
            continue;
        }
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel, at = x;
        }
    printf("exp: max relative error %.3g at %a\n", worst, at);
    assert_true(worst <= 2.4e-7);
}

/* Phi(x) = erfc(-x / sqrt 2) / 2 in double. */
static double phi_ref(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }

/* Worst errors of cdf over every 61st float in [-12, 12]: *tail relative where
 * Phi < 0.5, *body absolute above, *dens phi's relative. */
static void sweep(float (*cdf)(float, float *), double *tail, double *body, double *dens)
{
    *tail = *body = *dens = 0.0;
    for (int sign = -1; sign <= 1; sign += 2)
        for (uint32_t u = 0; u <= sb_cpu_float_bits(12.0f); u += 61) {
        float x = sign * sb_cpu_bits_float(u), pdf;
        float got = cdf(x, &pdf);
        double want = phi_ref(x), dwant = 0.3989422804014327 * exp(-0.5 * (double)x * x);
        if (want < 0.5) *tail = fmax(*tail, fabs(got - want) / want);
        else *body = fmax(*body, fabs(got - want));
        if (dwant > 1e-37) *dens = fmax(*dens, fabs(pdf - dwant) / dwant);
        }
}

static void test_gauss(void **state)
{
    (void)state;
    double tail, body, dens;
    sweep(sb_cpu_gauss_cdf_pdf, &tail, &body, &dens);
    printf("Phi: tail %.3g relative, body %.3g absolute; phi %.3g relative\n", tail, body, dens);
    assert_true(tail <= 1e-6);
    assert_true(body <= 1.2e-7);
    assert_true(dens <= 4e-7);
}

/* sb_cpu_gauss_cdf_pdf with erf(a)/a's leading coefficient 1e-6 off. */
static float broken_cdf(float x, float *pdf)
{
    float good = sb_cpu_gauss_cdf_pdf(x, pdf), ax = fabsf(x);
    if (ax * 0.70710678f >= 0.9f) return good;
    float delta = 0.5f * 1e-6f * ax * 0.70710678f; /* 0.5 * a * 1e-6 */
    return x < 0.0f ? good - delta : good + delta;
}

static void test_bounds_bite(void **state)
{
    (void)state;
    double tail, body, dens;
    sweep(broken_cdf, &tail, &body, &dens);
    assert_true(tail > 1e-6 || body > 1.2e-7);
}

/* The shortened exps give sb_cpu_exp_hilo's bits where they apply:
 * sb_cpu_exp(x) and, for x <= 0, sb_cpu_exp_nonpos(x) equal
 * sb_cpu_exp_hilo(x, 0) (every 1021st float of each sign: 2.1 million, every
 * exponent; -0, +-inf, NaN);
 * the non-positive core with a lo (GELU's exp(-x^2 / 2)) equals the full
 * one for hi <= 0 and lo up to 2^-12 |hi|. */
static void same_exp_bits(float got, float want, const char *what, float x, float lo)
{
    if (sb_cpu_float_bits(got) != sb_cpu_float_bits(want))
        fail_msg("%s(%a, %a) = %a, want %a", what, x, lo, got, want);
}

static void test_exp_variants(void **state)
{
    (void)state;
    const float special[] = {-0.0f, 0.0f, -__builtin_inff(), __builtin_inff(), __builtin_nanf("")};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        float x = special[i];
        same_exp_bits(sb_cpu_exp(x), sb_cpu_exp_hilo(x, 0.0f), "exp", x, 0.0f);
        if (!(x > 0.0f))
            same_exp_bits(sb_cpu_exp_nonpos(x), sb_cpu_exp_hilo(x, 0.0f), "exp_nonpos", x, 0.0f);
    }
    for (uint32_t u = 0; u < 0x7f800000u; u += 1021) {
        float x = sb_cpu_bits_float(u), nx = -x;
        same_exp_bits(sb_cpu_exp(x), sb_cpu_exp_hilo(x, 0.0f), "exp", x, 0.0f);
        same_exp_bits(sb_cpu_exp(nx), sb_cpu_exp_hilo(nx, 0.0f), "exp", nx, 0.0f);
        same_exp_bits(sb_cpu_exp_nonpos(nx), sb_cpu_exp_hilo(nx, 0.0f), "exp_nonpos", nx, 0.0f);
        float lo = nx * (float)((u % 8192u) / 8192.0 - 0.5) * 2.44140625e-4f;
        same_exp_bits(sb_cpu_exp_core(nx, lo, 1, 1), sb_cpu_exp_hilo(nx, lo), "exp_core", nx, lo);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_gauss),
        cmocka_unit_test(test_bounds_bite),
        cmocka_unit_test(test_exp_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
