#include "kernels/cuda/embedding.h"

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

// One block per output row.
__global__ void gather_rows(const void* __restrict__ table, DType dtype, int64_t table_rows,
                            const int32_t* __restrict__ ids, float* __restrict__ out, int64_t dim,
                            DeviceErrorReport* report) {
  begin_after_previous_grid();
  const int32_t id = ids[blockIdx.x];
  float* row = out + static_cast<int64_t>(blockIdx.x) * dim;
  if (id < 0 || id >= table_rows) {
    if (threadIdx.x == 0) report_device_error(report, kTokenIdOutsideTable, id, table_rows);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) row[i] = 0.0f;
    return;
  }
  const int64_t offset = static_cast<int64_t>(id) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) row[i] = weight_at(table, dtype, offset + i);
}

}  // namespace

void embedding(const void* table, DType dtype, int64_t table_rows, const int32_t* ids, float* out, int64_t rows,
               int64_t dim, DeviceErrorReport* report, cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel("embedding", gather_rows, static_cast<unsigned>(rows), 256, 0, stream, table, dtype, table_rows, ids,
                out, dim, report);
}

}  // namespace flashq::cuda
