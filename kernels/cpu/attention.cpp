#include "kernels/cpu/attention.h"

#include <omp.h>

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

// A head_dim that is not a multiple of 8 (attend_block_rows takes the others, with the same
// bits): folds a block of keys, held in `runs`, into the `group` query vectors of one row that share a
// KV head (consecutive heads: rows of q and out head_dim apart): two by two (each key and value
// load serves both, the same bits as one by one), an odd one alone. w0 and w1 hold a block of
// weights each. The block is scored run by run and softmaxed as one, and its values summed run by
// run in key order (a correction of 1 after the first run leaves the sums so far exact), so the
// runs give the bits of one run of the same keys.
template <typename KV>
void attend_block(const float* q_heads, float* out_heads, RunningSoftmax* state, int64_t group, const KV* kh,
                  const KV* vh, const KeyRun* runs, int64_t run_count, int64_t kv_stride, int64_t head_dim, float scale,
                  float* w0, float* w1) {
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

// The keys row m attends: positions [begin, end), begin > 0 only with a window or a key start
// (an empty span when the start is at or past the count).
struct KeySpan {
  int64_t begin, end;
};

KeySpan key_span(int64_t count, int64_t window, int64_t start) {
  const int64_t begin = std::max<int64_t>(window > 0 ? std::max<int64_t>(0, count - window) : 0, start);
  return {begin, std::max(begin, count)};
}

// Keys are also taken in chunks of this many from the row's first (a multiple of kKeyBlock):
// each chunk's softmax starts afresh and the chunks are merged in order, so that a long row's
// chunks can go to different threads (decode: one row, few tasks otherwise) with the same bits
// as when one thread takes them all. Chunk 0 starts from the sink and is the running state.
constexpr int64_t kKeyChunk = 512;

// Rows a task takes together, so that each block of keys and values is read from memory once
// for all of them and then from the core's caches: 16 rows of a long prefill, 4 of a
// verification block (more tasks for the threads). No result depends on it.
int64_t row_tile(int64_t rows) { return rows > 64 ? 16 : 4; }

// The scores of query vectors against one key row k, heads NH at a time with G query vectors
// each (query vector g of head h at q + (h * G + g) * n, against k + h * n; n a multiple of 8):
// each a chain of 8-lane multiply-adds in element order (dot8's chains, one key at a time),
// stored unreduced, the chain of vector (h, g) at lanes + (h * G + g) * 64. NH * G chains
// interleaved hide the multiply-add latency.
template <int NH, int G, typename KV>
[[gnu::always_inline]] inline void key_chains(const float* q, const KV* k, int64_t n, float* lanes) {
  __m256 sum[NH * G];
  for (int i = 0; i < NH * G; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t d = 0; d < n; d += 8) {
    for (int h = 0; h < NH; ++h) {
      const __m256 kd = load8(k + h * n + d);
      for (int g = 0; g < G; ++g) {
        sum[h * G + g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (h * G + g) * n + d), kd, sum[h * G + g]);
      }
    }
  }
  for (int i = 0; i < NH * G; ++i) _mm256_storeu_ps(lanes + i * 64, sum[i]);
}

// All heads' chains of one key: NH heads at a time, as many as keep about 8 chains.
template <typename KV>
void key_scores(const float* q, const KV* k, int64_t heads, int64_t group, int64_t n, float* lanes) {
  int64_t h = 0;
  if (group == 1) {
    for (; h + 8 <= heads; h += 8) key_chains<8, 1>(q + h * n, k + h * n, n, lanes + h * 64);
  } else if (group == 2) {
    for (; h + 4 <= heads; h += 4) key_chains<4, 2>(q + 2 * h * n, k + h * n, n, lanes + 2 * h * 64);
  } else if (group == 4) {
    for (; h + 2 <= heads; h += 2) key_chains<2, 4>(q + 4 * h * n, k + h * n, n, lanes + 4 * h * 64);
  }
  for (; h < heads; ++h) {
    int64_t g = 0;
    const float* qh = q + h * group * n;
    float* lh = lanes + h * group * 64;
    for (; g + 8 <= group; g += 8) key_chains<1, 8>(qh + g * n, k + h * n, n, lh + g * 64);
    for (; g + 2 <= group; g += 2) key_chains<1, 2>(qh + g * n, k + h * n, n, lh + g * 64);
    for (; g < group; ++g) key_chains<1, 1>(qh + g * n, k + h * n, n, lh + g * 64);
  }
}

