// Rows stored at and gathered from row indices on the CPU (twin: kernels/cuda/kv_store.cu): the
// KV-cache writes of store_rows and store_kv, and gather_rows. The indices are read when the
// op runs, as on a GPU; one outside the indexed tensor throws.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashq::cpu {

// dst[rows[i]] = src[i] for n rows of row_bytes; dst has `capacity` rows.
void store_rows(const void* src, void* dst, const int32_t* rows, int64_t n, size_t row_bytes, int64_t capacity);

// The same into a bf16 cache: rows of row_elements floats, each rounded to bf16 (round to
// nearest even) as stored.
void store_rows_bf16(const float* src, uint16_t* dst, const int32_t* rows, int64_t n, int64_t row_elements,
                     int64_t capacity);

// dst[i] = src[rows[i]] for n rows of row_bytes; src has `source_rows` rows.
void gather_rows(const void* src, const int32_t* rows, void* dst, int64_t n, size_t row_bytes, int64_t source_rows);

}  // namespace flashq::cpu
