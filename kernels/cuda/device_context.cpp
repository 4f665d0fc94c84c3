#include "kernels/cuda/device_context.h"

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "shared/error.h"

namespace flashq::cuda {

DeviceContext::DeviceContext() {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  // Freed blocks stay in the pool for the next allocation instead of going back to the driver.
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  uint64_t keep_all = UINT64_MAX;
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all), "cudaMemPoolSetAttribute");
  check_cublas(cublasCreate(&cublas_), "cublasCreate");
  check_cublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
  check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&report_), sizeof(DeviceErrorReport), stream_),
             "cudaMallocAsync (error report)");
  check_cuda(cudaMemsetAsync(report_, 0, sizeof(DeviceErrorReport), stream_), "cudaMemsetAsync");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&report_host_), sizeof(DeviceErrorReport)), "cudaMallocHost");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  device_name_ = properties.name;
}

DeviceContext::~DeviceContext() {
  // Errors here cannot be reported (destructors do not throw) and mean the process is ending.
  cudaStreamSynchronize(stream_);
  cudaFreeAsync(report_, stream_);
  cudaFreeHost(report_host_);
  cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
}

void DeviceContext::synchronize() {
  check_cuda(cudaMemcpyAsync(report_host_, report_, sizeof(DeviceErrorReport), cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpyAsync (error report)");
  check_cuda(cudaStreamSynchronize(stream_), "a kernel failed (cudaStreamSynchronize)");
  const DeviceErrorReport found = *report_host_;
  if (found.kind == kNoDeviceError) return;
  check_cuda(cudaMemsetAsync(report_, 0, sizeof(DeviceErrorReport), stream_), "cudaMemsetAsync");
  if (found.kind == kTokenIdOutsideTable) {
    throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(found.value) +
                                                 " is outside the embedding table of " + std::to_string(found.limit) +
                                                 " rows");
  }
  if (found.kind == kGatherRowOutsideSource) {
    throw Error(ErrorCode::kInternal, "cuda backend: a row gathered from " + std::to_string(found.value) +
                                          ", outside the " + std::to_string(found.limit) + " rows of its source");
  }
  if (found.kind == kExpertIdOutsideRange) {
    throw Error(ErrorCode::kInternal, "cuda backend: moe_experts: expert id " + std::to_string(found.value) +
                                          " outside [0, " + std::to_string(found.limit) + ")");
  }
  if (found.kind == kBlockIdOutsideStore) {
    throw Error(ErrorCode::kInternal, "cuda backend: attention block id " + std::to_string(found.value) +
                                          " outside the store of " + std::to_string(found.limit) + " blocks");
  }
  if (found.kind == kKeyCountBeyondBlockTable) {
    throw Error(ErrorCode::kInternal, "cuda backend: attention key count " + std::to_string(found.value) +
                                          " beyond the block table's " + std::to_string(found.limit) + " positions");
  }
  if (found.kind == kStoreRowOutsideCache) {
    throw Error(ErrorCode::kInternal, "cuda backend: a row stored at " + std::to_string(found.value) +
                                          ", outside the " + std::to_string(found.limit) + " rows of its cache");
  }
  throw Error(ErrorCode::kInternal, "cuda backend: attention key count " + std::to_string(found.value) +
                                        " beyond the " + std::to_string(found.limit) + " keys");
}

}  // namespace flashq::cuda
