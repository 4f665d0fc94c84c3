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
// in key order, with the 8R sums in registers across the keys rather than the output row loaded
// and stored once per key.
template <int R, typename KV>
inline void add_values(float* acc, float correction, const float* p, int64_t keys, const KV* v, int64_t stride) {
  const __m256 c = _mm256_set1_ps(correction);
  __m256 sum[R];
  for (int r = 0; r < R; ++r) sum[r] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * r), c);
  for (int64_t j = 0; j < keys; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const KV* vj = v + j * stride;
    for (int r = 0; r < R; ++r) sum[r] = _mm256_fmadd_ps(pj, load8(vj + 8 * r), sum[r]);
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(acc + 8 * r, sum[r]);
}

// Four keys' sums reduced together: pairwise adds leave lane j of each 128-bit half holding
// that half of key j's sum, ((x0 + x1) + (x2 + x3)) and ((x4 + x5) + (x6 + x7)).
inline __m256 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
  return _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
}

// The scores of q against 8 keys (rows k, k + stride, ...), n a multiple of 8: one sum a key,
// eight independent chains of multiply-adds, then the eight sums reduced together.
template <typename KV>
inline __m256 dot8(const float* q, const KV* k, int64_t stride, int64_t n) {
  __m256 sum[8];
  for (int j = 0; j < 8; ++j) sum[j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < n; d += 8) {
    const __m256 qd = _mm256_loadu_ps(q + d);
    for (int j = 0; j < 8; ++j) sum[j] = _mm256_fmadd_ps(qd, load8(k + j * stride + d), sum[j]);
  }
  const __m256 low = reduce4(sum[0], sum[1], sum[2], sum[3]), high = reduce4(sum[4], sum[5], sum[6], sum[7]);
  return _mm256_add_ps(_mm256_permute2f128_ps(low, high, 0x20), _mm256_permute2f128_ps(low, high, 0x31));
}

// The scores of two query vectors against the same 4 keys, each key's sum formed exactly as
// dot8 forms it (the same chain, the same reduction), so a pair gets the bits of two singles;
// each key element loaded serves both. Writes 4 scores to s0 and 4 to s1.
template <typename KV>
inline void dot4x2(const float* q0, const float* q1, const KV* k, int64_t stride, int64_t n, float* s0, float* s1) {
  __m256 sum0[4], sum1[4];
  for (int j = 0; j < 4; ++j) sum0[j] = sum1[j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < n; d += 8) {
    const __m256 q0d = _mm256_loadu_ps(q0 + d), q1d = _mm256_loadu_ps(q1 + d);
    for (int j = 0; j < 4; ++j) {
      const __m256 kj = load8(k + j * stride + d);
      sum0[j] = _mm256_fmadd_ps(q0d, kj, sum0[j]);
      sum1[j] = _mm256_fmadd_ps(q1d, kj, sum1[j]);
    }
  }
  const __m256 r0 = reduce4(sum0[0], sum0[1], sum0[2], sum0[3]), r1 = reduce4(sum1[0], sum1[1], sum1[2], sum1[3]);
  _mm_storeu_ps(s0, _mm_add_ps(_mm256_castps256_ps128(r0), _mm256_extractf128_ps(r0, 1)));
  _mm_storeu_ps(s1, _mm_add_ps(_mm256_castps256_ps128(r1), _mm256_extractf128_ps(r1, 1)));
}

