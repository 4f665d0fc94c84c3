#include <cmath>

#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/sampling.h"

namespace flashq::cuda {
namespace {

// One block per row. The cuts (top-k, top-p) are found by radix selection over order-preserving
// keys, 8 bits a pass from the top: 4 passes each instead of a bisection's 32, and the passes read
// the row coalesced, in any order, into shared-memory histograms. Only the draw needs index
// order: there each thread owns a contiguous chunk of the vocabulary, so "in index order" is "by
// thread, then within the chunk", and a prefix over the threads orders ties and the draw.
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr unsigned kAllLanes = 0xffffffffu;

// Top-p masses are summed as integers, weights (at most 1) in units of 2^-40: integer sums do not
// depend on the order of the additions, so histograms built with atomics stay deterministic. A
// whole vocabulary of weight 1 stays below 2^58.
using Mass = unsigned long long;
constexpr double kMassUnit = 1099511627776.0;  // 2^40

__device__ inline Mass mass_of(float weight) { return __double2ull_rn(static_cast<double>(weight) * kMassUnit); }

// A logit as the CPU twin orders and weighs it: NaN as -inf (kernels/cpu/sampling.h).
__device__ inline float ordered_logit(float v) { return isnan(v) ? -INFINITY : v; }

// Floats as unsigned keys in the same order, and back. -0 and +0 are equal floats, so they take
// one key: their ties go by index, as on the CPU.
__device__ inline uint32_t key_of(float v) {
  const float ordered = ordered_logit(v);
  const uint32_t bits = __float_as_uint(ordered == 0.0f ? 0.0f : ordered);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ inline float value_of(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// Block-wide sum / max / exclusive prefix sum over threads, in a fixed order. Sums are in double:
// over a large vocabulary a float running sum drifts by many weights, and the draw would then
// depend on the order of the additions (the CPU twin sums in double too). `shared` holds kWarps
// doubles; every call starts and ends with the block in step.
__device__ double block_sum(double v, double* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kAllLanes, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += shared[w];
  return total;
}

__device__ float block_max(float v, double* shared) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, o));
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
    const double other = __shfl_up_sync(kAllLanes, inclusive, o);
    if (lane >= o) inclusive += other;
  }
  __syncthreads();
  if (lane == 31) shared[warp] = inclusive;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += shared[w];
  return before + inclusive - v;
}

// hist[bin] += value for every lane with `counted`: one shared-memory atomic per distinct bin of
// the warp, since most of a row's logits share their top key bits and would queue on one bin.
// Every lane of the warp calls it.
template <typename T>
__device__ inline void add_to_histogram(T* hist, bool counted, uint32_t bin, T value) {
  unsigned pending = __ballot_sync(kAllLanes, counted);
  while (pending != 0) {
    const int leader = __ffs(pending) - 1;
    const uint32_t leader_bin = __shfl_sync(kAllLanes, bin, leader);
    const bool mine = counted && bin == leader_bin;
    T sum = mine ? value : T{0};
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(kAllLanes, sum, o);
    if (static_cast<int>(threadIdx.x % 32) == leader) atomicAdd(&hist[leader_bin], sum);
    pending &= ~__ballot_sync(kAllLanes, mine);
  }
}

// What the radix passes share: the histogram, and the prefix and the total above it that thread 0
// picks after each pass.
template <typename T>
struct RadixState {
  T hist[kBins];
  uint32_t prefix;
  T above;
};

