/* 16-bit floating-point formats for gradients on the wire: IEEE 754
 * binary16 ("fp16") and bfloat16 ("bf16", the top half of a binary32).
 *
 * Conversions round to nearest, ties to even. fp16 uses the F16C
 * instructions (_cvtss_sh / _mm_cvtph_ps) when the compiler targets them
 * (__F16C__), else a portable bit-level version with the same results
 * (including subnormals, infinities and NaN). bf16 has no x86 instruction
 * before AVX512-BF16: it is the binary32 bits rounded to the top 16
 * (NaN kept quiet). */
#ifndef SB_HALF_H
#define SB_HALF_H

#include <stddef.h>
#include <stdint.h>

enum sb_half_format {
    SB_HALF_FP16 = 0, /* IEEE binary16: 1 sign, 5 exponent, 10 fraction bits */
    SB_HALF_BF16,     /* bfloat16: 1 sign, 8 exponent, 7 fraction bits */
};

/* One value, round to nearest even. */
uint16_t sb_f32_to_fp16(float x);
float sb_fp16_to_f32(uint16_t h);
uint16_t sb_f32_to_bf16(float x);
float sb_bf16_to_f32(uint16_t h);

/* out[i] = x[i] rounded to `fmt`, for i < n. */
void sb_half_encode(enum sb_half_format fmt, const float *x, uint16_t *out, size_t n);

/* out[i] = h[i] as float (exact), for i < n. */
void sb_half_decode(enum sb_half_format fmt, const uint16_t *h, float *out, size_t n);

/* acc[i] += h[i] as float, the addition in float (binary32), for i < n:
 * the reduction step of a 16-bit all-reduce that accumulates in fp32. */
void sb_half_accumulate(enum sb_half_format fmt, float *acc, const uint16_t *h, size_t n);

/* x[i] = x[i] rounded to `fmt` and back (what a receiver decodes). */
void sb_half_round(enum sb_half_format fmt, float *x, size_t n);

#endif
