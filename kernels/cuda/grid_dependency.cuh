// The device half of programmatic dependent launch (kernel_launch.h). Launched without the
// attribute, or compiled for an architecture before sm_90, both instructions do nothing, so
// every kernel of this folder calls them unconditionally.
#pragma once

namespace flashq::cuda {

// Returns once the previous kernel in the stream has finished and its writes are visible.
// Before it a kernel may read only what no kernel writes (weights); it must not read or write
// anything a previous kernel writes or reads.
__device__ inline void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel in the stream be scheduled once every block of this one has called it
// (or exited): its blocks take the room this kernel's finishing blocks leave, and wait there.
__device__ inline void let_next_grid_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// What a kernel does first. Allowing the next kernel only after the wait keeps at most two
// grids resident: the one running and the next one waiting for it.
__device__ inline void begin_after_previous_grid() {
  wait_for_previous_grid();
  let_next_grid_start();
}

}  // namespace flashq::cuda
