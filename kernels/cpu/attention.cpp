#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd.h"

namespace flashq::cpu {

void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape s) {
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t kv_stride = s.kv_heads * s.head_dim;  // floats between one key row and the next
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t max_keys = s.rows > 0 ? *std::max_element(key_counts, key_counts + s.rows) : 0;
#pragma omp parallel if (s.rows * s.q_heads * max_keys * s.head_dim >= (int64_t{1} << 18))
  {
    std::vector<float> scores;
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t m = 0; m < s.rows; ++m) {
      for (int64_t h = 0; h < s.q_heads; ++h) {
        const int64_t count = key_counts[m];
        const float* qh = q + (m * s.q_heads + h) * s.head_dim;
        const int64_t kvh = h / group;
        float* oh = out + (m * s.q_heads + h) * s.head_dim;
        std::memset(oh, 0, sizeof(float) * s.head_dim);
        if (count <= 0) continue;
        scores.resize(static_cast<size_t>(count));
        float max_score = -INFINITY;
        for (int64_t t = 0; t < count; ++t) {
          scores[t] = dot(qh, k + t * kv_stride + kvh * s.head_dim, s.head_dim) * scale;
          max_score = std::max(max_score, scores[t]);
        }
        double total = 0.0;
        for (int64_t t = 0; t < count; ++t) {
          scores[t] = std::exp(scores[t] - max_score);
          total += scores[t];
        }
        const float inv_total = static_cast<float>(1.0 / total);
        for (int64_t t = 0; t < count; ++t) {
          const float p = scores[t] * inv_total;
          const float* vt = v + t * kv_stride + kvh * s.head_dim;
          for (int64_t d = 0; d < s.head_dim; ++d) oh[d] += p * vt[d];
        }
      }
    }
  }
}

}  // namespace flashq::cpu
