// `flashq-bench kernels`: microbenchmarks of the CPU and CUDA kernels on real shapes, reporting achieved
// GB/s (weight-streaming cases) and GFLOP/s (compute-bound cases).
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_kernel_bench(CLI::App& app);

}  // namespace flashq
