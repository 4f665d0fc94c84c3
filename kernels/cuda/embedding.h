// Embedding lookup on the GPU (twin: kernels/cpu/embedding.cpp): out[m] = table[ids[m]] widened
// to float32. An id outside the table is reported through `report` (device_error.h) and its row
// is written as zeros.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_error.h"
#include "kernels/dtype.h"

namespace flashq::cuda {

void embedding(const void* table, DType dtype, int64_t table_rows, const int32_t* ids, float* out, int64_t rows,
               int64_t dim, DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
