#include "tools/flashq_model/make_tiny.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tools/flashq_model/random_weights.h"
#include "tools/flashq_model/tiny_tokenizer.h"
#include "worker/model/model_config.h"
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
  if (s.vocab < 301) fail("--vocab must be at least 301 (300 tokenizer ids and one padding row)");
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

// Random tensors written into a checkpoint. Matrices ~ U(-a, a) with variance 1/in, so
// activations keep unit scale through the layers; norm weights near 1 but not equal, so a
// missing or misplaced norm changes the logits.
struct RandomTensors {
  SafetensorsWriter& writer;
  RandomWeights& random;
  DType dtype;

  void matrix(const std::string& name, int64_t rows, int64_t cols) {
    const float spread = std::sqrt(3.0f / static_cast<float>(cols));
    writer.add(name, dtype, {rows, cols}, random.fill(dtype, rows * cols, 0.0f, spread));
  }
  void norm(const std::string& name, int64_t size) {
    writer.add(name, dtype, {size}, random.fill(dtype, size, 1.0f, 0.25f));
  }
  void add_layer(const std::string& p, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
                 int64_t inter) {
    norm(p + "input_layernorm.weight", hidden);
    matrix(p + "self_attn.q_proj.weight", heads * head_dim, hidden);
    matrix(p + "self_attn.k_proj.weight", kv_heads * head_dim, hidden);
    matrix(p + "self_attn.v_proj.weight", kv_heads * head_dim, hidden);
    matrix(p + "self_attn.o_proj.weight", hidden, heads * head_dim);
    norm(p + "self_attn.q_norm.weight", head_dim);
    norm(p + "self_attn.k_norm.weight", head_dim);
    norm(p + "post_attention_layernorm.weight", hidden);
    matrix(p + "mlp.gate_proj.weight", inter, hidden);
    matrix(p + "mlp.up_proj.weight", inter, hidden);
    matrix(p + "mlp.down_proj.weight", hidden, inter);
  }
};

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
  const TinyTokenizerIds ids = write_tiny_tokenizer(out, static_cast<int32_t>(std::min<int64_t>(s.vocab - 1, 4096)));
  // The last embedding row stays beyond the tokenizer, as Qwen pads its vocabulary: a drafter
  // made for this model uses it as MASK.

  RandomWeights random(s.seed);
  SafetensorsWriter writer;
  RandomTensors tensors{writer, random, s.dtype};
  writer.add("model.embed_tokens.weight", s.dtype, {s.vocab, s.hidden},
             random.fill(s.dtype, s.vocab * s.hidden, 0.0f, 1.0f));
  for (int64_t i = 0; i < s.layers; ++i) {
    tensors.add_layer("model.layers." + std::to_string(i) + ".", s.hidden, s.heads, s.kv_heads, s.head_dim, s.inter);
  }
  tensors.norm("model.norm.weight", s.hidden);
  if (!s.tie_embeddings) tensors.matrix("lm_head.weight", s.vocab, s.hidden);
  writer.set_metadata("format", "pt");
  writer.write(out / "model.safetensors");

  write_text_file(out / "config.json", model_config_json(s, ids).dump(2) + "\n");
  nlohmann::json generation = {{"bos_token_id", ids.endoftext},
                               {"eos_token_id", {ids.im_end, ids.endoftext}},
                               {"do_sample", false}};
  write_text_file(out / "generation_config.json", generation.dump(2) + "\n");
}

}  // namespace flashq

namespace flashq {

void write_tiny_drafter(const TinyDrafterSpec& spec, const std::filesystem::path& target_dir,
                        const std::filesystem::path& out) {
  const std::filesystem::path target_config_path = target_dir / "config.json";
  nlohmann::json config = read_json_file(target_config_path);
  const ModelConfig target = parse_model_config(config, target_config_path.string());
  if (spec.layers <= 0 || spec.block_size < 2) {
    throw Error(ErrorCode::kInvalidArgument, "make-tiny: a drafter needs --layers >= 1 and --block-size >= 2");
  }
  std::vector<int64_t> taps = spec.target_layer_ids;
  if (taps.empty()) {  // one tap per drafter layer, spread from the first layer to the last
    for (int64_t i = 0; i < spec.layers; ++i) {
      taps.push_back(spec.layers == 1 ? target.num_layers / 2 : i * (target.num_layers - 1) / (spec.layers - 1));
    }
  }
  for (int64_t id : taps) {
    if (id < 0 || id >= target.num_layers) throw Error(ErrorCode::kInvalidArgument, "make-tiny: tap layer out of range");
  }
  DType dtype = DType::kBF16;
  if (config.value("torch_dtype", "bfloat16") == "float32") dtype = DType::kF32;
  if (config.value("torch_dtype", "bfloat16") == "float16") dtype = DType::kF16;

  std::filesystem::create_directories(out);
  RandomWeights random(spec.seed + 0x5eed);
  SafetensorsWriter writer;
  RandomTensors tensors{writer, random, dtype};
  const int64_t hidden = target.hidden_size;
  tensors.matrix("fc.weight", hidden, static_cast<int64_t>(taps.size()) * hidden);
  tensors.norm("hidden_norm.weight", hidden);
  tensors.norm("norm.weight", hidden);
  for (int64_t i = 0; i < spec.layers; ++i) {
    tensors.add_layer("layers." + std::to_string(i) + ".", hidden, target.num_heads, target.num_kv_heads,
                      target.head_dim, target.intermediate_size);
  }
  writer.set_metadata("format", "pt");
  writer.write(out / "model.safetensors");

  config["architectures"] = {"DFlashDraftModel"};
  config["num_hidden_layers"] = spec.layers;
  config["num_target_layers"] = target.num_layers;
  config["max_window_layers"] = spec.layers;
  config["block_size"] = spec.block_size;
  config["tie_word_embeddings"] = false;
  config["dflash_config"] = {{"mask_token_id", target.vocab_size - 1}, {"target_layer_ids", taps}};
  write_text_file(out / "config.json", config.dump(2) + "\n");
}

}  // namespace flashq
