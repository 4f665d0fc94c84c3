#include "kernels/cpu/kv_store.h"

#include <cstring>

#include "kernels/dtype.h"
#include "shared/error.h"

namespace flashq::cpu {

void store_rows(const void* src, void* dst, const int32_t* rows, int64_t n, size_t row_bytes, int64_t capacity) {
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= capacity) {
      throw Error(ErrorCode::kInternal, "cpu backend: store_rows: a row outside the destination");
    }
    std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(rows[i]) * row_bytes,
                static_cast<const char*>(src) + static_cast<size_t>(i) * row_bytes, row_bytes);
  }
}

void store_rows_bf16(const float* src, uint16_t* dst, const int32_t* rows, int64_t n, int64_t row_elements,
                     int64_t capacity) {
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= capacity) {
      throw Error(ErrorCode::kInternal, "cpu backend: store_rows: a row outside the destination");
    }
    const float* from = src + i * row_elements;
    uint16_t* to = dst + int64_t{rows[i]} * row_elements;
    for (int64_t e = 0; e < row_elements; ++e) to[e] = f32_to_bf16(from[e]);
  }
}

void gather_rows(const void* src, const int32_t* rows, void* dst, int64_t n, size_t row_bytes, int64_t source_rows) {
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= source_rows) {
      throw Error(ErrorCode::kInternal, "cpu backend: gather_rows: a row outside the source");
    }
    std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(i) * row_bytes,
                static_cast<const char*>(src) + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  }
}

}  // namespace flashq::cpu
