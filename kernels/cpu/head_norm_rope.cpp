#include "kernels/cpu/head_norm_rope.h"

#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"

namespace flashq::cpu {

void head_norm_rope(float* x, WeightVector w, float eps, const int32_t* positions, const RopeOptions& rope,
                    int64_t rows,
                    int64_t heads, int64_t head_dim) {
  rmsnorm(x, w, eps, x, rows * heads, head_dim);
  cpu::rope(x, positions, rope, rows, heads, head_dim);
}

}  // namespace flashq::cpu
