#include "tools/flashq_model/make_tiny.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tools/flashq_model/hybrid_tiny.h"
#include "tools/flashq_model/random_tensors.h"
#include "tools/flashq_model/random_weights.h"
#include "tools/flashq_model/tiny_tokenizer.h"
#include "worker/model/drafter_config.h"
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
  if (s.family != "qwen3" && s.family != "llama" && s.family != "qwen3-moe" && s.family != "gpt-oss" &&
      !is_hybrid_family(s.family)) {
    fail("--family must be qwen3, llama, qwen3-moe, gpt-oss, qwen3_5, qwen3_5_moe or qwen3_next, got '" + s.family +
         "'");
  }
  if (is_hybrid_family(s.family) &&
      (s.linear_key_heads <= 0 || s.linear_value_heads % s.linear_key_heads != 0 || s.linear_key_dim <= 0 ||
       s.linear_value_dim <= 0 || s.full_attention_interval <= 0 || s.full_attention_interval > s.layers)) {
    fail("a hybrid model needs linear value heads a multiple of its key heads, positive sizes, and a full-attention "
         "interval of at most --layers");
  }
  if (s.multimodal && s.family != "qwen3_5" && s.family != "qwen3_5_moe") fail("--multimodal is Qwen3.5's layout");
  if (s.family != "llama" && (s.attention_bias || s.mlp_bias || s.rope_scaling_factor > 0.0)) {
    fail("biases and RoPE scaling are Llama options (--family llama)");
  }
  if (s.family == "gpt-oss" && (s.hidden % 32 != 0 || s.inter % 32 != 0 || s.sliding_window <= 0 ||
                                s.yarn_factor < 1.0 || s.swiglu_limit <= 0.0)) {
    fail(
        "gpt-oss needs --hidden and --inter multiples of 32 (MXFP4 blocks), a positive window and limit, and a "
        "YaRN factor >= 1");
  }
  if ((s.family == "qwen3-moe" || s.family == "gpt-oss" || s.family == "qwen3_5_moe" || s.family == "qwen3_next") &&
      (s.experts <= 0 || s.expert_inter <= 0 || s.sparse_step <= 0 || s.experts_per_token <= 0 ||
       s.experts_per_token > s.experts)) {
    fail(
        "experts need positive --experts, --expert-inter and a sparse step, and 1 <= --experts-per-token <= "
        "--experts");
  }
  if (s.rope_scaling_factor > 0.0 &&
      (s.rope_scaling_factor < 1.0 || !(s.low_freq_factor > 0.0 && s.low_freq_factor < s.high_freq_factor) ||
       s.original_max_position <= 0)) {
    fail(
        "llama3 RoPE scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and a positive original "
        "context");
  }
}

std::string dtype_torch_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    default:
      return "bfloat16";
  }
}

// The special tokens config.json and generation_config.json name: Qwen3's <|endoftext|> and
// <|im_end|>; Llama 3's <|begin_of_text|>, <|end_of_text|> and <|eot_id|> (as the Instruct
// checkpoints list them).
struct SpecialIds {
  int32_t bos;
  nlohmann::json eos;             // config.json's eos_token_id
  nlohmann::json generation_eos;  // generation_config.json's
};

// Writes the family's tokenizer into `out`.
SpecialIds write_tokenizer(const TinyModelSpec& s, const std::filesystem::path& out) {
  const auto max_vocab = static_cast<int32_t>(std::min<int64_t>(s.vocab - 1, 4096));
  if (s.family == "gpt-oss") {  // gpt-oss-20b's: <|return|> ends a config's generation, <|call|> too
    const TinyHarmonyTokenizerIds ids = write_tiny_harmony_tokenizer(out, max_vocab);
    return {ids.startoftext, ids.return_token, {ids.return_token, ids.endoftext, ids.call}};
  }
  if (s.family == "llama") {
    const TinyLlama3TokenizerIds ids = write_tiny_llama3_tokenizer(out, max_vocab);
    const nlohmann::json eos = {ids.end_of_text, ids.eot_id};
    return {ids.begin_of_text, eos, eos};
  }
  const TinyTokenizerIds ids = write_tiny_tokenizer(out, max_vocab);
  return {ids.endoftext, ids.im_end, {ids.im_end, ids.endoftext}};
}

