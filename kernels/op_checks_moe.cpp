// The checks of the mixture-of-experts ops and of MXFP4 products (kernels/op_checks.h), shared by
// every backend: what each op takes is refused before anything runs. Expert ids are read only
// when the op runs, so their range is each backend's to check then.
#include <string>

#include "kernels/op_checks.h"

namespace flashq {
namespace {

std::string shapes(const Tensor& a, const Tensor& b) {
  return shape_to_string(a.shape()) + " and " + shape_to_string(b.shape());
}

}  // namespace

void OpChecks::matmul_mxfp4(const Tensor& x, const Tensor& blocks, const Tensor& scales, const Tensor& y) const {
  f32(x, "matmul_mxfp4 x");
  f32(y, "matmul_mxfp4 y");
  on_device(blocks, "matmul_mxfp4 blocks");
  on_device(scales, "matmul_mxfp4 scales");
  require(blocks.dtype() == DType::kU8 && scales.dtype() == DType::kU8,
          "matmul_mxfp4: blocks and scales must be u8 tensors");
  const int64_t k = x.cols();
  require(k % kMxfp4BlockSize == 0, [&] {
    return "matmul_mxfp4: K (" + std::to_string(k) + ") must be a multiple of " + std::to_string(kMxfp4BlockSize);
  });
  require(blocks.rank() == 2 && scales.rank() == 2 && blocks.dim(1) * 2 == k && scales.dim(0) == blocks.dim(0) &&
              scales.dim(1) * kMxfp4BlockSize == k && y.rows() == x.rows() && y.cols() == blocks.dim(0),
          [&] {
            return "matmul_mxfp4 shapes x" + shape_to_string(x.shape()) + " blocks" + shape_to_string(blocks.shape()) +
                   " scales" + shape_to_string(scales.shape()) + " y" + shape_to_string(y.shape()) +
                   " (blocks [N, K / 2], scales [N, K / 32])";
          });
}

void OpChecks::linear_weight(const LinearWeight& w, const std::string& name) const {
  const std::string weight_name = name + " weight";
  if (w.mxfp4()) {
    on_device(w.weight, weight_name.c_str());
    on_device(w.scales, (name + " scales").c_str());
    require(w.weight.dtype() == DType::kU8 && w.scales.dtype() == DType::kU8,
            [&] { return name + ": MXFP4 blocks and scales must be u8 tensors"; });
    require(w.weight.rank() == 2 && w.scales.rank() == 2 && w.scales.dim(0) == w.weight.dim(0) &&
                w.scales.dim(1) * kMxfp4BlockSize == w.weight.dim(1) * 2,
            [&] {
              return name + ": MXFP4 blocks " + shape_to_string(w.weight.shape()) + " and scales " +
                     shape_to_string(w.scales.shape()) + " must be [out, in / 2] and [out, in / 32]";
            });
  } else {
    weight(w.weight, weight_name.c_str());
    require(w.weight.rank() == 2, [&] { return name + ": the weight must be [out, in]"; });
  }
  if (w.bias.defined()) {
    weight(w.bias, (name + " bias").c_str());
    require(w.bias.rank() == 1 && w.bias.dim(0) == w.out_features(),
            [&] { return name + ": bias " + shape_to_string(w.bias.shape()) + " must be [out]"; });
  }
}

void OpChecks::linear(const Tensor& x, const LinearWeight& w, const Tensor& y) const {
  linear_weight(w, "linear");
  f32(x, "linear x");
  f32(y, "linear y");
  require(x.cols() == w.in_features() && y.rows() == x.rows() && y.cols() == w.out_features(), [&] {
    return "linear shapes x" + shape_to_string(x.shape()) + " y" + shape_to_string(y.shape()) + " for a weight of " +
           std::to_string(w.out_features()) + " x " + std::to_string(w.in_features());
  });
}

void OpChecks::moe_route(const Tensor& logits, const MoeRouting& routing, const Tensor& expert_ids,
                         const Tensor& expert_weights) const {
  f32(logits, "moe_route logits");
  on_device(expert_ids, "moe_route expert_ids");
  f32(expert_weights, "moe_route expert_weights");
  require(logits.rank() == 2 && logits.dim(1) > 0, "moe_route: logits must be [rows, experts]");
  const int64_t experts = logits.dim(1);
  require(routing.top_k >= 1 && routing.top_k <= experts, [&] {
    return "moe_route: top_k " + std::to_string(routing.top_k) + " outside [1, " + std::to_string(experts) + "]";
  });
  require(!routing.normalize_top_k || routing.order == RoutingOrder::kSoftmaxThenTopK,
          "moe_route: normalize_top_k applies to softmax-then-top-k routing only");
  require(expert_ids.dtype() == DType::kI32, "moe_route: expert_ids must be int32");
  const Shape want{logits.dim(0), routing.top_k};
  require(expert_ids.shape() == want && expert_weights.shape() == want, [&] {
    return "moe_route: expert_ids and expert_weights " + shapes(expert_ids, expert_weights) + " must be " +
           shape_to_string(want);
  });
}

int64_t OpChecks::moe_experts(const Tensor& x, const Tensor& expert_ids, const Tensor& expert_weights,
                              std::span<const ExpertWeights> experts, const ExpertActivation& activation,
                              const Tensor& out) const {
  f32(x, "moe_experts x");
  f32(out, "moe_experts out");
  on_device(expert_ids, "moe_experts expert_ids");
  f32(expert_weights, "moe_experts expert_weights");
  require(x.rank() == 2 && out.shape() == x.shape(), [&] { return "moe_experts: x and out " + shapes(x, out); });
  require(expert_ids.dtype() == DType::kI32, "moe_experts: expert_ids must be int32");
  require(expert_ids.rank() == 2 && expert_ids.dim(0) == x.dim(0) && expert_weights.shape() == expert_ids.shape(), [&] {
    return "moe_experts: expert_ids and expert_weights " + shapes(expert_ids, expert_weights) +
           " must both be [rows of x, k]";
  });
  require(expert_ids.dim(1) >= 1, "moe_experts: every row needs at least one expert (k >= 1)");
  require(!experts.empty(), "moe_experts: no experts");
  require(activation.kind == ExpertActivationKind::kSwiglu || activation.limit > 0.0f,
          "moe_experts: the clamped SwiGLU needs a positive limit");
  const int64_t hidden = x.dim(1);
  const bool interleaved = experts.front().interleaved();
  int64_t intermediate = 0;  // from the first expert's gate (or gate_up), once it is checked
  for (size_t e = 0; e < experts.size(); ++e) {
    const ExpertWeights& expert = experts[e];
    const std::string name = "moe_experts expert " + std::to_string(e);
    require(expert.interleaved() == interleaved &&
                (interleaved ? !expert.gate.weight.defined() && !expert.up.weight.defined()
                             : expert.gate.weight.defined() && expert.up.weight.defined()),
            [&] { return name + ": every expert needs gate and up, or gate_up alone, as the first has"; });
    if (e == 0) {
      linear_weight(interleaved ? expert.gate_up : expert.gate, name + (interleaved ? " gate_up" : " gate"));
      intermediate = interleaved ? expert.gate_up.out_features() / 2 : expert.gate.out_features();
      require(intermediate > 0 && (!interleaved || expert.gate_up.out_features() % 2 == 0),
              "moe_experts: the first expert's gate must have rows (gate_up an even number of them)");
    }
    auto require_shape = [&](const LinearWeight& w, const char* layer, int64_t out_features, int64_t in_features) {
      require(w.weight.defined(), [&] { return name + ": no " + layer + " weight"; });
      linear_weight(w, name + " " + layer);
      require(w.out_features() == out_features && w.in_features() == in_features, [&] {
        return name + " " + layer + ": " + std::to_string(w.out_features()) + " x " + std::to_string(w.in_features()) +
               ", want " + std::to_string(out_features) + " x " + std::to_string(in_features);
      });
    };
    if (interleaved) {
      require_shape(expert.gate_up, "gate_up", 2 * intermediate, hidden);
    } else {
      require_shape(expert.gate, "gate", intermediate, hidden);
      require_shape(expert.up, "up", intermediate, hidden);
    }
    require_shape(expert.down, "down", hidden, intermediate);
  }
  return intermediate;
}

}  // namespace flashq
