#include "kernels/cuda/matmul.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/matmul_bf16_rows.h"

namespace flashq::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kTileRows = 8;

// R rows of x (starting at row m0) against weight row `wj`, 16 bytes of weights per lane per
// step (8 bf16/f16 or 4 f32). Lane l takes chunks l, l + 32, ...; within a chunk elements are
// added in order; then a butterfly sum. Requires k % (16 / sizeof(W)) == 0 and 16-byte aligned
// rows of x and w.
template <int R, typename W>
__device__ inline void multiply_tile_vectorized(const float* __restrict__ x, const W* __restrict__ wj,
                                                float* __restrict__ y, int64_t m0, int64_t n, int64_t k, int64_t j,
                                                int lane) {
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(W));
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  const int64_t chunks = k / kPerChunk;
#pragma unroll 4
  for (int64_t c = lane; c < chunks; c += kWarpSize) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(wj) + c);
    const W* packed = reinterpret_cast<const W*>(&raw);
    float wf[kPerChunk];
#pragma unroll
    for (int p = 0; p < kPerChunk; ++p) wf[p] = widen(packed[p]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4* xr = reinterpret_cast<const float4*>(x + (m0 + r) * k + c * kPerChunk);
#pragma unroll
      for (int q = 0; q < kPerChunk / 4; ++q) {
        const float4 xv = xr[q];
        acc[r] = fmaf(wf[4 * q + 0], xv.x, acc[r]);
        acc[r] = fmaf(wf[4 * q + 1], xv.y, acc[r]);
        acc[r] = fmaf(wf[4 * q + 2], xv.z, acc[r]);
        acc[r] = fmaf(wf[4 * q + 3], xv.w, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0) y[(m0 + r) * n + j] = sum;
  }
}

// The same with one element per lane per step: any k, any alignment.
template <int R, typename W>
__device__ inline void multiply_tile_scalar(const float* __restrict__ x, const W* __restrict__ wj,
                                            float* __restrict__ y, int64_t m0, int64_t n, int64_t k, int64_t j,
                                            int lane) {
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t p = lane; p < k; p += kWarpSize) {
    const float wv = widen(wj[p]);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = fmaf(wv, x[(m0 + r) * k + p], acc[r]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0) y[(m0 + r) * n + j] = sum;
  }
}

template <int R, bool kVectorized, typename W>
__device__ inline void multiply_tile(const float* x, const W* wj, float* y, int64_t m0, int64_t n, int64_t k,
                                     int64_t j, int lane) {
  if constexpr (kVectorized) {
    multiply_tile_vectorized<R>(x, wj, y, m0, n, k, j, lane);
  } else {
    multiply_tile_scalar<R>(x, wj, y, m0, n, k, j, lane);
  }
}

// One warp per weight row j; all M rows of x in tiles of 8, then the remainder. Whole warps
// leave together, so the full-mask shuffles are safe.
template <bool kVectorized, typename W>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    stream_weight_rows(const float* __restrict__ x, const W* __restrict__ w, float* __restrict__ y, int64_t m,
                       int64_t n, int64_t k) {
  begin_after_previous_grid();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (j >= n) return;
  const W* wj = w + j * k;
  int64_t m0 = 0;
  for (; m0 + kTileRows <= m; m0 += kTileRows) multiply_tile<kTileRows, kVectorized>(x, wj, y, m0, n, k, j, lane);
  switch (m - m0) {
    case 7: multiply_tile<7, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    case 6: multiply_tile<6, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    case 5: multiply_tile<5, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    case 4: multiply_tile<4, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    case 3: multiply_tile<3, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    case 2: multiply_tile<2, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    case 1: multiply_tile<1, kVectorized>(x, wj, y, m0, n, k, j, lane); break;
    default: break;
  }
}

__global__ void round_to_bf16(const float* __restrict__ x, __nv_bfloat16* __restrict__ out, int64_t count) {
  begin_after_previous_grid();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

template <typename W>
void launch_streaming(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  constexpr int64_t kPerChunk = 16 / static_cast<int64_t>(sizeof(W));
  const unsigned blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  // The path depends on k and on where the tensors start, never on m.
  if (k % kPerChunk == 0 && aligned16(x) && aligned16(w)) {
    launch_kernel("matmul (streaming kernel)", stream_weight_rows<true, W>, blocks, kWarpsPerBlock * kWarpSize, 0,
                  stream, x, w, y, m, n, k);
  } else {
    launch_kernel("matmul (streaming kernel)", stream_weight_rows<false, W>, blocks, kWarpsPerBlock * kWarpSize, 0,
                  stream, x, w, y, m, n, k);
  }
}

int checked_int(int64_t value, const char* what) {
  if (value > INT_MAX) throw Error(ErrorCode::kUnsupported, std::string("matmul: ") + what + " beyond cuBLAS's int range");
  return static_cast<int>(value);
}

// cuBLAS is column-major. Row-major w [N, K] is a column-major K x N matrix, row-major x [M, K]
// a column-major K x M one, and row-major y [M, N] the column-major N x M matrix y^T = w^T x^T.
void gemm_cublas(const void* x, cudaDataType x_type, const void* w, cudaDataType w_type, float* y, int64_t m,
                 int64_t n, int64_t k, cublasHandle_t cublas) {
  const float alpha = 1.0f, beta = 0.0f;
  const int mi = checked_int(m, "rows"), ni = checked_int(n, "output features"), ki = checked_int(k, "input features");
  check_cublas(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &alpha, w, w_type, ki, x, x_type, ki, &beta,
                            y, CUDA_R_32F, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

}  // namespace

size_t matmul_scratch_bytes(DType w_dtype, int64_t m, int64_t k) {
  if (w_dtype != DType::kBF16) return 0;
  if (m <= kStreamingMaxRows) return bf16_rows_scratch_bytes(m, k);
  return static_cast<size_t>(m * k) * sizeof(__nv_bfloat16);
}

void matmul_streaming(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n, int64_t k,
                      cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  switch (w_dtype) {
    case DType::kF32: return launch_streaming(x, static_cast<const float*>(w), y, m, n, k, stream);
    case DType::kBF16: return launch_streaming(x, static_cast<const __nv_bfloat16*>(w), y, m, n, k, stream);
    case DType::kF16: return launch_streaming(x, static_cast<const __half*>(w), y, m, n, k, stream);
    case DType::kI32:
    case DType::kU8: break;
  }
  throw Error(ErrorCode::kInternal, "matmul: weights must be f32, f16 or bf16");
}

void matmul(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n, int64_t k,
            cublasHandle_t cublas, void* scratch, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  if (w_dtype == DType::kBF16 && bf16_rows_supported(x, w, m, k)) {
    return matmul_bf16_rows(x, static_cast<const __nv_bfloat16*>(w), y, m, n, k, scratch, stream);
  }
  if (m <= kStreamingMaxRows || w_dtype == DType::kF16 || w_dtype == DType::kI32) {
    return matmul_streaming(x, w, w_dtype, y, m, n, k, stream);
  }
  if (w_dtype == DType::kF32) return gemm_cublas(x, CUDA_R_32F, w, CUDA_R_32F, y, m, n, k, cublas);
  auto* rounded = static_cast<__nv_bfloat16*>(scratch);
  const int64_t count = m * k;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 4096));
  launch_kernel("matmul (round x to bf16)", round_to_bf16, blocks, 256, 0, stream, x, rounded, count);
  gemm_cublas(rounded, CUDA_R_16BF, w, CUDA_R_16BF, y, m, n, k, cublas);
}

}  // namespace flashq::cuda
