#include "kernels/backend_factory.h"

#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "shared/error.h"

namespace flashq {

std::unique_ptr<Backend> make_backend(std::string_view device) {
  if (device == "cpu") return make_cpu_backend();
  if (device == "auto") return cuda_device_count() > 0 ? make_cuda_backend() : make_cpu_backend();
  if (device == "cuda") {
    if (cuda_device_count() == 0) {
      throw Error(ErrorCode::kUnsupported, "--device cuda: no CUDA device is available to this build");
    }
    return make_cuda_backend();
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown device '" + std::string(device) + "' (cpu, cuda or auto)");
}

}  // namespace flashq
