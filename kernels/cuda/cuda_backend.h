// The CUDA backend: every Backend op on one GPU (device 0 of what CUDA_VISIBLE_DEVICES shows),
// launched in order on one stream the backend owns. Declared without CUDA headers so the
// factory and builds without nvcc (kernels/cpu/no_cuda.cpp) can name it.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace flashq {

// kUnsupported when this build has no CUDA or no device can be opened.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace flashq