// o[0, n) += p * v (n a multiple of 8): one key's step of add_values' sums.
template <typename KV>
[[gnu::always_inline]] inline void add_value(float* o, float p, const KV* v, int64_t n) {
  const __m256 pv = _mm256_set1_ps(p);
  for (int64_t d = 0; d < n; d += 8) _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, load8(v + d), _mm256_loadu_ps(o + d)));
}

// dot8's reduction of 8 keys' unreduced sums (8 vectors of 8 lanes, consecutive).
inline __m256 reduce8(const float* lanes) {
  const __m256 low = reduce4(_mm256_loadu_ps(lanes), _mm256_loadu_ps(lanes + 8), _mm256_loadu_ps(lanes + 16),
                             _mm256_loadu_ps(lanes + 24));
  const __m256 high = reduce4(_mm256_loadu_ps(lanes + 32), _mm256_loadu_ps(lanes + 40), _mm256_loadu_ps(lanes + 48),
                              _mm256_loadu_ps(lanes + 56));
  return _mm256_add_ps(_mm256_permute2f128_ps(low, high, 0x20), _mm256_permute2f128_ps(low, high, 0x31));
}

// One block of keys (in `runs`) folded into all `nq` query vectors of one row (consecutive heads,
// head_dim apart in q and o; query vector i reads KV head i / group), every key's row read
// whole, key after key: the rows of all heads lie side by side, so the reads run through memory
// in order and the hardware prefetchers stream them (one head's rows alone are a short read every
// kv_stride elements, a new 4 KB page every key or two, which they do not follow). Each score and
// each output sum is formed as attend_block forms it (dot8's chains and reduction, dot for the
// last keys of a run that are not a full 8; the values in key order), so the bits are the same.
// head_dim a multiple of 8. w: nq blocks of weights; lanes: nq * 64 floats; c: nq floats.
template <typename KV>
void attend_block_rows(const float* q, float* o, RunningSoftmax* state, int64_t nq, int64_t group, const KV* k,
                       const KV* v, const KeyRun* runs, int64_t run_count, int64_t kv_stride, int64_t head_dim,
                       float scale, float* w, float* lanes, float* c) {
  const int64_t heads = nq / group;
  int64_t keys = 0;
  for (int64_t r = 0, at = 0; r < run_count; at += runs[r].count, ++r) {
    const int64_t count = runs[r].count, full = count / 8 * 8;
    for (int64_t j = 0; j < count; ++j) {
      const KV* kr = k + (runs[r].row + j) * kv_stride;
      if (j < full) {
        key_scores(q, kr, heads, group, head_dim, lanes + (j % 8) * 8);
        if (j % 8 == 7) {
          for (int64_t i = 0; i < nq; ++i) {
            _mm256_storeu_ps(w + i * kKeyBlock + at + j - 7,
                             _mm256_mul_ps(reduce8(lanes + i * 64), _mm256_set1_ps(scale)));
          }
        }
      } else {
        for (int64_t i = 0; i < nq; ++i) {
          w[i * kKeyBlock + at + j] = dot(q + i * head_dim, kr + (i / group) * head_dim, head_dim) * scale;
        }
      }
    }
    keys += count;
  }
  for (int64_t i = 0; i < nq; ++i) c[i] = fold_block(w + i * kKeyBlock, keys, state[i]);
  for (int64_t i = 0; i < nq; ++i) {
    const __m256 ci = _mm256_set1_ps(c[i]);
    float* oi = o + i * head_dim;
    for (int64_t d = 0; d < head_dim; d += 8) _mm256_storeu_ps(oi + d, _mm256_mul_ps(_mm256_loadu_ps(oi + d), ci));
  }
  for (int64_t r = 0, at = 0; r < run_count; at += runs[r].count, ++r) {
    for (int64_t j = 0; j < runs[r].count; ++j) {
      const KV* vr = v + (runs[r].row + j) * kv_stride;
      for (int64_t i = 0; i < nq; ++i)
        add_value(o + i * head_dim, w[i * kKeyBlock + at + j], vr + (i / group) * head_dim, head_dim);
    }
  }
}

