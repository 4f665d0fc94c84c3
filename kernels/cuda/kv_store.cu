#include "kernels/cuda/kv_store.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace flashq::cuda {
namespace {

struct KvStoreTable {
  KvStore store[kMaxKvStores];
  int count;
};

// One block per source row; grid y picks keys (0) or values (1).
__global__ void store_rows(const float* __restrict__ k, const float* __restrict__ v,
                           const __grid_constant__ KvStoreTable table, int64_t row_floats) {
  const int64_t row = blockIdx.x;
  int c = 0;
  while (c + 1 < table.count && row >= table.store[c + 1].first_row) ++c;
  const KvStore& store = table.store[c];
  const float* from = (blockIdx.y == 0 ? k : v) + row * row_floats;
  float* to = (blockIdx.y == 0 ? store.k : store.v) + (store.start + row - store.first_row) * row_floats;
  for (int64_t i = threadIdx.x; i < row_floats; i += blockDim.x) to[i] = from[i];
}

}  // namespace

void store_kv_rows(const float* k, const float* v, std::span<const KvStore> stores, int64_t total_rows,
                   int64_t row_floats, cudaStream_t stream) {
  if (total_rows == 0 || row_floats == 0 || stores.empty()) return;
  if (stores.size() > static_cast<size_t>(kMaxKvStores)) {
    throw Error(ErrorCode::kInternal, "store_kv_rows: more chunks than one launch takes");
  }
  KvStoreTable table{};
  std::copy(stores.begin(), stores.end(), table.store);
  table.count = static_cast<int>(stores.size());
  store_rows<<<dim3(static_cast<unsigned>(total_rows), 2), 256, 0, stream>>>(k, v, table, row_floats);
  check_launch("store_kv_rows");
}

}  // namespace flashq::cuda
