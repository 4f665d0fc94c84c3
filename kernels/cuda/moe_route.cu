#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/moe_route.h"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 128;

// Whether expert a ranks before expert b: numbers by value, descending, then NaN; equals by index.
__device__ inline bool heavier(const float* row, int64_t a, int64_t b) {
  const bool a_nan = isnan(row[a]), b_nan = isnan(row[b]);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && row[a] != row[b]) return row[a] > row[b];
  return a < b;
}

__global__ void route_rows(const float* __restrict__ logits, int64_t rows, int64_t experts, int64_t top_k,
                           bool over_all, bool normalize, int32_t* __restrict__ ids, float* __restrict__ weights) {
  begin_after_previous_grid();
  const int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= rows) return;
  const float* row = logits + m * experts;
  int32_t* row_ids = ids + m * top_k;
  int64_t previous = -1;
  for (int64_t j = 0; j < top_k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (previous >= 0 && !heavier(row, previous, e)) continue;  // picked already
      if (best < 0 || heavier(row, e, best)) best = e;
    }
    row_ids[j] = static_cast<int32_t>(best);
    previous = best;
  }
  const double top = row[row_ids[0]];
  double picked = 0.0, all = 0.0;
  for (int64_t j = 0; j < top_k; ++j) picked += exp(static_cast<double>(row[row_ids[j]]) - top);
  for (int64_t e = 0; e < experts; ++e) all += exp(static_cast<double>(row[e]) - top);
  const double denominator = over_all && !normalize ? all : picked;
  for (int64_t j = 0; j < top_k; ++j) {
    weights[m * top_k + j] = static_cast<float>(exp(static_cast<double>(row[row_ids[j]]) - top) / denominator);
  }
}

}  // namespace

void moe_route(const float* logits, int64_t rows, int64_t experts, const MoeRouting& routing, int32_t* ids,
               float* weights, cudaStream_t stream) {
  if (rows == 0) return;
  const auto blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  const bool over_all = routing.order == RoutingOrder::kSoftmaxThenTopK;
  launch_kernel("moe_route", route_rows, blocks, kThreads, 0, stream, logits, rows, experts, routing.top_k, over_all,
                routing.normalize_top_k, ids, weights);
}

}  // namespace flashq::cuda