// Folds a finished chunk's unnormalised sums o and softmax s into the running ones, O and S.
void merge_chunk(float* out, RunningSoftmax& running, const float* o, const RunningSoftmax& s, int64_t head_dim) {
  const float max = std::max(running.max, s.max);
  const float a = std::exp(running.max - max), b = std::exp(s.max - max);
  for (int64_t d = 0; d < head_dim; ++d) out[d] = std::fma(o[d], b, out[d] * a);
  running.total = std::fma(s.total, b, running.total * a);
  running.max = max;
}

// What every task of one attention call reads: its tensors, shapes and how keys are laid out.
template <typename KV>
struct AttentionCall {
  const float* q;
  const KV *k, *v;
  const int32_t* key_counts;
  float* out;
  AttentionShape s;
  const float* sinks;
  int64_t window;
  const int32_t* key_starts;  // null: every row from 0 (or its window's start)
  KeyLayout layout;
  int64_t group, kv_stride, row_floats;  // kv_stride: elements between one key row and the next
  float scale;
  // Tiles of a long prefill go head by head, each head's block of keys and values read once from
  // memory and then from the core's first-level cache for all 16 rows; few rows go key by key
  // over all heads (attend_block_rows). Both give the same bits.
  bool by_head;

  // The sink is one more score, with no value: the softmax starts from it (its max is the sink,
  // its total exp(0)), so every later max includes it.
  RunningSoftmax initial(int64_t head) const {
    return sinks != nullptr ? RunningSoftmax{sinks[head], 1.0f} : RunningSoftmax{};
  }
  KeySpan span(int64_t m) const { return key_span(key_counts[m], window, key_starts ? key_starts[m] : 0); }
  int64_t row_chunks(int64_t m) const {
    const KeySpan keys = span(m);
    return (keys.end - keys.begin + kKeyChunk - 1) / kKeyChunk;
  }
  // Normalises row m's output by its running totals (a row without keys stays zero).
  void finish_row(int64_t m, const RunningSoftmax* st) const {
    const KeySpan keys = span(m);
    if (keys.end <= keys.begin) return;
    for (int64_t h = 0; h < s.q_heads; ++h) {
      const float inv_total = 1.0f / st[h].total;
      float* oh = out + m * row_floats + h * s.head_dim;
      for (int64_t d = 0; d < s.head_dim; ++d) oh[d] *= inv_total;
    }
  }
};

// One task's scratch: blocks of weights, score lanes and corrections for every query vector.
struct AttentionScratch {
  explicit AttentionScratch(int64_t q_heads)
      : floats(static_cast<size_t>(q_heads * (2 * kKeyBlock + 64 + 1))),
        w(floats.data()),
        lanes(w + q_heads * 2 * kKeyBlock),
        c(lanes + q_heads * 64) {}
  std::vector<float> floats;
  float *w, *lanes, *c;
  KeyRun runs[kMaxRuns];
};

