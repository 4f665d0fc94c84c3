// The CUDA backend's device context: its stream, cuBLAS handle and the report kernels write
// errors to. Shared by the backend and by every allocation's deleter, and destroyed after the
// last of them, so tensors may outlive the backend object.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_error.h"

namespace flashq::cuda {

class DeviceContext {
 public:
  // Device 0, a non-blocking stream, the memory pool keeping what is freed, cuBLAS on the stream.
  DeviceContext();
  ~DeviceContext();

  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  DeviceErrorReport* report() const { return report_; }
  const std::string& device_name() const { return device_name_; }

  // Waits for everything launched so far; throws what a kernel reported, or a fault.
  void synchronize();

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceErrorReport* report_ = nullptr;
  DeviceErrorReport* report_host_ = nullptr;
  std::string device_name_;
};

}  // namespace flashq::cuda
