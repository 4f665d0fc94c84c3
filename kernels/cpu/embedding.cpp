#include "kernels/cpu/embedding.h"

#include <cstring>

#include "kernels/cpu/weight_view.h"

namespace flashq::cpu {

void embedding(const void* table, DType dtype, const int32_t* ids, float* out, int64_t rows, int64_t dim) {
  for (int64_t m = 0; m < rows; ++m) {
    const int64_t offset = static_cast<int64_t>(ids[m]) * dim;
    if (dtype == DType::kF32) {
      std::memcpy(out + m * dim, static_cast<const float*>(table) + offset, sizeof(float) * dim);
      continue;
    }
    WeightVector row{static_cast<const char*>(table) + offset * static_cast<int64_t>(dtype_size(dtype)), dtype};
    for (int64_t i = 0; i < dim; ++i) out[m * dim + i] = row[i];
  }
}

}  // namespace flashq::cpu