// Chunk `chunk` of rows [m0, m1) into o_rows (row m at o_rows + (m - m0) * row_floats) and st.
template <typename KV>
void attend_chunk(const AttentionCall<KV>& a, AttentionScratch& t, int64_t m0, int64_t m1, int64_t chunk, float* o_rows,
                  RunningSoftmax* st) {
  const AttentionShape& s = a.s;
  for (int64_t m = m0; m < m1; ++m) {
    std::memset(o_rows + (m - m0) * a.row_floats, 0, sizeof(float) * a.row_floats);
    for (int64_t h = 0; h < s.q_heads; ++h) st[(m - m0) * s.q_heads + h] = chunk == 0 ? a.initial(h) : RunningSoftmax{};
  }
  const int64_t chunk_end = (chunk + 1) * kKeyChunk;
  for (int64_t offset = chunk * kKeyChunk; offset < chunk_end; offset += kKeyBlock) {
    // Row m's block of keys in t.runs; false when its keys end before the block.
    auto block_runs = [&](int64_t m, int64_t& run_count) {
      const KeySpan span = a.span(m);
      const int64_t keys = std::min<int64_t>(kKeyBlock, span.end - span.begin - offset);
      if (keys <= 0) return false;
      run_count = a.layout.runs(span.begin + offset, keys, t.runs);
      return true;
    };
    int64_t run_count = 0;
    if (a.by_head) {
      for (int64_t h = 0; h < s.kv_heads; ++h) {
        for (int64_t m = m0; m < m1; ++m) {
          if (!block_runs(m, run_count)) continue;
          const int64_t at = h * a.group * s.head_dim;
          attend_block(a.q + m * a.row_floats + at, o_rows + (m - m0) * a.row_floats + at,
                       st + (m - m0) * s.q_heads + h * a.group, a.group, a.k + h * s.head_dim, a.v + h * s.head_dim,
                       t.runs, run_count, a.kv_stride, s.head_dim, a.scale, t.w, t.w + kKeyBlock);
        }
      }
      continue;
    }
    for (int64_t m = m0; m < m1; ++m) {
      if (!block_runs(m, run_count)) continue;
      attend_block_rows(a.q + m * a.row_floats, o_rows + (m - m0) * a.row_floats, st + (m - m0) * s.q_heads, s.q_heads,
                        a.group, a.k, a.v, t.runs, run_count, a.kv_stride, s.head_dim, a.scale, t.w, t.lanes, t.c);
    }
  }
}

// Rows [m0, m1) whole, chunk after chunk, each merged into the running sums in order.
template <typename KV>
void attend_tile(const AttentionCall<KV>& a, AttentionScratch& t, int64_t m0, int64_t m1, RunningSoftmax* st,
                 float* chunk_out, RunningSoftmax* chunk_states) {
  const int64_t q_heads = a.s.q_heads, head_dim = a.s.head_dim;
  int64_t tile_chunks = 0;
  for (int64_t m = m0; m < m1; ++m) tile_chunks = std::max(tile_chunks, a.row_chunks(m));
  attend_chunk(a, t, m0, m1, 0, a.out + m0 * a.row_floats, st);
  for (int64_t chunk = 1; chunk < tile_chunks; ++chunk) {
    attend_chunk(a, t, m0, m1, chunk, chunk_out, chunk_states);
    for (int64_t m = m0; m < m1; ++m) {
      if (a.row_chunks(m) <= chunk) continue;
      for (int64_t h = 0; h < q_heads; ++h) {
        const int64_t at = (m - m0) * q_heads + h;
        merge_chunk(a.out + m * a.row_floats + h * head_dim, st[at], chunk_out + (m - m0) * a.row_floats + h * head_dim,
                    chunk_states[at], head_dim);
      }
    }
  }
  for (int64_t m = m0; m < m1; ++m) a.finish_row(m, st + (m - m0) * q_heads);
}

// The rows whose chunks went to different tasks: each row's chunks merged in order into its
// output (within the enclosing parallel region's threads).
template <typename KV>
void merge_split_rows(const AttentionCall<KV>& a, int64_t chunks, const float* parts, RunningSoftmax* part_states) {
  const int64_t q_heads = a.s.q_heads, head_dim = a.s.head_dim;
#pragma omp for schedule(dynamic, 1)
  for (int64_t m = 0; m < a.s.rows; ++m) {
    const int64_t n = a.row_chunks(m);
    float* om = a.out + m * a.row_floats;
    if (n == 0) {
      std::memset(om, 0, sizeof(float) * a.row_floats);
      continue;
    }
    RunningSoftmax* st = part_states + m * chunks * q_heads;  // chunk 0's: the running state
    std::memcpy(om, parts + m * chunks * a.row_floats, sizeof(float) * a.row_floats);
    for (int64_t chunk = 1; chunk < n; ++chunk) {
      for (int64_t h = 0; h < q_heads; ++h) {
        merge_chunk(om + h * head_dim, st[h], parts + (m * chunks + chunk) * a.row_floats + h * head_dim,
                    part_states[static_cast<size_t>((m * chunks + chunk) * q_heads + h)], head_dim);
      }
    }
    a.finish_row(m, st);
  }
}