// The largest key whose elements, with all larger ones, reach `needed` in the histogrammed
// quantity (count or mass), and that quantity over the larger keys: four passes of 8 bits.
// `contribution(i, key)` is what element i adds (0: nothing); `extra(prefix, mask, shift, hist)` may
// add more to the histogram on thread 0 before the pick. A bin is picked only if it holds
// something, so a `needed` of 0 picks the largest key present.
template <typename T, typename Contribution, typename Extra>
__device__ void radix_select(const float* row, int64_t vocab, double needed, RadixState<T>& state,
                             Contribution&& contribution, Extra&& extra) {
  if (threadIdx.x == 0) {
    state.prefix = 0;
    state.above = 0;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t high_mask = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
    for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) state.hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = state.prefix;
    for (int64_t base = 0; base < vocab; base += kThreads) {
      const int64_t i = base + static_cast<int64_t>(threadIdx.x);
      const uint32_t key = i < vocab ? key_of(row[i]) : 0u;
      const T value = i < vocab && (key & high_mask) == prefix ? contribution(i, key) : T{0};
      add_to_histogram(state.hist, value != T{0}, (key >> shift) & 0xffu, value);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      extra(prefix, high_mask, shift, state.hist);
      T running = state.above;
      int b = kBins - 1;
      for (; b > 0; --b) {
        if (state.hist[b] != 0 && static_cast<double>(running + state.hist[b]) >= needed) break;
        running += state.hist[b];
      }
      state.prefix = prefix | (static_cast<uint32_t>(b) << shift);
      state.above = running;
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, const float* __restrict__ params, int32_t* __restrict__ ids,
                  int64_t vocab) {
  __shared__ double shared[kWarps];
  __shared__ RadixState<unsigned> by_count;
  __shared__ RadixState<Mass> by_mass;
  begin_after_previous_grid();
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const float temperature = params[4 * blockIdx.x], top_p = params[4 * blockIdx.x + 2], u = params[4 * blockIdx.x + 3];
  const auto top_k = static_cast<int64_t>(params[4 * blockIdx.x + 1]);

  float local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    local_max = fmaxf(local_max, ordered_logit(row[i]));
  }
  const float max_logit = block_max(local_max, shared);

  if (!(temperature > 0.0f)) {  // greedy: the lowest index holding the maximum
    float first = 3.0e38f;
    for (int64_t i = threadIdx.x; i < vocab && first > 2.0e38f; i += kThreads) {
      if (row[i] == max_logit) first = static_cast<float>(i);
    }
    first = -block_max(-first, shared);
    if (threadIdx.x == 0) ids[blockIdx.x] = first > 2.0e38f ? 0 : static_cast<int32_t>(first);
    return;
  }
  auto weight_at_key = [&](uint32_t key) { return expf((value_of(key) - max_logit) / temperature); };
  auto weight = [&](int64_t i) { return expf((ordered_logit(row[i]) - max_logit) / temperature); };

  // Top-k keeps every key above k_key and, of the ties at it, the first k_ties in index order.
  // No key is 0 (NaN reads as -inf), so k_key = 0 keeps everything.
  uint32_t k_key = 0;
  int64_t k_ties = 0;
  if (top_k > 0 && top_k < vocab) {
    radix_select(row, vocab, static_cast<double>(top_k), by_count, [](int64_t, uint32_t) { return 1u; },
                 [](uint32_t, uint32_t, int, unsigned*) {});
    k_key = by_count.prefix;
    k_ties = top_k - static_cast<int64_t>(by_count.above);
  }

  // Top-p, over what top-k keeps: the largest key whose kept mass at or above it reaches top_p of
  // all kept mass, and how many of its ties, in index order, are drawn: those before which the
  // mass still falls short. The ties at k_key count as k_ties of one weight (ties share a logit).
  uint32_t cut_key = k_key;
  int64_t cut_ties = k_key == 0 ? vocab : k_ties;  // drawn ties at cut_key, in index order
  if (top_p < 1.0f) {
    const Mass tie_mass = k_key == 0 ? 0 : static_cast<Mass>(k_ties) * mass_of(weight_at_key(k_key));
    Mass my_kept = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      if (key_of(row[i]) > k_key) my_kept += mass_of(weight(i));
    }
    const double kept_mass = block_sum(static_cast<double>(my_kept), shared) + static_cast<double>(tie_mass);
    const double needed = static_cast<double>(top_p) * kept_mass;
    radix_select(
        row, vocab, needed, by_mass,
        [&](int64_t i, uint32_t key) { return key > k_key ? mass_of(weight(i)) : Mass{0}; },
        [&](uint32_t prefix, uint32_t high_mask, int shift, Mass* hist) {
          if (tie_mass != 0 && (k_key & high_mask) == prefix) hist[(k_key >> shift) & 0xffu] += tie_mass;
        });
    cut_key = by_mass.prefix;
    // At least one: the cut's mass reaches needed, and a top_p <= 0 keeps the largest logit alone.
    const double left = needed - static_cast<double>(by_mass.above);
    const Mass each = mass_of(weight_at_key(cut_key));
    int64_t p_ties = each == 0 ? vocab : static_cast<int64_t>(ceil(left / static_cast<double>(each)));
    if (p_ties < 1) p_ties = 1;
    cut_ties = cut_key == k_key && k_ties < p_ties ? k_ties : p_ties;
  }

  // The draw, in index order over each thread's contiguous chunk: keys above the cut, and the
  // first cut_ties ties at it, each tie of the cut's one weight.
  const int64_t chunk = (vocab + kThreads - 1) / kThreads;
  const int64_t begin = min(vocab, static_cast<int64_t>(threadIdx.x) * chunk), end = min(vocab, begin + chunk);
  double my_above = 0.0, my_ties = 0.0;
  float my_last_above = -1.0f;
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t key = key_of(row[i]);
    if (key > cut_key) {
      my_above += weight(i);
      my_last_above = static_cast<float>(i);
    } else if (key == cut_key) {
      my_ties += 1.0;
    }
  }
  const double ties_before = block_exclusive_scan(my_ties, shared);
  const double my_drawn_ties = fmin(fmax(static_cast<double>(cut_ties) - ties_before, 0.0), my_ties);
  // No ties are drawn without a cut (cut_key 0 is no float, and its weight NaN).
  const double cut_weight = cut_key == 0 ? 0.0 : weight_at_key(cut_key);
  const double my_weight = my_above + my_drawn_ties * cut_weight;
  const double before = block_exclusive_scan(my_weight, shared);
  const double target = u * block_sum(my_weight, shared);

  // The last drawn index, for a u that rounding leaves past the end; then the chosen one.
  float my_last = my_last_above;
  if (my_drawn_ties > 0.0) {
    double rank = ties_before;
    for (int64_t i = begin; i < end; ++i) {
      if (key_of(row[i]) == cut_key && rank++ < static_cast<double>(cut_ties)) {
        my_last = fmaxf(my_last, static_cast<float>(i));
      }
    }
  }
  const float last = block_max(my_last, shared);
  // The thread whose share holds the target walks its chunk: the last with a share that starts
  // at or before it. (Asking each thread whether the target lies below its start plus its
  // weight left gaps of an ulp between neighbours, whose sums are rounded in other orders.) Its
  // walk adds the ties one by one where the share counted them together, so if rounding leaves
  // the walk just short of the target, its last drawn index is the one.
  const float claimant =
      block_max(my_weight > 0.0 && before <= target ? static_cast<float>(threadIdx.x) : -1.0f, shared);
  float chosen = -1.0f;
  if (static_cast<float>(threadIdx.x) == claimant) {
    double running = before, rank = ties_before;
    for (int64_t i = begin; i < end && chosen < 0.0f; ++i) {
      const uint32_t key = key_of(row[i]);
      if (key > cut_key) {
        running += weight(i);
      } else if (key == cut_key && rank++ < static_cast<double>(cut_ties)) {
        running += cut_weight;
      } else {
        continue;
      }
      if (target < running) chosen = static_cast<float>(i);
    }
    if (chosen < 0.0f) chosen = my_last;
  }
  chosen = block_max(chosen, shared);
  if (threadIdx.x == 0) ids[blockIdx.x] = static_cast<int32_t>(chosen >= 0.0f ? chosen : fmaxf(last, 0.0f));
}

}  // namespace

void sample_rows(const float* logits, const float* params, int32_t* ids, int64_t rows, int64_t vocab,
                 cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel("sample_rows", sample_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, logits, params, ids,
                vocab);
}

}  // namespace flashq::cuda
