// Built instead of kernels/cuda when nvcc is not available.
#include "kernels/backend_factory.h"
#include "kernels/cuda/cuda_backend.h"
#include "shared/error.h"

namespace flashq {

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend() {
  throw Error(ErrorCode::kUnsupported, "this build has no CUDA backend (nvcc was not found when it was configured)");
}

void set_programmatic_launches(bool) {}

}  // namespace flashq
