#include "tools/flashq_model/hybrid_tiny.h"

namespace flashq {
namespace {

std::string torch_dtype(DType dtype) {
  return dtype == DType::kF32 ? "float32" : dtype == DType::kF16 ? "float16" : "bfloat16";
}

// The linear layers' input projections: Qwen3-Next's grouped per key head, else Qwen3.5's four.
void add_linear_attention(RandomTensors& t, const std::string& p, const ModelConfig& c) {
  const LinearAttentionConfig& l = c.linear_attention;
  const int64_t hidden = c.hidden_size, kd = l.key_dim(), vd = l.value_dim(), heads = l.value_heads;
  const std::string a = p + "linear_attn.";
  if (l.grouped_projection) {
    t.matrix(a + "in_proj_qkvz.weight", 2 * kd + 2 * vd, hidden);
    t.matrix(a + "in_proj_ba.weight", 2 * heads, hidden);
  } else {
    t.matrix(a + "in_proj_qkv.weight", 2 * kd + vd, hidden);
    t.matrix(a + "in_proj_z.weight", vd, hidden);
    t.matrix(a + "in_proj_b.weight", heads, hidden);
    t.matrix(a + "in_proj_a.weight", heads, hidden);
  }
  const int64_t taps = l.conv_kernel;
  t.writer.add(a + "conv1d.weight", t.dtype, {2 * kd + vd, 1, taps},
               t.random.fill(t.dtype, (2 * kd + vd) * taps, 0.0f, 1.0f / static_cast<float>(taps)));
  // Decay rates like trained ones: A = exp(A_log) in about [0.5, 4].
  t.writer.add(a + "A_log", t.dtype, {heads}, t.random.fill(t.dtype, heads, 0.35f, 0.7f));
  t.writer.add(a + "dt_bias", t.dtype, {heads}, t.random.fill(t.dtype, heads, 0.0f, 0.5f));
  t.norm(a + "norm.weight", l.value_head_dim);
  t.matrix(a + "out_proj.weight", hidden, vd);
}

void add_gated_attention(RandomTensors& t, const std::string& p, const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  t.matrix(p + "self_attn.q_proj.weight", 2 * q, hidden);  // per head the query, then the gate
  t.matrix(p + "self_attn.k_proj.weight", kv, hidden);
  t.matrix(p + "self_attn.v_proj.weight", kv, hidden);
  t.matrix(p + "self_attn.o_proj.weight", hidden, q);
  t.zero_centred_norm(p + "self_attn.q_norm.weight", c.head_dim);
  t.zero_centred_norm(p + "self_attn.k_norm.weight", c.head_dim);
}

void add_sparse_block(RandomTensors& t, const std::string& p, const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size, experts = c.moe.num_experts;
  t.matrix(p + "mlp.gate.weight", experts, hidden);
  if (c.moe.layout == ExpertLayout::kFusedGateUp) {
    const float gate_up_spread = std::sqrt(3.0f / static_cast<float>(hidden));
    const float down_spread = std::sqrt(3.0f / static_cast<float>(inter));
    t.writer.add(p + "mlp.experts.gate_up_proj", t.dtype, {experts, 2 * inter, hidden},
                 t.random.fill(t.dtype, experts * 2 * inter * hidden, 0.0f, gate_up_spread));
    t.writer.add(p + "mlp.experts.down_proj", t.dtype, {experts, hidden, inter},
                 t.random.fill(t.dtype, experts * hidden * inter, 0.0f, down_spread));
  } else {
    for (int64_t e = 0; e < experts; ++e) {
      const std::string expert = p + "mlp.experts." + std::to_string(e) + ".";
      t.matrix(expert + "gate_proj.weight", inter, hidden);
      t.matrix(expert + "up_proj.weight", inter, hidden);
      t.matrix(expert + "down_proj.weight", hidden, inter);
    }
  }
  const int64_t shared = c.moe.shared_expert_intermediate_size;
  t.matrix(p + "mlp.shared_expert.gate_proj.weight", shared, hidden);
  t.matrix(p + "mlp.shared_expert.up_proj.weight", shared, hidden);
  t.matrix(p + "mlp.shared_expert.down_proj.weight", hidden, shared);
  t.matrix(p + "mlp.shared_expert_gate.weight", 1, hidden);
}

}  // namespace

bool is_hybrid_family(const std::string& family) {
  return family == "qwen3_5" || family == "qwen3_5_moe" || family == "qwen3_next";
}

std::string hybrid_weight_prefix(const TinyModelSpec& s) { return s.multimodal ? "model.language_model." : "model."; }

nlohmann::json hybrid_config_json(const TinyModelSpec& s, int32_t bos, const nlohmann::json& eos) {
  nlohmann::json layer_types = nlohmann::json::array();
  for (int64_t i = 0; i < s.layers; ++i) {
    layer_types.push_back((i + 1) % s.full_attention_interval == 0 ? "full_attention" : "linear_attention");
  }
  nlohmann::json text = {{"attention_bias", false},
                         {"attention_dropout", 0.0},
                         {"bos_token_id", bos},
                         {"eos_token_id", eos},
                         {"full_attention_interval", s.full_attention_interval},
                         {"head_dim", s.head_dim},
                         {"hidden_act", "silu"},
                         {"hidden_size", s.hidden},
                         {"initializer_range", 0.02},
                         {"layer_types", layer_types},
                         {"linear_conv_kernel_dim", s.conv_kernel},
                         {"linear_key_head_dim", s.linear_key_dim},
                         {"linear_num_key_heads", s.linear_key_heads},
                         {"linear_num_value_heads", s.linear_value_heads},
                         {"linear_value_head_dim", s.linear_value_dim},
                         {"max_position_embeddings", s.max_position},
                         {"num_attention_heads", s.heads},
                         {"num_hidden_layers", s.layers},
                         {"num_key_value_heads", s.kv_heads},
                         {"rms_norm_eps", 1e-6},
                         {"tie_word_embeddings", s.tie_embeddings},
                         {"torch_dtype", torch_dtype(s.dtype)},
                         {"use_cache", true},
                         {"vocab_size", s.vocab}};
  const bool moe = s.family != "qwen3_5";
  if (moe) {
    text.update({{"num_experts", s.experts},
                 {"num_experts_per_tok", s.experts_per_token},
                 {"moe_intermediate_size", s.expert_inter},
                 {"shared_expert_intermediate_size", s.shared_expert_inter},
                 {"router_aux_loss_coef", 0.001}});
  }
  if (s.family == "qwen3_next") {
    text.update({{"architectures", {"Qwen3NextForCausalLM"}},
                 {"model_type", "qwen3_next"},
                 {"intermediate_size", s.inter},
                 {"rope_theta", s.rope_theta},
                 {"partial_rotary_factor", s.partial_rotary_factor},
                 {"rope_scaling", nullptr},
                 {"decoder_sparse_step", s.sparse_step},
                 {"mlp_only_layers", s.dense_layers},
                 {"norm_topk_prob", s.norm_topk_prob}});
    return text;
  }
  text["attn_output_gate"] = true;
  text["mtp_num_hidden_layers"] = 1;
  text["rope_parameters"] = {{"mrope_interleaved", true},
                             {"mrope_section", {11, 11, 10}},
                             {"rope_type", "default"},
                             {"rope_theta", s.rope_theta},
                             {"partial_rotary_factor", s.partial_rotary_factor}};
  if (!moe) text["intermediate_size"] = s.inter;
  text["architectures"] = {moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"};
  text["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
  if (!s.multimodal) return text;
  text.erase("architectures");
  return {{"architectures", {moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
          {"model_type", moe ? "qwen3_5_moe" : "qwen3_5"},
          {"tie_word_embeddings", s.tie_embeddings},
          {"text_config", text},
          {"vision_config", {{"depth", 1}, {"hidden_size", 16}, {"out_hidden_size", s.hidden}}}};
}

void add_hybrid_layer(RandomTensors& t, const std::string& p, const ModelConfig& c, int64_t layer) {
  t.zero_centred_norm(p + "input_layernorm.weight", c.hidden_size);
  t.zero_centred_norm(p + "post_attention_layernorm.weight", c.hidden_size);
  if (c.linear_attention.linear_layer(layer)) {
    add_linear_attention(t, p, c);
  } else {
    add_gated_attention(t, p, c);
  }
  if (c.moe.sparse_layer(layer)) return add_sparse_block(t, p, c);
  t.matrix(p + "mlp.gate_proj.weight", c.intermediate_size, c.hidden_size);
  t.matrix(p + "mlp.up_proj.weight", c.intermediate_size, c.hidden_size);
  t.matrix(p + "mlp.down_proj.weight", c.hidden_size, c.intermediate_size);
}

void add_multimodal_extras(RandomTensors& t, const ModelConfig& c) {
  t.matrix("model.visual.merger.linear_fc2.weight", c.hidden_size, 16);
  t.matrix("mtp.fc.weight", c.hidden_size, 2 * c.hidden_size);
}

nlohmann::json drafter_config_of_hybrid(const nlohmann::json& target_config) {
  nlohmann::json config = target_config.contains("text_config") ? target_config["text_config"] : target_config;
  const ModelConfig target = parse_model_config(target_config, "config.json");
  for (const char* key :
       {"layer_types", "full_attention_interval", "linear_conv_kernel_dim", "linear_key_head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim", "attn_output_gate",
        "mtp_num_hidden_layers", "rope_parameters", "partial_rotary_factor", "shared_expert_intermediate_size"}) {
    config.erase(key);
  }
  config["model_type"] = "qwen3";
  config["rope_theta"] = target.rope_theta;
  config["rope_scaling"] = nullptr;
  config["tie_word_embeddings"] = target.tie_word_embeddings;
  if (!config.contains("intermediate_size")) config["intermediate_size"] = 2 * target.hidden_size;
  return config;
}

}  // namespace flashq
