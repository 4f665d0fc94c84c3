#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd.h"

namespace flashq::cpu {
namespace {

// Keys are taken in blocks of this many from key 0, whatever the row: scored, then softmaxed
// online (the block's max and sum folded into the running ones), then their values added.
// Every sum's order depends only on the row's own key count, so a row's result is the same
// whatever other rows share the call (verification gives the bits of decoding).
constexpr int64_t kKeyBlock = 64;

// acc[0, 8R) = acc * correction + sum over j < keys of p[j] * v_j[0, 8R), v_j = v + j * stride,
// in key order, with the 8R sums in registers across the keys (the earlier form loaded and
// stored the output row once per key).
template <int R>
inline void add_values(float* acc, float correction, const float* p, int64_t keys, const float* v, int64_t stride) {
  const __m256 c = _mm256_set1_ps(correction);
  __m256 sum[R];
  for (int r = 0; r < R; ++r) sum[r] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * r), c);
  for (int64_t j = 0; j < keys; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const float* vj = v + j * stride;
    for (int r = 0; r < R; ++r) sum[r] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * r), sum[r]);
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(acc + 8 * r, sum[r]);
}

// The scores of q against 8 keys (rows k, k + stride, ...), n a multiple of 8: one sum a key,
// eight independent chains of multiply-adds, then the eight sums reduced together.
inline __m256 dot8(const float* q, const float* k, int64_t stride, int64_t n) {
  __m256 sum[8];
  for (int j = 0; j < 8; ++j) sum[j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < n; d += 8) {
    const __m256 qd = _mm256_loadu_ps(q + d);
    for (int j = 0; j < 8; ++j) sum[j] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + j * stride + d), sum[j]);
  }
  // Pairwise adds leave lane j of the two 128-bit halves holding halves of key j's sum.
  const __m256 s01 = _mm256_hadd_ps(sum[0], sum[1]), s23 = _mm256_hadd_ps(sum[2], sum[3]);
  const __m256 s45 = _mm256_hadd_ps(sum[4], sum[5]), s67 = _mm256_hadd_ps(sum[6], sum[7]);
  const __m256 s0123 = _mm256_hadd_ps(s01, s23), s4567 = _mm256_hadd_ps(s45, s67);
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// The same for any n: 64 elements at a time (8 registers), then 8, then one by one. Each
// element's sum has the same order on every path.
void add_values(float* acc, float correction, const float* p, int64_t keys, const float* v, int64_t stride,
                int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) add_values<8>(acc + d, correction, p, keys, v + d, stride);
  for (; d + 8 <= n; d += 8) add_values<1>(acc + d, correction, p, keys, v + d, stride);
  for (; d < n; ++d) {
    float sum = acc[d] * correction;
    for (int64_t j = 0; j < keys; ++j) sum = std::fma(p[j], v[j * stride + d], sum);
    acc[d] = sum;
  }
}

// One query vector's online softmax over its keys so far: the running max and total, and the
// unnormalised sum of values (in the output row until the end).
struct RunningSoftmax {
  float max = -INFINITY;
  float total = 0.0f;
};

// Folds keys [first, first + keys) into one query vector's state: scores, the block's max and
// weights, the rescaling of what was summed before, then the values.
void attend_block(const float* qh, const float* kh, const float* vh, int64_t first, int64_t keys, int64_t kv_stride,
                  int64_t head_dim, float scale, float* weights, RunningSoftmax& state, float* oh) {
  // Keys 8 at a time where the head dim allows, the rest one by one (which path a key takes
  // depends only on the row's key count).
  const bool by_eight = head_dim % 8 == 0;
  int64_t j = 0;
  if (by_eight) {
    for (; j + 8 <= keys; j += 8) {
      const __m256 scores = dot8(qh, kh + (first + j) * kv_stride, kv_stride, head_dim);
      _mm256_storeu_ps(weights + j, _mm256_mul_ps(scores, _mm256_set1_ps(scale)));
    }
  }
  for (; j < keys; ++j) weights[j] = dot(qh, kh + (first + j) * kv_stride, head_dim) * scale;
  float block_max = -INFINITY;
  for (j = 0; j < keys; ++j) block_max = std::max(block_max, weights[j]);
  const float new_max = std::max(state.max, block_max);
  // exp(-inf) = 0 on the first block: nothing summed yet to rescale.
  const float correction = std::exp(state.max - new_max);
  for (j = 0; j + 8 <= keys; j += 8) {
    _mm256_storeu_ps(weights + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(weights + j), _mm256_set1_ps(new_max))));
  }
  for (; j < keys; ++j) weights[j] = std::exp(weights[j] - new_max);
  float block_total = 0.0f;
  for (j = 0; j < keys; ++j) block_total += weights[j];
  state.total = state.total * correction + block_total;
  state.max = new_max;
  add_values(oh, correction, weights, keys, vh + first * kv_stride, kv_stride, head_dim);
}

// Rows a task takes together with all query heads of one KV head, so that each block of keys
// and values is read from memory once for all of them and then from the core's caches.
constexpr int64_t kRowTile = 4;

}  // namespace

void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape s) {
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t kv_stride = s.kv_heads * s.head_dim;  // floats between one key row and the next
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t max_keys = s.rows > 0 ? *std::max_element(key_counts, key_counts + s.rows) : 0;
  const int64_t tiles = (s.rows + kRowTile - 1) / kRowTile;
#pragma omp parallel if (s.rows * s.q_heads * max_keys * s.head_dim >= (int64_t{1} << 18))
  {
    std::vector<float> weights(kKeyBlock);
    std::vector<RunningSoftmax> states;
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      for (int64_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        const int64_t m0 = tile * kRowTile, m1 = std::min(m0 + kRowTile, s.rows);
        const float* kh = k + kv_head * s.head_dim;
        const float* vh = v + kv_head * s.head_dim;
        // Query vector (m, g): row m, head kv_head * group + g.
        auto head_offset = [&](int64_t m, int64_t g) { return (m * s.q_heads + kv_head * group + g) * s.head_dim; };
        states.assign(static_cast<size_t>((m1 - m0) * group), RunningSoftmax{});
        int64_t tile_keys = 0;
        for (int64_t m = m0; m < m1; ++m) {
          tile_keys = std::max<int64_t>(tile_keys, key_counts[m]);
          for (int64_t g = 0; g < group; ++g) std::memset(out + head_offset(m, g), 0, sizeof(float) * s.head_dim);
        }
        for (int64_t first = 0; first < tile_keys; first += kKeyBlock) {
          for (int64_t m = m0; m < m1; ++m) {
            const int64_t keys = std::min<int64_t>(kKeyBlock, key_counts[m] - first);
            if (keys <= 0) continue;
            for (int64_t g = 0; g < group; ++g) {
              attend_block(q + head_offset(m, g), kh, vh, first, keys, kv_stride, s.head_dim, scale, weights.data(),
                           states[static_cast<size_t>((m - m0) * group + g)], out + head_offset(m, g));
            }
          }
        }
        for (int64_t m = m0; m < m1; ++m) {
          if (key_counts[m] <= 0) continue;
          for (int64_t g = 0; g < group; ++g) {
            const float inv_total = 1.0f / states[static_cast<size_t>((m - m0) * group + g)].total;
            float* oh = out + head_offset(m, g);
            for (int64_t d = 0; d < s.head_dim; ++d) oh[d] *= inv_total;
          }
        }
      }
    }
  }
}

}  // namespace flashq::cpu
