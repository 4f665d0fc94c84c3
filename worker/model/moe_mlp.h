// The mixture-of-experts MLP of the families that have one (Qwen3-MoE's sparse block, gpt-oss's
// MLP; docs/models.md): a router that picks each row's experts and their weights, the experts'
// products, and their weighted sum, all as backend ops (kernels/moe.h), so each expert's weights
// are read once per pass for every row routed to it. How the family routes (softmax then top-k,
// or top-k then softmax), activates (SwiGLU or gpt-oss's clamped variant) and stores its experts
// (a tensor per expert, or every expert stacked in MXFP4) are options of its config (MoeConfig).
#pragma once

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"
#include "worker/model/workspace.h"

namespace flashq {

struct MoeMlp {
  LinearWeight router;                 // [E, H], with a bias where the family has one
  std::vector<ExpertWeights> experts;  // [E], one layout for all
  // The shared expert, when the family has one (MoeConfig::shared_expert_intermediate_size):
  // a SwiGLU MLP on every row, times sigmoid(shared_expert_gate . x) ([1, H]).
  Tensor shared_gate_proj, shared_up_proj, shared_down_proj, shared_expert_gate;
};

// The MLP's tensors under `prefix` (e.g. "model.layers.3.") in the layout config.moe.layout names.
// kNotFound for a tensor missing, kBadCheckpoint for one of the wrong shape or dtype.
MoeMlp load_moe_mlp(const WeightStore& weights, const std::string& prefix, const ModelConfig& config, Backend& backend);

// out[M, H] = the MLP of `normed` rows.
void run_moe_mlp(Backend& backend, Workspace& workspace, const MoeMlp& mlp, const ModelConfig& config,
                 const Tensor& normed, Tensor& out);

}  // namespace flashq