template <typename KV>
void attention_over(const float* q, const KV* k, const KV* v, const int32_t* key_counts, float* out, AttentionShape s,
                    const AttentionExtras& extras) {
  const int64_t window = extras.sliding_window;
  int64_t max_keys = 0;
  for (int64_t m = 0; m < s.rows; ++m) {
    const KeySpan span = key_span(key_counts[m], window, extras.key_starts ? extras.key_starts[m] : 0);
    max_keys = std::max(max_keys, span.end - span.begin);
  }
  const int64_t tile_rows = row_tile(s.rows);
  const AttentionCall<KV> a{.q = q,
                            .k = k,
                            .v = v,
                            .key_counts = key_counts,
                            .out = out,
                            .s = s,
                            .sinks = extras.sinks,
                            .window = window,
                            .key_starts = extras.key_starts,
                            // Without a window no key wraps.
                            .layout = {window > 0 ? extras.ring_rows : 0, extras.block_table, extras.block_size},
                            .group = s.q_heads / s.kv_heads,
                            .kv_stride = s.kv_heads * s.head_dim,
                            .row_floats = s.q_heads * s.head_dim,
                            .scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim)),
                            .by_head = s.head_dim % 8 != 0 || tile_rows > 4};
  const int64_t tiles = (s.rows + tile_rows - 1) / tile_rows;
  const int64_t chunks = std::max<int64_t>(1, (max_keys + kKeyChunk - 1) / kKeyChunk);
  // Chunks of one row to different tasks when the tiles alone are too few for the threads: each
  // chunk's sums and softmax kept apart, then merged. Either way gives the same bits.
  const bool split = chunks > 1 && tiles < 2 * static_cast<int64_t>(omp_get_max_threads()) &&
                     s.rows * chunks * a.row_floats <= (int64_t{1} << 24);
  // Kept from call to call (a decode step calls once a layer): every entry a call reads it writes.
  // The threads of the region below share the calling thread's, through these pointers.
  static thread_local std::vector<float> part_store;
  static thread_local std::vector<RunningSoftmax> state_store;
  if (split) {
    part_store.resize(std::max(part_store.size(), static_cast<size_t>(s.rows * chunks * a.row_floats)));
    state_store.resize(std::max(state_store.size(), static_cast<size_t>(s.rows * chunks * s.q_heads)));
  }
  float* const parts = part_store.data();
  RunningSoftmax* const part_states = state_store.data();
  const bool parallel = s.rows * s.q_heads * max_keys * s.head_dim >= (int64_t{1} << 18);
#pragma omp parallel if (parallel)
  {
    AttentionScratch scratch(s.q_heads);
    std::vector<float> chunk_out(split ? 0 : static_cast<size_t>(tile_rows * a.row_floats));
    std::vector<RunningSoftmax> states(static_cast<size_t>(tile_rows * s.q_heads));
    std::vector<RunningSoftmax> chunk_states(static_cast<size_t>(tile_rows * s.q_heads));
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      for (int64_t part = 0; part < (split ? chunks : 1); ++part) {
        const int64_t m0 = tile * tile_rows, m1 = std::min(m0 + tile_rows, s.rows);
        if (!split) {
          attend_tile(a, scratch, m0, m1, states.data(), chunk_out.data(), chunk_states.data());
          continue;
        }
        // One chunk of each row that has it, kept apart for merge_split_rows.
        for (int64_t m = m0; m < m1; ++m) {
          if (a.row_chunks(m) <= part) continue;
          attend_chunk(a, scratch, m, m + 1, part, parts + (m * chunks + part) * a.row_floats,
                       part_states + (m * chunks + part) * s.q_heads);
        }
      }
    }
    if (split) merge_split_rows(a, chunks, parts, part_states);
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
