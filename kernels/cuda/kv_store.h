// Stores rows into caches at rows the device holds (twin: CpuBackend::store_rows and
// Backend::store_and_attend's default). Row i of the source goes to row rows[i] of its
// destination; a row outside the destination is reported through `report` (device_error.h)
// and skipped.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "kernels/cuda/device_error.h"

namespace flashq::cuda {

inline constexpr int kMaxKvStores = 64;  // per launch: they travel in the kernel's parameters

// One sequence: source rows from first_row up to the next chunk's go into k and v, of
// `capacity` rows.
struct KvStore {
  float* k;
  float* v;
  int64_t first_row, capacity;
};

// k and v rows of several sequences in one launch. row_floats: floats in one row (kv_heads *
// head_dim). At most kMaxKvStores chunks.
void store_kv_rows(const float* k, const float* v, std::span<const KvStore> stores, const int32_t* rows,
                   int64_t total_rows, int64_t row_floats, DeviceErrorReport* report, cudaStream_t stream);

// dst[rows[i]] = src[i] for n rows of row_floats floats; dst has `capacity` rows.
void store_rows(const float* src, float* dst, const int32_t* rows, int64_t n, int64_t row_floats, int64_t capacity,
                DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
