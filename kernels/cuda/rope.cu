#include "kernels/cuda/rope.h"

#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

// One thread per (row, pair index i): the angle is computed once and applied to every head.
__global__ void rotate_half(float* x, const int32_t* __restrict__ positions, RopeOptions rope, int64_t rows,
                            int64_t heads, int64_t head_dim) {
  begin_after_previous_grid();
  const int64_t rotary = rope_rotary_dims(rope, head_dim), half = rotary / 2;  // the rest pass through
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * half) return;
  const int64_t r = index / half, i = index % half;
  const double inv_freq = rope_inverse_frequency(rope, i, rotary);
  const float angle = static_cast<float>(positions[r] * static_cast<double>(static_cast<float>(inv_freq)));
  float sin_a, cos_a;
  sincosf(angle, &sin_a, &cos_a);
  sin_a *= rope_attention_factor(rope);  // 1 but for yarn: exact then
  cos_a *= rope_attention_factor(rope);
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + (r * heads + h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * cos_a - b * sin_a;
    v[i + half] = b * cos_a + a * sin_a;
  }
}

}  // namespace

void rope(float* x, const int32_t* positions, const RopeOptions& rope, int64_t rows, int64_t heads, int64_t head_dim,
          cudaStream_t stream) {
  const int64_t pairs = rows * (rope_rotary_dims(rope, head_dim) / 2);
  if (pairs == 0 || heads == 0) return;
  const unsigned threads = 128;
  launch_kernel("rope", rotate_half, static_cast<unsigned>((pairs + threads - 1) / threads), threads, 0, stream, x,
                positions, rope, rows, heads, head_dim);
}

}  // namespace flashq::cuda
