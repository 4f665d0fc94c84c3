// The Qwen3 dense family (docs/dflash.md §1): model_type qwen3, Qwen3ForCausalLM, with Hugging
// Face's Qwen3Config defaults. Its layers norm each q and k head; it has no MLP biases. The
// decoder model (decoder_model.h) runs it.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily qwen3_family();

}  // namespace flashq
