#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/matmul_mxfp4.h"
#include "kernels/cuda/mxfp4.cuh"

namespace flashq::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kTileRows = 8;

// A warp per weight row j; x rows in tiles of kTileRows. Each element is summed in the same
// order whatever M is.
__global__ void mxfp4_rows(const float* __restrict__ x, const uint8_t* __restrict__ blocks,
                           const uint8_t* __restrict__ scales, float* __restrict__ y, int64_t m, int64_t n, int64_t k) {
  begin_after_previous_grid();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (j >= n) return;  // the whole warp
  for (int64_t m0 = 0; m0 < m; m0 += kTileRows) {
    const int64_t rows = m - m0 < kTileRows ? m - m0 : kTileRows;
    float acc[kTileRows];
#pragma unroll
    for (int r = 0; r < kTileRows; ++r) acc[r] = 0.0f;
    for (int64_t p = lane; p < k; p += kWarpSize) {
      const float w = mxfp4_weight(blocks, scales, j, p, k);
#pragma unroll
      for (int r = 0; r < kTileRows; ++r) {
        if (r < rows) acc[r] = fmaf(w, x[(m0 + r) * k + p], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kTileRows; ++r) {
      const float sum = warp_sum(acc[r]);
      if (lane == 0 && r < rows) y[(m0 + r) * n + j] = sum;
    }
  }
}

}  // namespace

void matmul_mxfp4(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                  int64_t k, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  const auto grid = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel("matmul_mxfp4", mxfp4_rows, grid, kWarpsPerBlock * kWarpSize, 0, stream, x, blocks, scales, y, m, n, k);
}

}  // namespace flashq::cuda
