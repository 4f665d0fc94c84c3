// One head's optional q/k norm and RoPE, for a block of threads: shared by the head_norm_rope
// kernel and the attention input kernel (kv_store.h, norm_rope_store_kv_rows), so both give the
// same bits.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kv_element.cuh"
#include "kernels/dtype.h"
#include "kernels/rope_frequency.h"

namespace flashq::cuda {

// head[0, head_dim) normalised with weight w (not at all when w is null: RoPE only), then
// rotated for `position`, written to `out` and, when not null, to `also_out`, a cache row of Kv
// (kv_element.cuh: float32, or bf16 rounded from the float32 `out` gets). `normed` is head_dim
// floats of shared memory and `scratch` kWarpSize floats; the block's threads all call this.
// `out` may be `head`.
template <typename Kv>
__device__ inline void norm_rope_head(const float* head, float* out, Kv* also_out, const void* w, DType w_dtype,
                                      float eps, int32_t position, const RopeOptions& rope, int64_t head_dim,
                                      float* normed, float* scratch) {
  if (w != nullptr) {  // the same for every thread of the block, so block_sum is reached by all or none
    float sum_squares = 0.0f;
    for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) sum_squares = fmaf(head[i], head[i], sum_squares);
    const float total = block_sum(sum_squares, scratch);
    const float scale = 1.0f / sqrtf(total / static_cast<float>(head_dim) + eps);
    for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) normed[i] = head[i] * scale * weight_at(w, w_dtype, i);
  } else {
    for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) normed[i] = head[i];
  }
  __syncthreads();
  const int64_t rotary = rope_rotary_dims(rope, head_dim), half = rotary / 2;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const double inv_freq = rope_inverse_frequency(rope, i, rotary);
    const float angle = static_cast<float>(position * static_cast<double>(static_cast<float>(inv_freq)));
    float sin_a, cos_a;
    sincosf(angle, &sin_a, &cos_a);
    sin_a *= rope_attention_factor(rope);  // 1 but for yarn: exact then
    cos_a *= rope_attention_factor(rope);
    const float a = normed[i], b = normed[i + half];
    const float first = a * cos_a - b * sin_a, second = b * cos_a + a * sin_a;
    out[i] = first;
    out[i + half] = second;
    if (also_out != nullptr) {
      write_kv(also_out, i, first);
      write_kv(also_out, i + half, second);
    }
  }
  // Dims in no pair (past the rotary ones, or an odd head's last) pass through, as rope leaves them.
  for (int64_t i = 2 * half + threadIdx.x; i < head_dim; i += blockDim.x) {
    out[i] = normed[i];
    if (also_out != nullptr) write_kv(also_out, i, normed[i]);
  }
}

}  // namespace flashq::cuda
