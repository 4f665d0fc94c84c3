#include "kernels/cpu/moe_experts.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/bias.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_mxfp4.h"
#include "kernels/cpu/simd.h"

namespace flashq::cpu {
namespace {

// The activation of 8 elements: silu(g) * u, or gpt-oss's clamped form. min/max take the limit
// first so that a NaN input stays NaN, as torch.clamp keeps it.
inline __m256 activate8(__m256 g, __m256 u, const ExpertActivation& a) {
  const __m256 one = _mm256_set1_ps(1.0f);
  if (a.kind == ExpertActivationKind::kSwiglu) {
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)))), u);
  }
  const __m256 limit = _mm256_set1_ps(a.limit), negative_limit = _mm256_set1_ps(-a.limit);
  g = _mm256_min_ps(limit, g);
  u = _mm256_max_ps(negative_limit, _mm256_min_ps(limit, u));
  const __m256 scaled = _mm256_mul_ps(_mm256_set1_ps(-a.alpha), g);
  const __m256 glu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(scaled)));
  return _mm256_mul_ps(_mm256_add_ps(u, one), glu);
}

inline float activate1(float g, float u, const ExpertActivation& a) {
  if (a.kind == ExpertActivationKind::kSwiglu) return g / (1.0f + std::exp(-g)) * u;
  g = std::min(a.limit, g);
  u = std::max(-a.limit, std::min(a.limit, u));
  return (u + 1.0f) * (g / (1.0f + std::exp(-a.alpha * g)));
}

// act[r, c] for `rows` rows of `width`: gate and up as two blocks [rows, width] (separate
// layers), or one [rows, 2 * width] with gate c at 2c and up c at 2c + 1 (interleaved).
void activate(const float* products, bool interleaved, int64_t rows, int64_t width, const ExpertActivation& a,
              float* act) {
#pragma omp parallel for schedule(static) if (rows * width >= (int64_t{1} << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = interleaved ? products + r * 2 * width : products + r * width;
    const float* up = interleaved ? gate + 1 : products + (rows + r) * width;
    float* out = act + r * width;
    int64_t c = 0;
    for (; c + 8 <= width; c += 8) {
      __m256 g, u;
      if (interleaved) {
        // [g0 u0 .. g3 u3] [g4 u4 .. g7 u7]: even lanes are the gate, odd the up, then the two
        // 128-bit halves put back in order.
        const __m256 lo = _mm256_loadu_ps(gate + 2 * c), hi = _mm256_loadu_ps(gate + 2 * c + 8);
        g = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
        u = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
      } else {
        g = _mm256_loadu_ps(gate + c);
        u = _mm256_loadu_ps(up + c);
      }
      _mm256_storeu_ps(out + c, activate8(g, u, a));
    }
    const int64_t step = interleaved ? 2 : 1;
    for (; c < width; ++c) out[c] = activate1(gate[c * step], up[c * step], a);
  }
}

std::vector<float>& scratch_buffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

}  // namespace

void linear(const float* x, int64_t rows, const LinearWeight& w, float* y) {
  const int64_t n = w.out_features(), k = w.in_features();
  if (w.mxfp4()) {
    matmul_mxfp4(x, w.weight.data<uint8_t>(), w.scales.data<uint8_t>(), y, rows, n, k);
  } else {
    matmul(x, w.weight.raw(), w.weight.dtype(), y, rows, n, k);
  }
  if (w.bias.defined()) add_bias(y, {w.bias.raw(), w.bias.dtype()}, rows, n);
}

void moe_experts(const float* x, const int32_t* ids, const float* weights, const MoeShape& shape,
                 std::span<const ExpertWeights> experts, const ExpertActivation& activation, float* out) {
  const int64_t slots = shape.rows * shape.top_k, hidden = shape.hidden, width = shape.intermediate;
  const auto expert_count = static_cast<int64_t>(experts.size());
  if (shape.rows == 0) return;

  // Slots grouped by expert (a counting sort, stable: slot order within an expert).
  std::vector<int64_t> first(static_cast<size_t>(expert_count + 1), 0);
  for (int64_t s = 0; s < slots; ++s) ++first[static_cast<size_t>(ids[s]) + 1];
  for (int64_t e = 0; e < expert_count; ++e) first[static_cast<size_t>(e + 1)] += first[static_cast<size_t>(e)];
  std::vector<int64_t> grouped_at(static_cast<size_t>(slots)), next(first.begin(), first.end() - 1);
  for (int64_t s = 0; s < slots; ++s) grouped_at[static_cast<size_t>(s)] = next[static_cast<size_t>(ids[s])]++;

  std::vector<float>& scratch = scratch_buffer();
  const auto needed = static_cast<size_t>(slots * (2 * hidden + 3 * width));
  if (scratch.size() < needed) scratch.resize(needed);
  float* gathered = scratch.data();             // [slots, hidden], by expert
  float* products = gathered + slots * hidden;  // [slots, 2 * width], by expert
  float* act = products + slots * 2 * width;    // [slots, width], by expert
  float* down = act + slots * width;            // [slots, hidden], by expert

  for (int64_t s = 0; s < slots; ++s) {
    std::memcpy(gathered + grouped_at[static_cast<size_t>(s)] * hidden, x + (s / shape.top_k) * hidden,
                static_cast<size_t>(hidden) * sizeof(float));
  }
  std::vector<int64_t> chosen;  // experts with rows, in order
  for (int64_t e = 0; e < expert_count; ++e) {
    if (first[static_cast<size_t>(e + 1)] > first[static_cast<size_t>(e)]) chosen.push_back(e);
  }
  // With at least as many chosen experts as threads, each thread takes whole experts (the
  // products inside run on it alone, OpenMP not nesting): one join per call instead of one per
  // product, which a neighbour holding a core makes cost a time slice each. Fewer experts than
  // threads: one at a time, each product spread over the threads. Either way each expert's
  // results are the same bits.
  const auto count = static_cast<int64_t>(chosen.size());
#pragma omp parallel for schedule(dynamic, 1) if (count > 1 && count >= omp_get_max_threads())
  for (int64_t i = 0; i < count; ++i) {
    const int64_t e = chosen[static_cast<size_t>(i)];
    const int64_t at = first[static_cast<size_t>(e)], rows = first[static_cast<size_t>(e + 1)] - at;
    const ExpertWeights& expert = experts[static_cast<size_t>(e)];
    const float* xe = gathered + at * hidden;
    float* pe = products + at * 2 * width;
    if (expert.interleaved()) {
      linear(xe, rows, expert.gate_up, pe);
    } else {
      linear(xe, rows, expert.gate, pe);
      linear(xe, rows, expert.up, pe + rows * width);
    }
    activate(pe, expert.interleaved(), rows, width, activation, act + at * width);
    linear(act + at * width, rows, expert.down, down + at * hidden);
  }

  // Each row: its slots' down products, weighted, summed in slot order.
#pragma omp parallel for schedule(static) if (shape.rows * hidden >= (int64_t{1} << 16))
  for (int64_t m = 0; m < shape.rows; ++m) {
    float* row = out + m * hidden;
    for (int64_t j = 0; j < shape.top_k; ++j) {
      const int64_t s = m * shape.top_k + j;
      const float w = weights[s];
      const float* d = down + grouped_at[static_cast<size_t>(s)] * hidden;
      if (j == 0) {
        for (int64_t h = 0; h < hidden; ++h) row[h] = w * d[h];
      } else {
        for (int64_t h = 0; h < hidden; ++h) row[h] += w * d[h];
      }
    }
  }
}

}  // namespace flashq::cpu
