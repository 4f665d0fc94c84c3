// Stores rows into caches at rows the device holds (twin: kernels/cpu/kv_store.cpp, and
// Backend::store_kv's default). Row i of the source goes to row rows[i] of its destination; a
// row outside the destination is reported through `report` (device_error.h) and skipped.
// gather_rows goes the other way. A cache holds float32 or bf16 (kernels/backend.h): float32
// rows stored into a bf16 cache are rounded once, to nearest even (kv_element.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cuda/device_error.h"
#include "kernels/dtype.h"
#include "kernels/rope_frequency.h"

namespace flashq::cuda {

inline constexpr int kMaxKvStores = 64;  // per launch: they travel in the kernel's parameters

// One sequence: source rows from first_row up to the next chunk's go into k and v, of
// `capacity` rows of the launch's cache dtype.
struct KvStore {
  void* k;
  void* v;
  int64_t first_row, capacity;
};

// k and v rows of several sequences in one launch. row_floats: floats in one row (kv_heads *
// head_dim). At most kMaxKvStores chunks, their caches all of `cache_dtype` (f32 or bf16).
void store_kv_rows(const float* k, const float* v, std::span<const KvStore> stores, DType cache_dtype,
                   const int32_t* rows, int64_t total_rows, int64_t row_floats, DeviceErrorReport* report,
                   cudaStream_t stream);

// The q/k norm and RoPE (cuda::head_norm_rope's) for norm_rope_store_kv_rows; a null weight is
// RoPE only, without the norm. Positions start at the launch's first row.
struct QkNormRope {
  const void* q_w;
  DType q_dtype;
  const void* k_w;
  DType k_dtype;
  float eps;
  const int32_t* positions;
  RopeOptions rope;
};

// store_kv_rows after head_norm_rope of q (q_heads per row) and k, in one launch: q's heads are
// normed and rotated in place, k's in place and into their caches, v's copied there (the rows
// cached rounded when the caches are bf16). The bits of head_norm_rope, head_norm_rope,
// store_kv_rows.
void norm_rope_store_kv_rows(float* q, int64_t q_heads, float* k, const float* v, int64_t kv_heads, int64_t head_dim,
                             const QkNormRope& norm, std::span<const KvStore> stores, DType cache_dtype,
                             const int32_t* rows, int64_t total_rows, DeviceErrorReport* report, cudaStream_t stream);

// dst[rows[i]] = src[i] for n rows of row_floats floats; dst, of `dst_dtype` (f32 or bf16), has
// `capacity` rows.
void store_rows(const float* src, void* dst, DType dst_dtype, const int32_t* rows, int64_t n, int64_t row_floats,
                int64_t capacity, DeviceErrorReport* report, cudaStream_t stream);

// dst[i] = src[rows[i]] for n rows of row_elements elements of element_bytes (4 or 2) each,
// copied as they are; src has `source_rows` rows. A row outside the source is reported and left
// unwritten.
void gather_rows(const void* src, const int32_t* rows, void* dst, int64_t n, int64_t row_elements, size_t element_bytes,
                 int64_t source_rows, DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
