/* Branch-free float exp and Gaussian CDF for the CPU backend's elementwise
 * loops (cpu_nn.c: softmax, GELU). glibc's expf and erff are scalar calls
 * that gcc cannot vectorise without -ffast-math; these are straight-line
 * float arithmetic and selects, so a loop over an array of them becomes SIMD
 * code at -O3 (the whole of a vit step's GELU and softmax time was these
 * calls: docs/workloads.md, "Where the time goes").
 *
 * Accuracy (checked against double precision over every 61st float of
 * the ranges that matter by tests/unit/test_cpu_math.c): exp within 2 ulp;
 * the Gaussian CDF within 1e-6 relative where it is below 0.5 and 1.2e-7
 * absolute above (glibc's 0.5 (1 + erff(x / sqrt 2)) loses all relative
 * accuracy in that tail: 1 + erf cancels). The polynomial
 * coefficients are least-squares fits with relative-error reweighting
 * (numpy, float64), made for this file:
 *   exp(r)        degree 6 in r on |r| <= ln2/2, max rel. error 3.9e-9;
 *   erf(a) / a    degree 5 in a^2 on [0, 0.9], 2.5e-8;
 *   erfcx(a) / t  degree 8 in t = 1 / (1 + a/2) on [0.9, 10], 7.9e-9,
 *                 erfcx(a) = exp(a^2) erfc(a) (the substitution of
 *                 Abramowitz & Stegun 7.1.25-28, a rational t).
 * Results differ from glibc's in the last bits: the vit's parameters are
 * not byte-identical to those of the erff/expf loops (docs/workloads.md). */
#ifndef SB_CPU_MATH_H
#define SB_CPU_MATH_H

#include <stdint.h>
#include <string.h>

static inline float sb_cpu_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t sb_cpu_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* exp(hi + lo), |lo| << |hi| (lo carries the rounding error of hi, added
 * after the range reduction). 0 below about 2^-125 (x < -86.7: no denormals),
 * inf above 88.72. Range reduction hi + lo = k ln2 + r, |r| <= ln2/2, k by
 * rounding with the 1.5 * 2^23 shifter (round to nearest), ln2 in two
 * parts (Cody & Waite 1980) so that k * LN2_HI is exact.
 *
 * sb_cpu_exp_core is it with two steps optional, for callers that know
 * they are no-ops: nonpos (hi <= 0 or NaN) drops the clamp of hi at 104
 * and the overflow to inf (k <= 0, so the exponent field never passes
 * 254); has_lo = 0 (lo = 0) drops r + lo (r + 0 differs from r only at
 * r = -0, and r enters the polynomial only through products, so p is the
 * same). Each leaves the result's bits as they were; tests/unit/
 * test_cpu_math.c checks that over the non-positive floats. */
static inline __attribute__((always_inline)) float sb_cpu_exp_core(float hi, float lo, int nonpos,
                                                                   int has_lo)
{
    const float log2e = 1.44269504088896341f, shifter = 12582912.0f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    hi = hi < -104.0f ? -104.0f : hi;
    if (!nonpos) hi = hi > 104.0f ? 104.0f : hi;
    float kf = hi * log2e + shifter;
    kf = kf - shifter;
    float r = hi - kf * ln2_hi;
    r = r - kf * ln2_lo;
    if (has_lo) r = r + lo;
    float p = 1.38623131602889720e-3f;
    p = p * r + 8.37297731798547100e-3f;
    p = p * r + 4.16676720110352500e-2f;
    p = p * r + 1.66664422394303870e-1f;
    p = p * r + 4.99999950079528600e-1f;
    p = p * r + 1.00000003139828290f;
    p = p * r + 1.00000000032943050f;
    int32_t k = (int32_t)kf;
    int32_t e = k + 126; /* 2^k = 2^(k - 1) * 2, so that k = 128 stays finite */
    int32_t e1 = e < 1 ? 1 : e; /* a valid exponent field; replaced below */
    if (!nonpos) e1 = e1 > 254 ? 254 : e1;
    float scale = sb_cpu_bits_float((uint32_t)e1 << 23);
    float out = (p * scale) * 2.0f;
    out = e < 1 ? 0.0f : out;
    if (!nonpos) out = e > 254 ? __builtin_inff() : out;
    return out;
}