// As Hugging Face writes LlamaConfig (transformers 4.4x): Llama 3.2 1B's config.json has these keys.
nlohmann::json llama_config_json(const TinyModelSpec& s, const SpecialIds& ids) {
  nlohmann::json rope_scaling = nullptr;
  if (s.rope_scaling_factor > 0.0) {
    rope_scaling = {{"factor", s.rope_scaling_factor},
                    {"high_freq_factor", s.high_freq_factor},
                    {"low_freq_factor", s.low_freq_factor},
                    {"original_max_position_embeddings", s.original_max_position},
                    {"rope_type", "llama3"}};
  }
  return {
      {"architectures", {"LlamaForCausalLM"}},
      {"attention_bias", s.attention_bias},
      {"attention_dropout", 0.0},
      {"bos_token_id", ids.bos},
      {"eos_token_id", ids.eos},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.inter},
      {"max_position_embeddings", s.max_position},
      {"mlp_bias", s.mlp_bias},
      {"model_type", "llama"},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"pretraining_tp", 1},
      {"rms_norm_eps", 1e-5},
      {"rope_scaling", rope_scaling},
      {"rope_theta", s.rope_theta},
      {"tie_word_embeddings", s.tie_embeddings},
      {"torch_dtype", dtype_torch_name(s.dtype)},
      {"transformers_version", "4.45.0"},
      {"use_cache", true},
      {"vocab_size", s.vocab},
  };
}

// As Hugging Face writes Qwen3MoeConfig: Qwen3-30B-A3B's config.json has these keys.
nlohmann::json qwen3_moe_config_json(const TinyModelSpec& s, const SpecialIds& ids) {
  return {
      {"architectures", {"Qwen3MoeForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", ids.bos},
      {"decoder_sparse_step", s.sparse_step},
      {"eos_token_id", ids.eos},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.inter},
      {"max_position_embeddings", s.max_position},
      {"max_window_layers", s.layers},
      {"mlp_only_layers", s.dense_layers},
      {"model_type", "qwen3_moe"},
      {"moe_intermediate_size", s.expert_inter},
      {"norm_topk_prob", s.norm_topk_prob},
      {"num_attention_heads", s.heads},
      {"num_experts", s.experts},
      {"num_experts_per_tok", s.experts_per_token},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"output_router_logits", false},
      {"rms_norm_eps", 1e-6},
      {"rope_scaling", nullptr},
      {"rope_theta", s.rope_theta},
      {"router_aux_loss_coef", 0.001},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", s.tie_embeddings},
      {"torch_dtype", dtype_torch_name(s.dtype)},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", s.vocab},
  };
}

