#include "tools/flashq_model/make_tiny.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tools/flashq_model/random_weights.h"
#include "tools/flashq_model/tiny_tokenizer.h"
#include "worker/model/safetensors.h"

namespace flashq {
namespace {

void validate(const TinyModelSpec& s) {
  auto fail = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "make-tiny: " + what); };
  for (int64_t v : {s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, s.inter, s.vocab, s.max_position}) {
    if (v <= 0) fail("every size must be positive");
  }
  if (s.heads % s.kv_heads != 0) fail("--kv-heads must divide --heads");
  if (s.head_dim % 2 != 0) fail("--head-dim must be even");
  if (s.vocab < 300) fail("--vocab must be at least 300 (256 byte tokens, merges and special tokens)");
}

std::string dtype_torch_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    default: return "bfloat16";
  }
}

nlohmann::json model_config_json(const TinyModelSpec& s, const TinyTokenizerIds& ids) {
  return {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", ids.endoftext},
      {"eos_token_id", ids.im_end},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.inter},
      {"max_position_embeddings", s.max_position},
      {"max_window_layers", s.layers},
      {"model_type", "qwen3"},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"rms_norm_eps", 1e-6},
      {"rope_scaling", nullptr},
      {"rope_theta", s.rope_theta},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", s.tie_embeddings},
      {"torch_dtype", dtype_torch_name(s.dtype)},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", s.vocab},
  };
}

}  // namespace

TinyModelSpec preset_spec(const std::string& name) {
  TinyModelSpec s;
  s.head_dim = 128;
  s.vocab = 151936;
  s.max_position = 40960;
  s.dtype = DType::kBF16;
  if (name == "qwen3-0.6b") {
    s.hidden = 1024, s.inter = 3072, s.layers = 28, s.heads = 16, s.kv_heads = 8, s.tie_embeddings = true;
  } else if (name == "qwen3-4b") {
    s.hidden = 2560, s.inter = 9728, s.layers = 36, s.heads = 32, s.kv_heads = 8, s.tie_embeddings = true;
  } else if (name == "qwen3-8b") {
    s.hidden = 4096, s.inter = 12288, s.layers = 36, s.heads = 32, s.kv_heads = 8, s.tie_embeddings = false;
  } else {
    throw Error(ErrorCode::kInvalidArgument, "unknown preset '" + name + "' (qwen3-0.6b, qwen3-4b, qwen3-8b)");
  }
  return s;
}

void write_tiny_model(const TinyModelSpec& s, const std::filesystem::path& out) {
  validate(s);
  std::filesystem::create_directories(out);
  const TinyTokenizerIds ids = write_tiny_tokenizer(out, static_cast<int32_t>(std::min<int64_t>(s.vocab, 4096)));

  RandomWeights random(s.seed);
  SafetensorsWriter writer;
  // Matrices ~ U(-a, a) with variance 1/in, so activations keep unit scale through the layers;
  // norm weights near 1 but not equal, so a missing or misplaced norm changes the logits.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    const float spread = std::sqrt(3.0f / static_cast<float>(cols));
    writer.add(name, s.dtype, {rows, cols}, random.fill(s.dtype, rows * cols, 0.0f, spread));
  };
  auto norm = [&](const std::string& name, int64_t size) {
    writer.add(name, s.dtype, {size}, random.fill(s.dtype, size, 1.0f, 0.25f));
  };
  writer.add("model.embed_tokens.weight", s.dtype, {s.vocab, s.hidden},
             random.fill(s.dtype, s.vocab * s.hidden, 0.0f, 1.0f));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    norm(p + "input_layernorm.weight", s.hidden);
    matrix(p + "self_attn.q_proj.weight", s.heads * s.head_dim, s.hidden);
    matrix(p + "self_attn.k_proj.weight", s.kv_heads * s.head_dim, s.hidden);
    matrix(p + "self_attn.v_proj.weight", s.kv_heads * s.head_dim, s.hidden);
    matrix(p + "self_attn.o_proj.weight", s.hidden, s.heads * s.head_dim);
    norm(p + "self_attn.q_norm.weight", s.head_dim);
    norm(p + "self_attn.k_norm.weight", s.head_dim);
    norm(p + "post_attention_layernorm.weight", s.hidden);
    matrix(p + "mlp.gate_proj.weight", s.inter, s.hidden);
    matrix(p + "mlp.up_proj.weight", s.inter, s.hidden);
    matrix(p + "mlp.down_proj.weight", s.hidden, s.inter);
  }
  norm("model.norm.weight", s.hidden);
  if (!s.tie_embeddings) matrix("lm_head.weight", s.vocab, s.hidden);
  writer.set_metadata("format", "pt");
  writer.write(out / "model.safetensors");

  write_text_file(out / "config.json", model_config_json(s, ids).dump(2) + "\n");
  nlohmann::json generation = {{"bos_token_id", ids.endoftext},
                               {"eos_token_id", {ids.im_end, ids.endoftext}},
                               {"do_sample", false}};
  write_text_file(out / "generation_config.json", generation.dump(2) + "\n");
}

}  // namespace flashq
