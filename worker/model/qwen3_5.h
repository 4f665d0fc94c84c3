// The Qwen3.5 and Qwen3.6 dense family (docs/models.md): model_type qwen3_5 (the multimodal
// checkpoints' composite config, its language model in text_config) or qwen3_5_text,
// Qwen3_5ForConditionalGeneration / Qwen3_5ForCausalLM, with Hugging Face's Qwen3_5TextConfig
// defaults. A hybrid: Gated DeltaNet layers with Qwen3.5's four input projections, every fourth
// layer gated full attention, dense SwiGLU MLPs. The decoder model (decoder_model.h) runs it.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily qwen3_5_family();

}  // namespace flashq
