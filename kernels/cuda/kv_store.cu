#include "kernels/cuda/kv_store.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace flashq::cuda {
namespace {

// Passed by value as a __grid_constant__ parameter: read in place, never copied per thread.
struct KvStoreTable {
  KvStore store[kMaxKvStores];
  int count;
};

__device__ inline void copy_row(const float* __restrict__ from, float* __restrict__ to, int64_t row_floats) {
  for (int64_t i = threadIdx.x; i < row_floats; i += blockDim.x) to[i] = from[i];
}

// One block per source row; grid y picks keys (0) or values (1).
__global__ void store_kv(const float* __restrict__ k, const float* __restrict__ v,
                         const __grid_constant__ KvStoreTable table, const int32_t* __restrict__ rows,
                         int64_t row_floats, DeviceErrorReport* report) {
  const int64_t row = blockIdx.x;
  int c = 0;
  while (c + 1 < table.count && row >= table.store[c + 1].first_row) ++c;
  const KvStore& store = table.store[c];
  const int64_t at = rows[row];
  if (at < 0 || at >= store.capacity) {
    if (threadIdx.x == 0 && blockIdx.y == 0) {
      report_device_error(report, kStoreRowOutsideCache, rows[row], store.capacity);
    }
    return;
  }
  const float* from = (blockIdx.y == 0 ? k : v) + row * row_floats;
  copy_row(from, (blockIdx.y == 0 ? store.k : store.v) + at * row_floats, row_floats);
}

__global__ void store_at(const float* __restrict__ src, float* __restrict__ dst, const int32_t* __restrict__ rows,
                         int64_t row_floats, int64_t capacity, DeviceErrorReport* report) {
  const int64_t row = blockIdx.x, at = rows[row];
  if (at < 0 || at >= capacity) {
    if (threadIdx.x == 0) report_device_error(report, kStoreRowOutsideCache, rows[row], capacity);
    return;
  }
  copy_row(src + row * row_floats, dst + at * row_floats, row_floats);
}

}  // namespace

void store_kv_rows(const float* k, const float* v, std::span<const KvStore> stores, const int32_t* rows,
                   int64_t total_rows, int64_t row_floats, DeviceErrorReport* report, cudaStream_t stream) {
  if (total_rows == 0 || row_floats == 0 || stores.empty()) return;
  if (stores.size() > static_cast<size_t>(kMaxKvStores)) {
    throw Error(ErrorCode::kInternal, "store_kv_rows: more chunks than one launch takes");
  }
  KvStoreTable table{};
  std::copy(stores.begin(), stores.end(), table.store);
  table.count = static_cast<int>(stores.size());
  store_kv<<<dim3(static_cast<unsigned>(total_rows), 2), 256, 0, stream>>>(k, v, table, rows, row_floats, report);
  check_launch("store_kv_rows");
}

void store_rows(const float* src, float* dst, const int32_t* rows, int64_t n, int64_t row_floats, int64_t capacity,
                DeviceErrorReport* report, cudaStream_t stream) {
  if (n == 0 || row_floats == 0) return;
  store_at<<<static_cast<unsigned>(n), 256, 0, stream>>>(src, dst, rows, row_floats, capacity, report);
  check_launch("store_rows");
}

}  // namespace flashq::cuda