// As Hugging Face writes GptOssConfig: gpt-oss-20b's config.json has these keys.
nlohmann::json gpt_oss_config_json(const TinyModelSpec& s, const SpecialIds& ids) {
  nlohmann::json layer_types = nlohmann::json::array();
  for (int64_t i = 0; i < s.layers; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  return {
      {"architectures", {"GptOssForCausalLM"}},
      {"attention_bias", true},
      {"attention_dropout", 0.0},
      {"eos_token_id", ids.eos},
      {"experts_per_token", s.experts_per_token},
      {"head_dim", s.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initial_context_length", s.original_max_position},
      {"initializer_range", 0.02},
      {"intermediate_size", s.inter},
      {"layer_types", layer_types},
      {"max_position_embeddings", s.max_position},
      {"model_type", "gpt_oss"},
      {"num_attention_heads", s.heads},
      {"num_experts_per_tok", s.experts_per_token},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"num_local_experts", s.experts},
      {"output_router_logits", false},
      {"quantization_config",
       {{"modules_to_not_convert",
         {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
        {"quant_method", "mxfp4"}}},
      {"rms_norm_eps", 1e-5},
      {"rope_scaling",
       {{"beta_fast", 32.0},
        {"beta_slow", 1.0},
        {"factor", s.yarn_factor},
        {"original_max_position_embeddings", s.original_max_position},
        {"rope_type", "yarn"},
        {"truncate", false}}},
      {"rope_theta", s.rope_theta},
      {"router_aux_loss_coef", 0.9},
      {"sliding_window", s.sliding_window},
      {"swiglu_limit", s.swiglu_limit},
      {"tie_word_embeddings", s.tie_embeddings},
      {"torch_dtype", dtype_torch_name(s.dtype)},
      {"transformers_version", "4.55.0.dev0"},
      {"use_cache", true},
      {"vocab_size", s.vocab},
  };
}

nlohmann::json model_config_json(const TinyModelSpec& s, const SpecialIds& ids) {
  if (is_hybrid_family(s.family)) return hybrid_config_json(s, ids.bos, ids.eos);
  if (s.family == "llama") return llama_config_json(s, ids);
  if (s.family == "gpt-oss") return gpt_oss_config_json(s, ids);
  if (s.family == "qwen3-moe") return qwen3_moe_config_json(s, ids);
  return {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", ids.bos},
      {"eos_token_id", ids.eos},
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
  } else if (name == "llama3.2-1b" || name == "llama3.1-8b") {
    // meta-llama's published config.json files (docs/models.md).
    s.family = "llama";
    s.vocab = 128256;
    s.max_position = 131072;
    s.rope_theta = 500000.0;
    s.low_freq_factor = 1.0, s.high_freq_factor = 4.0, s.original_max_position = 8192;
    if (name == "llama3.2-1b") {
      s.hidden = 2048, s.inter = 8192, s.layers = 16, s.heads = 32, s.kv_heads = 8, s.head_dim = 64;
      s.tie_embeddings = true, s.rope_scaling_factor = 32.0;
    } else {
      s.hidden = 4096, s.inter = 14336, s.layers = 32, s.heads = 32, s.kv_heads = 8, s.head_dim = 128;
      s.tie_embeddings = false, s.rope_scaling_factor = 8.0;
    }
  } else if (name == "qwen3-30b-a3b") {
    // Qwen/Qwen3-30B-A3B's config.json (docs/models.md); --layers N keeps the first N of its 48.
    s.family = "qwen3-moe";
    s.hidden = 2048, s.inter = 6144, s.layers = 48, s.heads = 32, s.kv_heads = 4, s.tie_embeddings = false;
    s.experts = 128, s.experts_per_token = 8, s.expert_inter = 768, s.norm_topk_prob = true;
    s.rope_theta = 1e6;
  } else if (name == "gpt-oss-20b") {
    // openai/gpt-oss-20b's config.json (docs/models.md): experts in MXFP4, about 13 GB.
    s.family = "gpt-oss";
    s.hidden = 2880, s.inter = 2880, s.layers = 24, s.heads = 64, s.kv_heads = 8, s.head_dim = 64;
    s.vocab = 201088, s.max_position = 131072, s.tie_embeddings = false;
    s.experts = 32, s.experts_per_token = 4, s.sliding_window = 128, s.swiglu_limit = 7.0;
    s.rope_theta = 150000.0, s.yarn_factor = 32.0, s.original_max_position = 4096;
  } else if (name == "qwen3.5-9b" || name == "qwen3.5-35b-a3b") {
    // Qwen/Qwen3.5-9B and Qwen/Qwen3.5-35B-A3B (docs/models.md): 3 Gated DeltaNet layers to each
    // attention layer, head_dim 256 with a quarter rotating, linear heads 16 key / 32 value of 128.
    s.family = name == "qwen3.5-9b" ? "qwen3_5" : "qwen3_5_moe";
    s.vocab = 248320, s.max_position = 262144, s.rope_theta = 1e7, s.head_dim = 256;
    s.linear_key_heads = 16, s.linear_value_heads = 32, s.linear_key_dim = 128, s.linear_value_dim = 128;
    s.conv_kernel = 4, s.full_attention_interval = 4, s.partial_rotary_factor = 0.25;
    if (name == "qwen3.5-9b") {
      s.hidden = 4096, s.inter = 12288, s.layers = 32, s.heads = 16, s.kv_heads = 4, s.tie_embeddings = false;
    } else {
      s.hidden = 2048, s.inter = 512, s.layers = 40, s.heads = 16, s.kv_heads = 2, s.tie_embeddings = false;
      s.experts = 256, s.experts_per_token = 8, s.expert_inter = 512, s.shared_expert_inter = 512;
    }
  } else {
    throw Error(ErrorCode::kInvalidArgument, "unknown preset '" + name +
                                                 "' (qwen3-0.6b, qwen3-4b, qwen3-8b, llama3.2-1b, llama3.1-8b, "
                                                 "qwen3-30b-a3b, gpt-oss-20b, qwen3.5-9b, qwen3.5-35b-a3b)");
  }
  return s;
}

void write_tiny_model(const TinyModelSpec& s, const std::filesystem::path& out, TinyWeights weights) {
  validate(s);
  std::filesystem::create_directories(out);
  const SpecialIds ids = write_tokenizer(s, out);
  // The last embedding row stays beyond the tokenizer, as Qwen pads its vocabulary: a drafter
  // made for this model uses it as MASK.

  const nlohmann::json config = model_config_json(s, ids);
  // The layers' options as the loader reads them back (q/k norm, biases).
  const ModelConfig layout = parse_model_config(config, (out / "config.json").string());
  write_text_file(out / "config.json", config.dump(2) + "\n");
  nlohmann::json generation = {{"bos_token_id", ids.bos}, {"eos_token_id", ids.generation_eos}, {"do_sample", false}};
  write_text_file(out / "generation_config.json", generation.dump(2) + "\n");
  if (weights == TinyWeights::kNone) return;

  RandomWeights random(s.seed);
  SafetensorsWriter writer;
  RandomTensors tensors{writer, random, s.dtype};
  const bool hybrid = is_hybrid_family(s.family);
  const std::string model = hybrid ? hybrid_weight_prefix(s) : "model.";
  writer.add(model + "embed_tokens.weight", s.dtype, {s.vocab, s.hidden},
             random.fill(s.dtype, s.vocab * s.hidden, 0.0f, 1.0f));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string prefix = model + "layers." + std::to_string(i) + ".";
    if (hybrid) {
      add_hybrid_layer(tensors, prefix, layout, i);
    } else {
      tensors.add_layer(prefix, layout, layout.moe.sparse_layer(i));
    }
  }
  if (hybrid) {
    tensors.zero_centred_norm(model + "norm.weight", s.hidden);
    if (s.multimodal) add_multimodal_extras(tensors, layout);
  } else {
    tensors.norm(model + "norm.weight", s.hidden);
  }
  if (!s.tie_embeddings) tensors.matrix("lm_head.weight", s.vocab, s.hidden);
  writer.set_metadata("format", "pt");
  writer.write(out / "model.safetensors");
}

}  // namespace flashq

namespace flashq {

namespace {

// DFlash2's convolution around a sublayer: static taps near the identity (tap 0 about 1, the
// others small) and a projection giving dynamic taps of a tenth of that.
void add_sublayer_conv(RandomTensors& tensors, const std::string& prefix, const DrafterConfig& layout) {
  const int64_t hidden = layout.layers.hidden_size, taps = layout.dflash2->conv_kernel_size;
  const int64_t groups = hidden / layout.dflash2->conv_group_size;
  std::string base = tensors.random.fill(tensors.dtype, hidden, 1.0f, 0.3f);
  base += tensors.random.fill(tensors.dtype, (taps - 1) * hidden, 0.0f, 0.5f);
  base += tensors.random.fill(tensors.dtype, taps * hidden, 1.0f, 0.3f);
  tensors.writer.add(prefix + "base_kernel", tensors.dtype, {2, taps, hidden}, std::move(base));
  tensors.writer.add(prefix + "kernel_projection.weight", tensors.dtype, {2 * taps * groups, hidden},
                     tensors.random.fill(tensors.dtype, 2 * taps * groups * hidden, 0.0f,
                                         0.3f / std::sqrt(static_cast<float>(hidden))));
}

// The selector's projection and its two codebooks, stored under z-lab's bare names.
void add_candidate_selector(RandomTensors& tensors, const DrafterConfig& layout) {
  const int64_t rank = layout.dflash2->selector_rank, vocab = layout.layers.vocab_size;
  tensors.matrix("candidate_selector.hidden_projection.weight", rank, layout.layers.hidden_size);
  for (const char* codebook : {"candidate_selector.predecessor_codebook", "candidate_selector.successor_codebook"}) {
    tensors.writer.add(codebook, tensors.dtype, {vocab, rank},
                       tensors.random.fill(tensors.dtype, vocab * rank, 0.0f, 1.0f));
  }
}

}  // namespace

void write_tiny_drafter(const TinyDrafterSpec& spec, const std::filesystem::path& target_dir,
                        const std::filesystem::path& out) {
  const std::filesystem::path target_config_path = target_dir / "config.json";
  nlohmann::json config = read_json_file(target_config_path);
  const ModelConfig target = parse_model_config(config, target_config_path.string());
  // A hybrid target's drafter is plain Qwen3 layers (z-lab's for Qwen3.5 and Qwen3.6).
  if (!target.linear_attention.layers.empty()) config = drafter_config_of_hybrid(config);
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
    if (id < 0 || id >= target.num_layers)
      throw Error(ErrorCode::kInvalidArgument, "make-tiny: tap layer out of range");
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
  config["architectures"] = {"DFlashDraftModel"};
  config["num_hidden_layers"] = spec.layers;
  config["num_target_layers"] = target.num_layers;
  config["max_window_layers"] = spec.layers;
  config["block_size"] = spec.block_size;
  config["tie_word_embeddings"] = false;
  config["head_dim"] = target.head_dim;  // a drafter's layers read an absent head_dim as Qwen3Config does
  config.erase("mlp_bias");              // z-lab's drafter layers have Qwen3's MLP, without biases
  if (target.moe.num_experts > 0) {      // and dense full-attention Qwen3 layers, whatever the target's
    config["model_type"] = "qwen3";
    for (const char* key :
         {"num_experts", "num_local_experts", "num_experts_per_tok", "experts_per_token", "moe_intermediate_size",
          "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "output_router_logits", "router_aux_loss_coef",
          "layer_types", "sliding_window", "swiglu_limit", "quantization_config"}) {
      config.erase(key);
    }
  }
  config["dflash_config"] = {{"mask_token_id", target.vocab_size - 1}, {"target_layer_ids", taps}};
  if (spec.dflash2) {
    config["architectures"] = {"DFlash2DraftModel"};
    config["dflash_config"].update({{"conv_kernel_size", spec.conv_kernel_size},
                                    {"conv_group_size", spec.conv_group_size},
                                    {"selector_rank", spec.selector_rank},
                                    {"selector_top_k", spec.selector_top_k}});
  }
  for (const auto& [key, value] : spec.config_overrides.items()) config[key] = value;
  const DrafterConfig layout = parse_drafter_config(config, (out / "config.json").string(), target);
  for (int64_t i = 0; i < spec.layers; ++i) {
    const std::string prefix = "layers." + std::to_string(i) + ".";
    tensors.add_layer(prefix, layout.layers);
    if (layout.dflash2) {
      for (const char* conv : {"attention_conv.", "mlp_conv."}) add_sublayer_conv(tensors, prefix + conv, layout);
    }
  }
  if (layout.dflash2) add_candidate_selector(tensors, layout);
  writer.set_metadata("format", "pt");
  writer.write(out / "model.safetensors");
  write_text_file(out / "config.json", config.dump(2) + "\n");
}

}  // namespace flashq
