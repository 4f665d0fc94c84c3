// Which kernel multiplies activations by bf16 weights on this CPU, chosen once at run time from
// the CPU's features, so that one x86-64-v3 binary takes the widest path the host has
// (docs/decisions.md, "bf16 weights on the CPU: AVX-512 paths chosen at run time"):
//
//   avx2              float32 FMAs on 8 lanes (kernels/cpu/matmul.cpp), and OpenBLAS sgemm for
//                     passes of more than 128 rows: the x86-64-v3 baseline.
//   avx512            float32 FMAs on 16 lanes, bf16 weights widened in registers: the default
//                     where AVX-512 is present.
//   avx512bf16        vdpbf16ps (AVX512_BF16): bf16 weights as stored times activations split
//                     into two bf16 terms (x = hi + lo, |x - hi - lo| <= 2^-18 |x|), float32
//                     sums. As fast as avx512 where measured and less exact, so only on request.
//   avx512bf16-round  vdpbf16ps on activations rounded to bf16 once (relative error up to 2^-9
//                     each): twice the products per instruction, but not float32 accuracy, which
//                     the CPU backend, the reference of the others, keeps. Only on request.
//
// FLASHQ_CPU_MATMUL=<name> forces a path (an unsupported or unknown one is a typed error at first
// use); set_matmul_path does the same from code (the op harness, flashq-bench).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashq::cpu {

enum class MatmulPath { kAvx2, kAvx512, kAvx512Bf16, kAvx512Bf16Round };

std::string_view matmul_path_name(MatmulPath path);
// Every path, the baseline first.
const std::vector<MatmulPath>& all_matmul_paths();
// Empty if this CPU (and OS) can run `path`; else why not, e.g. "no AVX512_BF16".
std::string matmul_path_unsupported(MatmulPath path);
// The path in use: the one set or forced, else avx512 where the CPU has AVX-512, else avx2.
MatmulPath matmul_path();
// Throws kInvalidArgument for a path this CPU cannot run.
void set_matmul_path(MatmulPath path);
// Parses a FLASHQ_CPU_MATMUL value; throws kInvalidArgument for an unknown name.
MatmulPath parse_matmul_path(std::string_view name);

}  // namespace flashq::cpu