// add_values<R> for two query vectors over the same keys: each value element loaded serves
// both, and each output element's sum is the one add_values forms.
template <int R, typename KV>
inline void add_values_pair(float* acc0, float* acc1, float c0, float c1, const float* p0, const float* p1,
                            int64_t keys, const KV* v, int64_t stride) {
  __m256 sum0[R], sum1[R];
  for (int r = 0; r < R; ++r) {
    sum0[r] = _mm256_mul_ps(_mm256_loadu_ps(acc0 + 8 * r), _mm256_set1_ps(c0));
    sum1[r] = _mm256_mul_ps(_mm256_loadu_ps(acc1 + 8 * r), _mm256_set1_ps(c1));
  }
  for (int64_t j = 0; j < keys; ++j) {
    const __m256 p0j = _mm256_set1_ps(p0[j]), p1j = _mm256_set1_ps(p1[j]);
    const KV* vj = v + j * stride;
    for (int r = 0; r < R; ++r) {
      const __m256 vjr = load8(vj + 8 * r);
      sum0[r] = _mm256_fmadd_ps(p0j, vjr, sum0[r]);
      sum1[r] = _mm256_fmadd_ps(p1j, vjr, sum1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc0 + 8 * r, sum0[r]);
    _mm256_storeu_ps(acc1 + 8 * r, sum1[r]);
  }
}

// The same for any n: 64 elements at a time (8 registers), then 8, then one by one. Each
// element's sum has the same order on every path.
template <typename KV>
void add_values(float* acc, float correction, const float* p, int64_t keys, const KV* v, int64_t stride, int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) add_values<8>(acc + d, correction, p, keys, v + d, stride);
  for (; d + 8 <= n; d += 8) add_values<1>(acc + d, correction, p, keys, v + d, stride);
  for (; d < n; ++d) {
    float sum = acc[d] * correction;
    for (int64_t j = 0; j < keys; ++j) sum = std::fma(p[j], to_f32(v[j * stride + d]), sum);
    acc[d] = sum;
  }
}

// The pair form of add_values (any n): 32 elements at a time, then 8, then one by one.
template <typename KV>
void add_values_pair(float* acc0, float* acc1, float c0, float c1, const float* p0, const float* p1, int64_t keys,
                     const KV* v, int64_t stride, int64_t n) {
  int64_t d = 0;
  for (; d + 32 <= n; d += 32) add_values_pair<4>(acc0 + d, acc1 + d, c0, c1, p0, p1, keys, v + d, stride);
  for (; d + 8 <= n; d += 8) add_values_pair<1>(acc0 + d, acc1 + d, c0, c1, p0, p1, keys, v + d, stride);
  if (d < n) {
    add_values(acc0 + d, c0, p0, keys, v + d, stride, n - d);
    add_values(acc1 + d, c1, p1, keys, v + d, stride, n - d);
  }
}

// Scaled scores of keys [first, first + keys) into weights: 8 keys at a time where the head
// dim allows, the rest one by one (which path a key takes depends only on the row's count).
template <typename KV>
void score_keys(const float* qh, const KV* kh, int64_t first, int64_t keys, int64_t kv_stride, int64_t head_dim,
                float scale, float* weights) {
  int64_t j = 0;
  if (head_dim % 8 == 0) {
    for (; j + 8 <= keys; j += 8) {
      const __m256 scores = dot8(qh, kh + (first + j) * kv_stride, kv_stride, head_dim);
      _mm256_storeu_ps(weights + j, _mm256_mul_ps(scores, _mm256_set1_ps(scale)));
    }
  }
  for (; j < keys; ++j) weights[j] = dot(qh, kh + (first + j) * kv_stride, head_dim) * scale;
}

// score_keys for two query vectors of one row, key for key the same bits.
template <typename KV>
void score_keys_pair(const float* q0, const float* q1, const KV* kh, int64_t first, int64_t keys, int64_t kv_stride,
                     int64_t head_dim, float scale, float* w0, float* w1) {
  int64_t j = 0;
  if (head_dim % 8 == 0) {
    // Eight keys at a time, as score_keys takes them, in two fours.
    for (; j + 8 <= keys; j += 8) {
      dot4x2(q0, q1, kh + (first + j) * kv_stride, kv_stride, head_dim, w0 + j, w1 + j);
      dot4x2(q0, q1, kh + (first + j + 4) * kv_stride, kv_stride, head_dim, w0 + j + 4, w1 + j + 4);
    }
    for (int64_t i = 0; i < j; ++i) {
      w0[i] *= scale;
      w1[i] *= scale;
    }
  }
  for (; j < keys; ++j) {
    w0[j] = dot(q0, kh + (first + j) * kv_stride, head_dim) * scale;
    w1[j] = dot(q1, kh + (first + j) * kv_stride, head_dim) * scale;
  }
}

