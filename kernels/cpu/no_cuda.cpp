// Built instead of kernels/cuda when nvcc is not available.
#include "kernels/backend_factory.h"

namespace flashq {

int cuda_device_count() { return 0; }

}  // namespace flashq
