// CUDA and cuBLAS status codes turned into flashq::Error, naming the call that failed and the
// library's own message. Used by the backend and by every host launcher.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "shared/error.h"

namespace flashq::cuda {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  // Out of memory is a capacity limit of this device, not a bug of ours.
  const ErrorCode code = status == cudaErrorMemoryAllocation ? ErrorCode::kUnsupported : ErrorCode::kInternal;
  throw Error(code, std::string("CUDA ") + what + ": " + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) + ")");
}

inline void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const ErrorCode code = status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kUnsupported : ErrorCode::kInternal;
  throw Error(code, std::string("cuBLAS ") + what + ": " + cublasGetStatusName(status) + " (" +
                        cublasGetStatusString(status) + ")");
}

}  // namespace flashq::cuda
