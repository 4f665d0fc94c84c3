// Choosing a backend by name: "cpu", "cuda" or "auto" (CUDA when built and a GPU is present).
#pragma once

#include <memory>
#include <string_view>

#include "kernels/backend.h"

namespace flashq {

std::unique_ptr<Backend> make_backend(std::string_view device);

// Number of CUDA devices usable by this build (0 when built without CUDA or without a GPU).
int cuda_device_count();

// Process-wide: kernels launched from now on may overlap the previous kernel's tail
// (programmatic dependent launch, kernels/cuda/kernel_launch.h); a CUDA graph keeps the setting
// it was captured with. Off by default; nothing to do in a build without CUDA.
void set_programmatic_launches(bool on);

}  // namespace flashq
