/* fp16 / bf16 conversions; see half.h. */
#include "core/half.h"

#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#define F16C_ALWAYS 1
#elif defined(__x86_64__) && defined(__GNUC__)
/* Not built for F16C: its vector paths are compiled for it anyway and
 * chosen at run time when the CPU has it (every x86-64 since 2012). */
#include <cpuid.h>
#include <immintrin.h>
#define F16C_RUNTIME 1
#define F16C_TARGET __attribute__((target("avx,f16c")))
#endif

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#if defined(F16C_ALWAYS) || defined(F16C_RUNTIME)
#ifndef F16C_TARGET
#define F16C_TARGET
#endif
/* The first n - n % 8 values of each bulk operation, 8 at a time with F16C
 * (round to nearest even, as the scalar code); returns how many were done. */
F16C_TARGET static size_t encode8(const float *x, uint16_t *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

F16C_TARGET static size_t decode8(const uint16_t *h, float *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    return i;
}

F16C_TARGET static size_t round8(float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    return i;
}

F16C_TARGET static size_t accumulate8(float *acc, const uint16_t *h, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), v));
    }
    return i;
}

/* Whether the vector paths may run: always when built for F16C, else when
 * the CPU says it has F16C and AVX (CPUID leaf 1, ECX bits 29 and 28) and
 * the OS saves the YMM registers (OSXSAVE, ECX bit 27, and XCR0 bits 1-2;
 * Intel SDM vol. 1, 14.3). CPUID directly: clang 14's
 * __builtin_cpu_supports does not know "f16c". */
static int have_f16c(void)
{
#ifdef F16C_ALWAYS
    return 1;
#else
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        known = 0;
        if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1) && (c >> 28 & 1) && (c >> 27 & 1)) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            known = (lo & 6u) == 6u;
        }
    }
    return known;
#endif
}
#else
static size_t encode8(const float *x, uint16_t *out, size_t n) { (void)x; (void)out; (void)n; return 0; }
static size_t decode8(const uint16_t *h, float *out, size_t n) { (void)h; (void)out; (void)n; return 0; }
static size_t accumulate8(float *acc, const uint16_t *h, size_t n) { (void)acc; (void)h; (void)n; return 0; }
static size_t round8(float *x, size_t n) { (void)x; (void)n; return 0; }
static int have_f16c(void) { return 0; }
#endif

#ifndef __F16C__
/* binary32 -> binary16, round to nearest even (portable path). */
static uint16_t fp16_from_bits(uint32_t u)
{
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xffu) /* infinity, or NaN kept quiet */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow: infinity */
    if (e <= 0) {                                    /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e; /* 14..24 */
        uint32_t h = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into infinity */
    return (uint16_t)(sign | h);
}

/* binary16 -> binary32 (exact; portable path). */
static float fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return float_of(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return float_of(sign);
        /* subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return float_of(sign | ((exp - 15 + 127) << 23) | (man << 13));
}
#endif

uint16_t sb_f32_to_fp16(float x)
{
#ifdef __F16C__
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
#else
    return fp16_from_bits(bits_of(x));
#endif
}

float sb_fp16_to_f32(uint16_t h)
{
#ifdef __F16C__
    return _cvtsh_ss(h);
#else
    return fp16_to_float(h);
#endif
}

uint16_t sb_f32_to_bf16(float x)
{
    uint32_t u = bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float sb_bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

void sb_half_encode(enum sb_half_format fmt, const float *x, uint16_t *out, size_t n)
{
    size_t i = 0;
    if (fmt == SB_HALF_BF16) {
        for (; i < n; i++) out[i] = sb_f32_to_bf16(x[i]);
        return;
    }
    if (have_f16c()) i = encode8(x, out, n);
    for (; i < n; i++) out[i] = sb_f32_to_fp16(x[i]);
}

void sb_half_decode(enum sb_half_format fmt, const uint16_t *h, float *out, size_t n)
{
    size_t i = 0;
    if (fmt == SB_HALF_BF16) {
        for (; i < n; i++) out[i] = sb_bf16_to_f32(h[i]);
        return;
    }
    if (have_f16c()) i = decode8(h, out, n);
    for (; i < n; i++) out[i] = sb_fp16_to_f32(h[i]);
}

void sb_half_accumulate(enum sb_half_format fmt, float *acc, const uint16_t *h, size_t n)
{
    size_t i = 0;
    if (fmt == SB_HALF_BF16) {
        for (; i < n; i++) acc[i] += sb_bf16_to_f32(h[i]);
        return;
    }
    if (have_f16c()) i = accumulate8(acc, h, n);
    for (; i < n; i++) acc[i] += sb_fp16_to_f32(h[i]);
}

void sb_half_round(enum sb_half_format fmt, float *x, size_t n)
{
    size_t i = 0;
    if (fmt == SB_HALF_BF16) {
        for (; i < n; i++) x[i] = sb_bf16_to_f32(sb_f32_to_bf16(x[i]));
        return;
    }
    if (have_f16c()) i = round8(x, n); /* 8 at a time, the same rounding */
    for (; i < n; i++) x[i] = sb_fp16_to_f32(sb_f32_to_fp16(x[i]));
}
