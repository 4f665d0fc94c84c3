// Small AVX2 helpers shared by the CPU kernels: widening loads of weight dtypes and a float
// dot product. x86-64-v3 (AVX2, FMA, F16C) is the build baseline.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace flashq::cpu {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* bf16) {  // bf16 -> f32 is a 16-bit shift
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bf16));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}
struct F16 {  // tag for f16 weights: same storage as bf16, other widening
  uint16_t bits;
};
inline __m256 load8(const F16* f16) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f16)));
}

inline float to_f32(float v) { return v; }
inline float to_f32(uint16_t bf16) { return __builtin_bit_cast(float, static_cast<uint32_t>(bf16) << 16); }
inline float to_f32(F16 v) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v.bits))); }

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// e^x for 8 lanes, within 2 ulp of expf for x in [-87, 88]; below -87 it gives ~1e-38, not 0
// (callers that need an exact 0 for -inf use std::exp). e^x = 2^n e^r with n = round(x / ln 2)
// and |r| <= ln 2 / 2, e^r by its Taylor series to r^7 (the next term is below 1e-8).
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 in two parts, so that n ln 2 is subtracted without rounding away r.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i two_to_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_to_n));
}

template <typename B>  // float, or bf16 bits (uint16_t) widened as loaded
inline float dot(const float* a, const B* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * to_f32(b[i]);
  return sum;
}

}  // namespace flashq::cpu
