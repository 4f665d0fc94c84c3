// The Llama family (Llama 3.x; docs/models.md): model_type llama, LlamaForCausalLM, with Hugging
// Face's LlamaConfig defaults. No q/k norm; optional attention and MLP biases; RoPE scaling of
// kind linear or llama3. The decoder model (decoder_model.h) runs it.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily llama_family();

}  // namespace flashq