/* exp(hi + lo): sb_cpu_exp_core with every step. */
static inline float sb_cpu_exp_hilo(float hi, float lo) { return sb_cpu_exp_core(hi, lo, 0, 1); }

/* exp(x) for float x: sb_cpu_exp_hilo(x, 0). */
static inline float sb_cpu_exp(float x) { return sb_cpu_exp_core(x, 0.0f, 0, 0); }

/* exp(x) for x <= 0 or NaN (a softmax's x - max): sb_cpu_exp's bits, fewer
 * steps. */
static inline float sb_cpu_exp_nonpos(float x) { return sb_cpu_exp_core(x, 0.0f, 1, 0); }

/* The standard normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 and, in *pdf,
 * the density phi(x) = exp(-x^2 / 2) / sqrt(2 pi). With a = |x| / sqrt 2:
 * a < 0.9, erf(a) = a P(a^2); else erfc(a) = exp(-a^2) t Q(t), t = 1 / (1
 * + a/2), and Phi = 1 - erfc/2 or erfc/2 by the sign. exp(-x^2/2) takes
 * x^2 as hi + lo (x split into its top 12 significant bits and the rest,
 * Dekker 1971), so that the exponent's rounding (up to 87 * 6e-8) does not
 * become the result's relative error. */
static inline float sb_cpu_gauss_cdf_pdf(float x, float *pdf)
{
    const float inv_sqrt2 = 0.70710678118654752f, inv_sqrt_2pi = 0.3989422804014327f;
    float ax = x < 0.0f ? -x : x;
    float xh = sb_cpu_bits_float(sb_cpu_float_bits(ax) & 0xfffff000u);
    float xl = ax - xh;
    float s_hi = 0.5f * (xh * xh);        /* exact: 12-bit square, halved */
    float s_lo = 0.5f * (xl * (ax + xh)); /* x^2 / 2 = s_hi + s_lo */
    float g = sb_cpu_exp_core(-s_hi, -s_lo, 1, 1); /* exp(-a^2); -s_hi <= 0 */
    *pdf = g * inv_sqrt_2pi;
    float a = ax * inv_sqrt2, a2 = a * a;
    /* small |x|: erf(a) / a */
    float q = -6.11606701630436100e-4f;
    q = q * a2 + 5.01607961085172000e-3f;
    q = q * a2 - 2.67808517564929200e-2f;
    q = q * a2 + 1.12821559942279350e-1f;
    q = q * a2 - 3.76125167905186100e-1f;
    q = q * a2 + 1.12837914708277730f;
    float erf_a = a * q;
    /* large |x|: erfcx(a) / t */
    float t = 1.0f / (1.0f + 0.5f * a);
    float c = -4.27734716980109134e-02f;
    c = c * t + 2.34514293467678520e-01f;
    c = c * t - 4.24370498468992496e-01f;
    c = c * t + 2.37016341916111040e-01f;
    c = c * t - 1.20864931641220114e-02f;
    c = c * t + 2.00192646709289795e-01f;
    c = c * t + 2.43175358377191841e-01f;
    c = c * t + 2.82409236081761217e-01f;
    c = c * t + 2.82083188876468383e-01f;
    float half_erfc = 0.5f * (g * (t * c));
    float small_lo = 0.5f - 0.5f * erf_a, small_hi = 0.5f + 0.5f * erf_a;
    float lo = a < 0.9f ? small_lo : half_erfc;        /* Phi(-|x|) */
    float hi = a < 0.9f ? small_hi : 1.0f - half_erfc; /* Phi(|x|) */
    return x < 0.0f ? lo : hi;
}

#endif
