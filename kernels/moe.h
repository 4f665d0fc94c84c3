// What the mixture-of-experts ops of the backend take (kernels/backend.h: moe_route,
// moe_experts): how a router's logits choose the experts of a row and weigh them, each expert's
// linear layers, and the activation between its products.
#pragma once

#include <cstdint>

#include "kernels/linear_weight.h"

namespace flashq {

enum class RoutingOrder : uint8_t {
  kSoftmaxThenTopK,  // Qwen3-MoE: softmax over all experts, then the top k of it
  kTopKThenSoftmax,  // gpt-oss: the top k logits, then softmax over those k
};

struct MoeRouting {
  int64_t top_k = 0;
  RoutingOrder order = RoutingOrder::kSoftmaxThenTopK;
  // Qwen3-MoE's norm_topk_prob: the k weights divided by their sum. Only for kSoftmaxThenTopK
  // (after kTopKThenSoftmax they already sum to 1; asking for it there is refused).
  bool normalize_top_k = false;
};

// One expert's layers: `gate` and `up` separate, [I, H] each (Qwen3-MoE), or `gate_up` one
// [2I, H] with the two interleaved by row, row 2i the gate's row i and row 2i + 1 the up's
// (gpt-oss's gate_up_proj); `down` [H, I]. Each dense or MXFP4, each with or without a bias.
struct ExpertWeights {
  LinearWeight gate, up;
  LinearWeight gate_up;
  LinearWeight down;

  bool interleaved() const { return gate_up.weight.defined(); }
};

enum class ExpertActivationKind : uint8_t {
  kSwiglu,         // silu(gate) * up
  kClampedSwiglu,  // gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit),
                   // (u + 1) * g * sigmoid(alpha * g)
};

struct ExpertActivation {
  ExpertActivationKind kind = ExpertActivationKind::kSwiglu;
  float alpha = 1.702f, limit = 7.0f;  // kClampedSwiglu only
};

}  // namespace flashq
