// The Qwen3.5 and Qwen3.6 mixture-of-experts family (Qwen3.5-35B-A3B, Qwen3.6-35B-A3B, ...;
// docs/models.md): model_type qwen3_5_moe (composite, text_config) or qwen3_5_moe_text. Qwen3.5's
// hybrid layers with a sparse block on every layer: experts stored fused (gate_up_proj, down_proj),
// routed by a softmax then top-k always renormalised, plus the shared expert and its sigmoid gate.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily qwen3_5_moe_family();

}  // namespace flashq
