// How many CUDA devices this process can use. Compiled only when nvcc is found.
#include <cuda_runtime.h>

#include "kernels/backend_factory.h"

namespace flashq {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

}  // namespace flashq
