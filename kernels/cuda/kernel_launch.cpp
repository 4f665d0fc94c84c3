// The process-wide switch of kernel_launch.h.
#include <atomic>

#include "kernels/backend_factory.h"
#include "kernels/cuda/kernel_launch.h"

namespace flashq {
namespace {

std::atomic<bool> programmatic{false};

}  // namespace

void set_programmatic_launches(bool on) { programmatic.store(on, std::memory_order_relaxed); }

namespace cuda {

bool programmatic_launches() { return programmatic.load(std::memory_order_relaxed); }

}  // namespace cuda
}  // namespace flashq
