// The CPU's arithmetic peak, measured: the clock (a chain of dependent integer adds, one per
// cycle) and how many float32 FMAs (8 and 16 lanes) and bf16 dot products (vdpbf16ps, 32 products)
// one core issues per cycle, from independent chains. The floor that docs/perf.md holds the
// matmul paths against: cores x clock x products per cycle.
#pragma once

#include <nlohmann/json.hpp>

namespace flashq {

// One JSON object: ghz, and per instruction kind instructions and multiply-adds per cycle per
// core (AVX-512 kinds only where the CPU has them), and the peaks over `cores` in GFLOP/s.
nlohmann::json measure_cpu_peak(int cores);

}  // namespace flashq
