// Every kernel of this folder is launched through launch_kernel, so one switch decides whether
// consecutive kernels may overlap (programmatic dependent launch, sm_90). A kernel launched that
// way may be scheduled while the one before it finishes: its blocks load what does not depend on
// that kernel (weights) and then wait for it (grid_dependency.cuh), which hides the gap between
// two kernels of a decode step. Off unless set_programmatic_launches(true) (backend_factory.h): the
// figure decides (docs/decisions.md, "Overlapped launches").
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace flashq::cuda {

bool programmatic_launches();

// kernel<<<grid, block, shared_bytes, stream>>>(args...), with the overlap attribute when the
// switch is on. A bad configuration (grid, shared memory) throws here, naming `name`; a fault
// inside the kernel surfaces at the next synchronisation (copy_to_host).
template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = programmatic_launches() ? 1 : 0;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  const cudaError_t pending = cudaGetLastError();  // also clears the launch's own error
  check_cuda(launched != cudaSuccess ? launched : pending, name);
}

}  // namespace flashq::cuda
