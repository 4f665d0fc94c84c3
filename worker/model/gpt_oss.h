// The gpt-oss family (gpt-oss-20b, gpt-oss-120b): model_type gpt_oss, GptOssForCausalLM, with
// Hugging Face's GptOssConfig defaults (docs/models.md lists each detail and where it was
// verified). Its attention has biases on q/k/v/o, no q/k norm, a learned sink logit per head in
// every softmax, and alternates sliding-window (layer_types "sliding_attention", the last
// sliding_window positions) and full layers; RoPE is YaRN-scaled. Every MLP is a mixture of
// num_local_experts experts, num_experts_per_tok per token, chosen by the top logits of a router
// with bias and weighed by the softmax over those; an expert is gpt-oss's clamped SwiGLU over
// gate and up interleaved by row, its weights MXFP4 as the checkpoint stores them. The decoder
// model (decoder_model.h) runs it; the experts are worker/model/moe_mlp.h.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily gpt_oss_family();

}  // namespace flashq
