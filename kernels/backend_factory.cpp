#include "kernels/backend_factory.h"

#include <string>

#include "shared/error.h"

namespace flashq {

std::unique_ptr<Backend> make_backend(std::string_view device) {
  if (device == "cpu") return make_cpu_backend();
  if (device == "auto") {
    // The CUDA backend is not built yet (it is the CUDA issue's work); auto means CPU until then.
    return make_cpu_backend();
  }
  if (device == "cuda") {
    if (cuda_device_count() == 0) {
      throw Error(ErrorCode::kUnsupported, "--device cuda: no CUDA device is available to this build");
    }
    throw Error(ErrorCode::kUnsupported, "--device cuda: the CUDA backend is not implemented in this version");
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown device '" + std::string(device) + "' (cpu, cuda or auto)");
}

}  // namespace flashq
