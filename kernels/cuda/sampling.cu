#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"

namespace flashq::cuda {
namespace {

// One block per row. Each thread owns a contiguous chunk of the vocabulary, so that "in index
// order" is "by thread, then within the chunk": a prefix over threads orders ties and the draw.
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// Floats as unsigned keys in the same order, so that a threshold can be found by bisecting keys.
__device__ inline uint32_t key_of(float v) {
  const uint32_t bits = __float_as_uint(isnan(v) ? -INFINITY : v);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Block-wide sum / max / exclusive prefix sum over threads, in a fixed order. Sums are in double:
// over a large vocabulary a float running sum drifts by many weights, and the draw would then
// depend on the order of the additions (the CPU twin sums in double too). `shared` holds kWarps
// doubles; every call starts and ends with the block in step.
__device__ double block_sum(double v, double* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += shared[w];
  return total;
}

__device__ float block_max(float v, double* shared) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  float best = -INFINITY;
  for (int w = 0; w < kWarps; ++w) best = fmaxf(best, static_cast<float>(shared[w]));
  return best;
}

__device__ double block_exclusive_scan(double v, double* shared) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  double inclusive = v;
  for (int o = 1; o < 32; o *= 2) {
    const double other = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += other;
  }
  __syncthreads();
  if (lane == 31) shared[warp] = inclusive;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += shared[w];
  return before + inclusive - v;
}

// What a row keeps: logits above `k_key`, and of those at it the first `k_ties` in index order;
// then (top-p) of those, the ones above `p_key`, and at it while the weight before them stays
// under `p_left` (weight from earlier ties at p_key counted).
struct Cut {
  uint32_t k_key = 0;
  double k_ties = 3.0e38;
  uint32_t p_key = 0;
  double p_left = 3.0e38;
};

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, const float* __restrict__ params, int32_t* __restrict__ ids,
                  int64_t vocab) {
  __shared__ double shared[kWarps];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const float temperature = params[4 * blockIdx.x], top_p = params[4 * blockIdx.x + 2], u = params[4 * blockIdx.x + 3];
  const auto top_k = static_cast<int64_t>(params[4 * blockIdx.x + 1]);
  const int64_t chunk = (vocab + kThreads - 1) / kThreads;
  const int64_t begin = min(vocab, static_cast<int64_t>(threadIdx.x) * chunk), end = min(vocab, begin + chunk);

  float local_max = -INFINITY;
  for (int64_t i = begin; i < end; ++i) local_max = fmaxf(local_max, isnan(row[i]) ? -INFINITY : row[i]);
  const float max_logit = block_max(local_max, shared);

  if (!(temperature > 0.0f)) {  // greedy: the lowest index holding the maximum
    float first = 3.0e38f;
    for (int64_t i = begin; i < end && first > 2.0e38f; ++i) {
      if (row[i] == max_logit) first = static_cast<float>(i);
    }
    first = -block_max(-first, shared);
    if (threadIdx.x == 0) ids[blockIdx.x] = first > 2.0e38f ? 0 : static_cast<int32_t>(first);
    return;
  }
  auto weight = [&](int64_t i) { return expf((row[i] - max_logit) / temperature); };

  Cut cut;
  // Top-k: bisect for the largest key with at least k logits at or above it.
  if (top_k > 0 && top_k < vocab) {
    uint32_t lo = 0, hi = key_of(max_logit);
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      double count = 0.0;
      for (int64_t i = begin; i < end; ++i) count += key_of(row[i]) >= mid ? 1.0 : 0.0;
      if (block_sum(count, shared) >= static_cast<double>(top_k))
        lo = mid;
      else
        hi = mid - 1;
    }
    double above = 0.0;
    for (int64_t i = begin; i < end; ++i) above += key_of(row[i]) > lo ? 1.0 : 0.0;
    cut.k_key = lo;
    cut.k_ties = static_cast<double>(top_k) - block_sum(above, shared);
  }
  // Ties at k_key before this thread's chunk, in index order.
  double my_k_ties = 0.0;
  for (int64_t i = begin; i < end; ++i) my_k_ties += key_of(row[i]) == cut.k_key ? 1.0 : 0.0;
  const double k_ties_before = block_exclusive_scan(my_k_ties, shared);

  // Visits this thread's chunk in order with each index's standing: kept by top-k, and the
  // weight of kept ties at p_key before it (for top-p).
  auto for_each_kept = [&](auto&& visit) {
    double k_rank = k_ties_before;
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t key = key_of(row[i]);
      bool kept = key > cut.k_key;
      if (key == cut.k_key) kept = k_rank++ < cut.k_ties;
      if (kept) visit(i, key);
    }
  };
  double my_kept = 0.0;
  for_each_kept([&](int64_t i, uint32_t) { my_kept += weight(i); });
  const double kept_weight = block_sum(my_kept, shared);

  // Top-p: bisect for the largest key whose kept weight at or above it reaches top_p of it all.
  if (top_p < 1.0f) {
    const double needed = top_p * kept_weight;
    uint32_t lo = cut.k_key, hi = key_of(max_logit);
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      double mass = 0.0;
      for_each_kept([&](int64_t i, uint32_t key) { mass += key >= mid ? weight(i) : 0.0f; });
      if (block_sum(mass, shared) >= needed)
        lo = mid;
      else
        hi = mid - 1;
    }
    double above = 0.0;
    for_each_kept([&](int64_t i, uint32_t key) { above += key > lo ? weight(i) : 0.0f; });
    cut.p_key = lo;
    cut.p_left = needed - block_sum(above, shared);
  }
  double my_p_ties = 0.0;
  for_each_kept([&](int64_t i, uint32_t key) { my_p_ties += key == cut.p_key ? weight(i) : 0.0f; });
  const double p_ties_before = block_exclusive_scan(my_p_ties, shared);
  auto for_each_drawn = [&](auto&& visit) {
    double tie_weight = p_ties_before;
    for_each_kept([&](int64_t i, uint32_t key) {
      if (key > cut.p_key) {
        visit(i);
      } else if (key == cut.p_key) {
        if (tie_weight < cut.p_left) visit(i);  // an element is drawn if the mass before it fell short
        tie_weight += weight(i);
      }
    });
  };

  // The draw, in index order.
  double my_weight = 0.0;
  float my_last = -1.0f;
  for_each_drawn([&](int64_t i) {
    my_weight += weight(i);
    my_last = static_cast<float>(i);
  });
  const double before = block_exclusive_scan(my_weight, shared);
  const double target = u * block_sum(my_weight, shared);
  const float last = block_max(my_last, shared);
  float chosen = -1.0f;
  if (target >= before && target < before + my_weight) {
    double running = before;
    for_each_drawn([&](int64_t i) {
      running += weight(i);
      if (chosen < 0.0f && target < running) chosen = static_cast<float>(i);
    });
  }
  chosen = block_max(chosen, shared);
  if (threadIdx.x == 0) ids[blockIdx.x] = static_cast<int32_t>(chosen >= 0.0f ? chosen : fmaxf(last, 0.0f));
}

}  // namespace

void sample_rows(const float* logits, const float* params, int32_t* ids, int64_t rows, int64_t vocab,
                 cudaStream_t stream) {
  if (rows == 0) return;
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, params, ids, vocab);
  check_launch("sample_rows");
}

}  // namespace flashq::cuda
