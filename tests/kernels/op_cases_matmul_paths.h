// The op-harness cases for the CPU matmul paths (kernels/cpu/matmul_path.h): products with bf16
// weights at the shapes where the paths' tiles, row blocks and masked tails meet, each with the
// error bound of the path's activations, and bit-for-bit checks that a row's result does not
// depend on the rows beside it. cpu_matmul_paths_test runs them on every path this CPU has.
#pragma once

#include <vector>

#include "kernels/cpu/matmul_path.h"
#include "tests/kernels/op_harness.h"

namespace flashq {

// Relative error of one activation as `path` feeds it to the products: 0 for float32
// activations, 2^-18 for two bf16 terms, 2^-9 for one (round to nearest, 8-bit significand).
double activation_rounding(cpu::MatmulPath path);

std::vector<OpCase> matmul_path_cases(cpu::MatmulPath path);

}  // namespace flashq
