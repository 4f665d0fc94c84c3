#include "kernels/cuda/kv_store.h"

#include <algorithm>

#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/head_norm_rope.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/kv_element.cuh"
#include "shared/error.h"

namespace flashq::cuda {
namespace {

// Passed by value as a __grid_constant__ parameter: read in place, never copied per thread.
struct KvStoreTable {
  KvStore store[kMaxKvStores];
  int count;
};

// The chunk holding source row `row` (chunks in order of first_row).
__device__ inline const KvStore& store_of(const KvStoreTable& table, int64_t row) {
  int c = 0;
  while (c + 1 < table.count && row >= table.store[c + 1].first_row) ++c;
  return table.store[c];
}

// A float32 row into a cache row of Kv (kv_element.cuh): copied, or rounded to bf16.
template <typename Kv>
__device__ inline void store_row(const float* __restrict__ from, Kv* __restrict__ to, int64_t row_floats) {
  for (int64_t i = threadIdx.x; i < row_floats; i += blockDim.x) write_kv(to, i, from[i]);
}

// One block per source row; grid y picks keys (0) or values (1).
template <typename Kv>
__global__ void store_kv(const float* __restrict__ k, const float* __restrict__ v,
                         const __grid_constant__ KvStoreTable table, const int32_t* __restrict__ rows,
                         int64_t row_floats, DeviceErrorReport* report) {
  begin_after_previous_grid();
  const int64_t row = blockIdx.x;
  const KvStore& store = store_of(table, row);
  const int64_t at = rows[row];
  if (at < 0 || at >= store.capacity) {
    if (threadIdx.x == 0 && blockIdx.y == 0) {
      report_device_error(report, kStoreRowOutsideCache, rows[row], store.capacity);
    }
    return;
  }
  const float* from = (blockIdx.y == 0 ? k : v) + row * row_floats;
  store_row(from, static_cast<Kv*>(blockIdx.y == 0 ? store.k : store.v) + at * row_floats, row_floats);
}

// One block per (row, head slot): slots [0, q_heads) are q's heads, then kv_heads of k, then
// kv_heads of v. The rows stored are rounded when Kv is bf16; q and k stay float32.
template <typename Kv>
__global__ void norm_rope_store_kv(float* q, float* k, const float* __restrict__ v,
                                   const __grid_constant__ KvStoreTable table, const int32_t* __restrict__ rows,
                                   int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                   const __grid_constant__ QkNormRope norm, DeviceErrorReport* report) {
  extern __shared__ float normed[];  // head_dim floats
  __shared__ float scratch[kWarpSize];
  begin_after_previous_grid();
  const int64_t row = blockIdx.x, slot = blockIdx.y;
  const int32_t position = norm.positions[row];
  if (slot < q_heads) {
    float* head = q + (row * q_heads + slot) * head_dim;
    norm_rope_head<float>(head, head, nullptr, norm.q_w, norm.q_dtype, norm.eps, position, norm.rope, head_dim, normed,
                          scratch);
    return;
  }
  const KvStore& store = store_of(table, row);
  const int64_t at = rows[row];
  const bool inside = at >= 0 && at < store.capacity;
  if (!inside && slot == q_heads && threadIdx.x == 0) {
    report_device_error(report, kStoreRowOutsideCache, rows[row], store.capacity);
  }
  const bool is_key = slot < q_heads + kv_heads;
  const int64_t kv_head = (slot - q_heads) % kv_heads;
  const int64_t from = (row * kv_heads + kv_head) * head_dim, to = (at * kv_heads + kv_head) * head_dim;
  if (is_key) {
    float* head = k + from;
    norm_rope_head(head, head, inside ? static_cast<Kv*>(store.k) + to : nullptr, norm.k_w, norm.k_dtype, norm.eps,
                   position, norm.rope, head_dim, normed, scratch);
  } else if (inside) {
    store_row(v + from, static_cast<Kv*>(store.v) + to, head_dim);
  }
}

template <typename Kv>
__global__ void store_at(const float* __restrict__ src, Kv* __restrict__ dst, const int32_t* __restrict__ rows,
                         int64_t row_floats, int64_t capacity, DeviceErrorReport* report) {
  begin_after_previous_grid();
  const int64_t row = blockIdx.x, at = rows[row];
  if (at < 0 || at >= capacity) {
    if (threadIdx.x == 0) report_device_error(report, kStoreRowOutsideCache, rows[row], capacity);
    return;
  }
  store_row(src + row * row_floats, dst + at * row_floats, row_floats);
}

// A row copied as it is, between tensors of one dtype.
template <typename Element>
__device__ inline void copy_row(const Element* __restrict__ from, Element* __restrict__ to, int64_t row_elements) {
  for (int64_t i = threadIdx.x; i < row_elements; i += blockDim.x) to[i] = from[i];
}

// Element: a type of the dtype's size (float for 4 bytes, uint16_t for 2); loads and stores
// move the bits unchanged.
template <typename Element>
__global__ void gather_at(const Element* __restrict__ src, const int32_t* __restrict__ rows, Element* __restrict__ dst,
                          int64_t row_elements, int64_t source_rows, DeviceErrorReport* report) {
  begin_after_previous_grid();
  const int64_t row = blockIdx.x, from = rows[row];
  if (from < 0 || from >= source_rows) {
    if (threadIdx.x == 0) report_device_error(report, kGatherRowOutsideSource, rows[row], source_rows);
    return;
  }
  copy_row(src + from * row_elements, dst + row * row_elements, row_elements);
}

KvStoreTable table_of(std::span<const KvStore> stores) {
  if (stores.size() > static_cast<size_t>(kMaxKvStores)) {
    throw Error(ErrorCode::kInternal, "store_kv_rows: more chunks than one launch takes");
  }
  KvStoreTable table{};
  std::copy(stores.begin(), stores.end(), table.store);
  table.count = static_cast<int>(stores.size());
  return table;
}

}  // namespace

void store_kv_rows(const float* k, const float* v, std::span<const KvStore> stores, DType cache_dtype,
                   const int32_t* rows, int64_t total_rows, int64_t row_floats, DeviceErrorReport* report,
                   cudaStream_t stream) {
  if (total_rows == 0 || row_floats == 0 || stores.empty()) return;
  const KvStoreTable table = table_of(stores);
  launch_kernel("store_kv_rows", bf16_cache(cache_dtype, "store_kv_rows") ? store_kv<__nv_bfloat16> : store_kv<float>,
                dim3(static_cast<unsigned>(total_rows), 2), 256, 0, stream, k, v, table, rows, row_floats, report);
}

void norm_rope_store_kv_rows(float* q, int64_t q_heads, float* k, const float* v, int64_t kv_heads, int64_t head_dim,
                             const QkNormRope& norm, std::span<const KvStore> stores, DType cache_dtype,
                             const int32_t* rows, int64_t total_rows, DeviceErrorReport* report, cudaStream_t stream) {
  if (total_rows == 0 || head_dim == 0 || kv_heads == 0 || stores.empty()) return;
  const KvStoreTable table = table_of(stores);
  // As cuda::head_norm_rope launches: a thread per element up to 256.
  const int64_t rounded = (head_dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  const auto threads = static_cast<unsigned>(std::clamp<int64_t>(rounded, kWarpSize, 256));
  const dim3 grid(static_cast<unsigned>(total_rows), static_cast<unsigned>(q_heads + 2 * kv_heads));
  const size_t shared = static_cast<size_t>(head_dim) * sizeof(float);
  const auto kernel = bf16_cache(cache_dtype, "norm_rope_store_kv_rows") ? norm_rope_store_kv<__nv_bfloat16>
                                                                         : norm_rope_store_kv<float>;
  launch_kernel("norm_rope_store_kv_rows", kernel, grid, threads, shared, stream, q, k, v, table, rows, q_heads,
                kv_heads, head_dim, norm, report);
}

void store_rows(const float* src, void* dst, DType dst_dtype, const int32_t* rows, int64_t n, int64_t row_floats,
                int64_t capacity, DeviceErrorReport* report, cudaStream_t stream) {
  if (n == 0 || row_floats == 0) return;
  const auto grid = static_cast<unsigned>(n);
  if (bf16_cache(dst_dtype, "store_rows")) {
    launch_kernel("store_rows", store_at<__nv_bfloat16>, grid, 256, 0, stream, src, static_cast<__nv_bfloat16*>(dst),
                  rows, row_floats, capacity, report);
  } else {
    launch_kernel("store_rows", store_at<float>, grid, 256, 0, stream, src, static_cast<float*>(dst), rows, row_floats,
                  capacity, report);
  }
}

void gather_rows(const void* src, const int32_t* rows, void* dst, int64_t n, int64_t row_elements, size_t element_bytes,
                 int64_t source_rows, DeviceErrorReport* report, cudaStream_t stream) {
  if (n == 0 || row_elements == 0) return;
  const auto grid = static_cast<unsigned>(n);
  if (element_bytes == 4) {
    launch_kernel("gather_rows", gather_at<float>, grid, 256, 0, stream, static_cast<const float*>(src), rows,
                  static_cast<float*>(dst), row_elements, source_rows, report);
  } else if (element_bytes == 2) {
    launch_kernel("gather_rows", gather_at<uint16_t>, grid, 256, 0, stream, static_cast<const uint16_t*>(src), rows,
                  static_cast<uint16_t*>(dst), row_elements, source_rows, report);
  } else {
    throw Error(ErrorCode::kInternal, "gather_rows: elements of 4 or 2 bytes only");
  }
}

}  // namespace flashq::cuda
