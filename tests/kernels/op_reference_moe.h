// Plain references of the mixture-of-experts ops and of MXFP4 weights (kernels/backend.h,
// kernels/linear_weight.h, kernels/moe.h), written from their definitions as op_reference.h's
// are: loops over host vectors, sums and softmaxes in double, every expert of every row computed
// on its own (no grouping), independent of the kernels.
#pragma once

#include <cstdint>
#include <vector>

namespace flashq::reference {

// The value of FP4 E2M1 code `code` (0-15): sign bit 3, exponent bits 2-1 (bias 1), mantissa bit
// 0; exponent 0 is subnormal (0.5 * mantissa). So 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
double e2m1(int code);

// MXFP4 blocks [n, k / 2] (element 2i in the low nibble of byte i, 2i + 1 in the high one) and
// E8M0 scales [n, k / 32] (2^(s - 127) for the run of 32 elements) as dense [n, k].
std::vector<float> decode_mxfp4(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales, int64_t n,
                                int64_t k);

// y[m, o] = sum_i x[m, i] w[o, i] (+ bias[o]) with w dense [out, in]; `bias` empty for none.
struct DenseLinear {
  std::vector<float> w, bias;
  int64_t out = 0, in = 0;
};
std::vector<double> linear_row(const float* x, const DenseLinear& l);

// The router: per row of logits [rows, experts], the top_k experts by weight (ties to the lower
// index) and their weights. softmax_first: softmax over all experts, the top k of it, then with
// `normalize` divided by their sum (Qwen3-MoE); else the top k logits and a softmax over them
// (gpt-oss).
struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
Routing moe_route(const std::vector<float>& logits, int64_t experts, int64_t top_k, bool softmax_first, bool normalize);

// One expert: gate and up [I, H] (or gate_up [2I, H], row 2i the gate's i, 2i + 1 the up's),
// down [H, I].
struct DenseExpert {
  DenseLinear gate, up, gate_up, down;
  bool interleaved = false;
};
// silu(g) * u, or clamped: g = min(g, limit), u = clamp(u, -limit, limit),
// (u + 1) * g * sigmoid(alpha * g).
double expert_activation(double g, double u, bool clamped, double alpha, double limit);
// out[m] = sum_j weights[m, j] * down(act(gate(x[m]), up(x[m]))) of expert ids[m, j].
std::vector<float> moe_experts(const std::vector<float>& x, int64_t rows, int64_t hidden,
                               const std::vector<int32_t>& ids, const std::vector<float>& weights, int64_t top_k,
                               const std::vector<DenseExpert>& experts, bool clamped, double alpha, double limit);

}  // namespace flashq::reference