// One query vector's online softmax over its keys so far: the running max and total (its
// unnormalised sum of values stays in the output row until the end).
struct RunningSoftmax {
  float max = -INFINITY;
  float total = 0.0f;
};

// One query vector's online softmax step over a block of scores: they become the weights
// exp(score - new max), the running max and total move on, and the factor the sums so far
// must be multiplied by is returned. The max and the total go 8 keys at a time in vector lanes,
// not in a chain of one add per key; the total's order depends only on `keys`, so a row's result
// still depends on its own count alone.
float fold_block(float* weights, int64_t keys, RunningSoftmax& state) {
  __m256 lanes_max = _mm256_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 8 <= keys; j += 8) lanes_max = _mm256_max_ps(lanes_max, _mm256_loadu_ps(weights + j));
  alignas(32) float lane[8];
  _mm256_store_ps(lane, lanes_max);
  float block_max = -INFINITY;
  for (float m : lane) block_max = std::max(block_max, m);
  for (; j < keys; ++j) block_max = std::max(block_max, weights[j]);
  const float new_max = std::max(state.max, block_max);
  // exp(-inf) = 0 on the first block: nothing summed yet to rescale.
  const float correction = std::exp(state.max - new_max);
  __m256 lanes_total = _mm256_setzero_ps();
  for (j = 0; j + 8 <= keys; j += 8) {
    const __m256 w = exp8(_mm256_sub_ps(_mm256_loadu_ps(weights + j), _mm256_set1_ps(new_max)));
    _mm256_storeu_ps(weights + j, w);
    lanes_total = _mm256_add_ps(lanes_total, w);
  }
  float block_total = hsum(lanes_total);
  for (; j < keys; ++j) {
    weights[j] = std::exp(weights[j] - new_max);
    block_total += weights[j];
  }
  state.total = state.total * correction + block_total;
  state.max = new_max;
  return correction;
}

// A run of keys held in consecutive rows of k and v: `count` keys from row `row`.
struct KeyRun {
  int64_t row, count;
};

// Where positions are kept: row p (plain), p % ring_rows (a ring), or through a block table.
struct KeyLayout {
  int64_t ring_rows = 0;
  const int32_t* block_table = nullptr;
  int64_t block_size = 0;

  // The runs of rows holding positions [first, first + keys), in position order; at most
  // keys / block_size + 2 of them.
  int64_t runs(int64_t first, int64_t keys, KeyRun* out) const {
    int64_t n = 0;
    for (int64_t p = first, end = first + keys; p < end;) {
      int64_t row = p, limit = end - p;
      if (block_table != nullptr) {
        row = int64_t{block_table[p / block_size]} * block_size + p % block_size;
        limit = std::min(limit, block_size - p % block_size);
      } else if (ring_rows > 0) {
        row = p % ring_rows;
        limit = std::min(limit, ring_rows - row);
      }
      out[n++] = {row, limit};
      p += limit;
    }
    return n;
  }
};

// The most runs a block of kKeyBlock keys falls into (blocks of one row each).
constexpr int64_t kMaxRuns = kKeyBlock + 1;

// Asks for one KV head's keys and values in `runs` (head_dim elements a row) to be brought into the
// caches. A paged block of keys starts where its table says, which the hardware's prefetchers
// cannot guess: its rows asked for while the block before it is attended cost about what keys
// in one run do (docs/perf.md, "Paged attention"). Only a hint: no result changes. Inlined
// always: a function of prefetches alone has no effect the compiler sees, and its call is dropped.
template <typename KV>
[[gnu::always_inline]] inline void prefetch_runs(const KV* kh, const KV* vh, const KeyRun* runs, int64_t run_count,
                                                 int64_t kv_stride, int64_t head_dim) {
  const int64_t bytes = head_dim * static_cast<int64_t>(sizeof(KV));
  for (int64_t r = 0; r < run_count; ++r) {
    for (int64_t row = runs[r].row; row < runs[r].row + runs[r].count; ++row) {
      const char* key = reinterpret_cast<const char*>(kh + row * kv_stride);
      const char* value = reinterpret_cast<const char*>(vh + row * kv_stride);
      for (int64_t b = 0; b < bytes; b += 64) {
        _mm_prefetch(key + b, _MM_HINT_T0);
        _mm_prefetch(value + b, _MM_HINT_T0);
      }
      _mm_prefetch(key + bytes - 1, _MM_HINT_T0);  // a row that does not start on a cache line
      _mm_prefetch(value + bytes - 1, _MM_HINT_T0);
    }
  }
}

// Folds a block of keys, held in `runs`, into the `group` query vectors of one row that share a
// KV head (consecutive heads: rows of q and out head_dim apart): two by two (each key and value
// load serves both, the same bits as one by one), an odd one alone. w0 and w1 hold a block of
// weights each. The block is scored run by run and softmaxed as one, and its values summed run by
// run in key order (a correction of 1 after the first run leaves the sums so far exact), so the
// runs give the bits of one run of the same keys.
template <typename KV>
void attend_block(const float* q_heads, float* out_heads, RunningSoftmax* state, int64_t group, const KV* kh,
                  const KV* vh, const KeyRun* runs, int64_t run_count, int64_t kv_stride, int64_t head_dim,
                  float scale, float* w0, float* w1) {
  int64_t keys = 0;
  for (int64_t r = 0; r < run_count; ++r) keys += runs[r].count;
  int64_t g = 0;
  for (; g + 2 <= group; g += 2) {
    const float* q0 = q_heads + g * head_dim;
    float* o0 = out_heads + g * head_dim;
    for (int64_t r = 0, at = 0; r < run_count; at += runs[r].count, ++r) {
      score_keys_pair(q0, q0 + head_dim, kh, runs[r].row, runs[r].count, kv_stride, head_dim, scale, w0 + at, w1 + at);
    }
    float c0 = fold_block(w0, keys, state[g]), c1 = fold_block(w1, keys, state[g + 1]);
    for (int64_t r = 0, at = 0; r < run_count; at += runs[r].count, ++r) {
      add_values_pair(o0, o0 + head_dim, c0, c1, w0 + at, w1 + at, runs[r].count, vh + runs[r].row * kv_stride,
                      kv_stride, head_dim);
      c0 = c1 = 1.0f;
    }
  }
  for (; g < group; ++g) {
    for (int64_t r = 0, at = 0; r < run_count; at += runs[r].count, ++r) {
      score_keys(q_heads + g * head_dim, kh, runs[r].row, runs[r].count, kv_stride, head_dim, scale, w0 + at);
    }
    float c = fold_block(w0, keys, state[g]);
    for (int64_t r = 0, at = 0; r < run_count; at += runs[r].count, ++r) {
      add_values(out_heads + g * head_dim, c, w0 + at, runs[r].count, vh + runs[r].row * kv_stride, kv_stride,
                 head_dim);
      c = 1.0f;
    }
  }
}

// The keys row m attends: positions [begin, end), begin > 0 only with a window.
struct KeySpan {
  int64_t begin, end;
};

KeySpan key_span(int64_t count, int64_t window) {
  return {window > 0 ? std::max<int64_t>(0, count - window) : 0, count};
}

// Rows a task takes together with all query heads of one KV head, so that each block of keys
// and values is read from memory once for all of them and then from the core's caches: 16 rows
// of a long prefill (a quarter of the key traffic of 4, about 6% faster on its attention), 4 of a
// verification block (more tasks than KV heads for the threads). No result depends on it.
int64_t row_tile(int64_t rows) { return rows > 64 ? 16 : 4; }

template <typename KV>
void attention_over(const float* q, const KV* k, const KV* v, const int32_t* key_counts, float* out, AttentionShape s,
                    const AttentionExtras& extras) {
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t kv_stride = s.kv_heads * s.head_dim;  // elements between one key row and the next
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t window = extras.sliding_window;
  // Without a window no key wraps.
  const KeyLayout layout{window > 0 ? extras.ring_rows : 0, extras.block_table, extras.block_size};
  int64_t max_keys = 0;
  for (int64_t m = 0; m < s.rows; ++m) {
    const KeySpan span = key_span(key_counts[m], window);
    max_keys = std::max(max_keys, span.end - span.begin);
  }
  const int64_t tile_rows = row_tile(s.rows);
  const int64_t tiles = (s.rows + tile_rows - 1) / tile_rows;
#pragma omp parallel if (s.rows * s.q_heads * max_keys * s.head_dim >= (int64_t{1} << 18))
  {
    std::vector<float> weights(2 * kKeyBlock);
    float* const w0 = weights.data();
    float* const w1 = w0 + kKeyBlock;
    std::vector<RunningSoftmax> states;
    KeyRun runs[kMaxRuns], next_runs[kMaxRuns];
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      for (int64_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        const int64_t m0 = tile * tile_rows, m1 = std::min(m0 + tile_rows, s.rows);
        const KV* kh = k + kv_head * s.head_dim;
        const KV* vh = v + kv_head * s.head_dim;
        // Query vector (m, g): row m, head kv_head * group + g.
        auto head_offset = [&](int64_t m, int64_t g) { return (m * s.q_heads + kv_head * group + g) * s.head_dim; };
        states.assign(static_cast<size_t>((m1 - m0) * group), RunningSoftmax{});
        if (extras.sinks != nullptr) {
          // The sink is one more score, with no value: the softmax starts from it (its max is the
          // sink, its total exp(0)), so every later max includes it.
          for (int64_t m = m0; m < m1; ++m) {
            for (int64_t g = 0; g < group; ++g) {
              states[static_cast<size_t>((m - m0) * group + g)] = {extras.sinks[kv_head * group + g], 1.0f};
            }
          }
        }
        int64_t tile_keys = 0;
        for (int64_t m = m0; m < m1; ++m) {
          const KeySpan span = key_span(key_counts[m], window);
          tile_keys = std::max<int64_t>(tile_keys, span.end - span.begin);
          for (int64_t g = 0; g < group; ++g) std::memset(out + head_offset(m, g), 0, sizeof(float) * s.head_dim);
        }
        // Each row's keys in blocks from its first (key 0 without a window): a row's sums depend
        // on its own count alone.
        for (int64_t offset = 0; offset < tile_keys; offset += kKeyBlock) {
          for (int64_t m = m0; m < m1; ++m) {
            const KeySpan span = key_span(key_counts[m], window);
            const int64_t keys = std::min<int64_t>(kKeyBlock, span.end - span.begin - offset);
            if (keys <= 0) continue;
            const int64_t run_count = layout.runs(span.begin + offset, keys, runs);
            const int64_t next_keys = std::min<int64_t>(kKeyBlock, span.end - span.begin - offset - kKeyBlock);
            if (layout.block_table != nullptr && next_keys > 0) {
              const int64_t next_count = layout.runs(span.begin + offset + kKeyBlock, next_keys, next_runs);
              prefetch_runs(kh, vh, next_runs, next_count, kv_stride, s.head_dim);
            }
            attend_block(q + head_offset(m, 0), out + head_offset(m, 0), states.data() + (m - m0) * group, group, kh,
                         vh, runs, run_count, kv_stride, s.head_dim, scale, w0, w1);
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

}  // namespace

void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out, AttentionShape s,
               const AttentionExtras& extras) {
  attention_over(q, k, v, key_counts, out, s, extras);
}

void attention(const float* q, const uint16_t* k, const uint16_t* v, const int32_t* key_counts, float* out,
               AttentionShape s, const AttentionExtras& extras) {
  attention_over(q, k, v, key_counts, out, s, extras);
}

}  // namespace flashq::cpu
