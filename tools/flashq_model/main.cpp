// flashq-model: model tools. make-tiny writes random test and benchmark models, inspect shows
// what a directory holds, tokenize runs the tokenizer over lines of stdin.
#include <iostream>

#include "kernels/dtype.h"
#include "shared/cli.h"
#include "shared/error.h"
#include "tools/flashq_model/inspect_model.h"
#include "tools/flashq_model/make_tiny.h"
#include "tools/flashq_model/tokenize_lines.h"

namespace {

flashq::DType parse_dtype(const std::string& name) {
  if (name == "bf16") return flashq::DType::kBF16;
  if (name == "f16") return flashq::DType::kF16;
  if (name == "f32") return flashq::DType::kF32;
  throw flashq::Error(flashq::ErrorCode::kInvalidArgument, "unknown --dtype '" + name + "' (bf16, f16, f32)");
}

// The hybrid families' sizes (qwen3_5, qwen3_5_moe, qwen3_next).
void add_hybrid_options(CLI::App& make_tiny, flashq::TinyModelSpec& spec) {
  make_tiny.add_option("--linear-key-heads", spec.linear_key_heads, "hybrid: Gated DeltaNet key heads")
      ->capture_default_str();
  make_tiny.add_option("--linear-value-heads", spec.linear_value_heads, "hybrid: Gated DeltaNet value heads")
      ->capture_default_str();
  make_tiny.add_option("--linear-key-dim", spec.linear_key_dim)->capture_default_str();
  make_tiny.add_option("--linear-value-dim", spec.linear_value_dim)->capture_default_str();
  make_tiny
      .add_option("--full-attention-interval", spec.full_attention_interval,
                  "hybrid: every n-th layer attends, the others are Gated DeltaNet")
      ->capture_default_str();
  make_tiny
      .add_option("--shared-expert-inter", spec.shared_expert_inter, "qwen3_5_moe, qwen3_next: the shared expert's")
      ->capture_default_str();
  make_tiny.add_flag("--multimodal", spec.multimodal,
                     "qwen3_5, qwen3_5_moe: the ForConditionalGeneration layout (text_config, model.language_model.*)");
}

// The sizes every family has.
void add_shape_options(CLI::App& make_tiny, flashq::TinyModelSpec& spec) {
  make_tiny.add_option("--layers", spec.layers)->capture_default_str();
  make_tiny.add_option("--hidden", spec.hidden)->capture_default_str();
  make_tiny.add_option("--heads", spec.heads)->capture_default_str();
  make_tiny.add_option("--kv-heads", spec.kv_heads)->capture_default_str();
  make_tiny.add_option("--head-dim", spec.head_dim)->capture_default_str();
  make_tiny.add_option("--inter", spec.inter)->capture_default_str();
  make_tiny.add_option("--vocab", spec.vocab)->capture_default_str();
  make_tiny.add_option("--max-position", spec.max_position)->capture_default_str();
  make_tiny.add_flag("--tie", spec.tie_embeddings, "tie the LM head to the embedding");
  make_tiny.add_option("--rope-theta", spec.rope_theta)->capture_default_str();
}

// The options of one family or another: Llama's biases and RoPE scaling, the experts of the MoE
// families, gpt-oss's window and YaRN, the hybrids' sizes.
void add_family_options(CLI::App& make_tiny, flashq::TinyModelSpec& spec) {
  make_tiny.add_flag("--attention-bias", spec.attention_bias, "llama: q, k, v and o projections with biases");
  make_tiny.add_flag("--mlp-bias", spec.mlp_bias, "llama: gate, up and down projections with biases");
  make_tiny
      .add_option("--rope-scaling-factor", spec.rope_scaling_factor,
                  "llama: RoPE scaling of rope_type llama3 with this factor (0: none)")
      ->capture_default_str();
  make_tiny.add_option("--low-freq-factor", spec.low_freq_factor)->capture_default_str();
  make_tiny.add_option("--high-freq-factor", spec.high_freq_factor)->capture_default_str();
  make_tiny.add_option("--original-max-position", spec.original_max_position)->capture_default_str();
  make_tiny.add_option("--experts", spec.experts, "qwen3-moe, gpt-oss: experts per sparse layer")
      ->capture_default_str();
  make_tiny.add_option("--experts-per-token", spec.experts_per_token, "qwen3-moe, gpt-oss: experts routed per token")
      ->capture_default_str();
  make_tiny.add_option("--expert-inter", spec.expert_inter, "qwen3-moe: an expert's intermediate size")
      ->capture_default_str();
  make_tiny.add_flag("--norm-topk-prob,!--no-norm-topk-prob", spec.norm_topk_prob,
                     "qwen3-moe: the chosen experts' weights renormalised to sum to 1 (default on)");
  make_tiny.add_option("--sparse-step", spec.sparse_step, "qwen3-moe: every n-th layer is sparse")
      ->capture_default_str();
  make_tiny.add_option("--dense-layers", spec.dense_layers, "qwen3-moe: layers whose MLP stays dense");
  make_tiny.add_option("--sliding-window", spec.sliding_window, "gpt-oss: the window of its sliding layers")
      ->capture_default_str();
  make_tiny.add_option("--yarn-factor", spec.yarn_factor, "gpt-oss: YaRN RoPE scaling over --original-max-position")
      ->capture_default_str();
  add_hybrid_options(make_tiny, spec);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashq-model: make, inspect and tokenize models"};
  app.require_subcommand(1);

  flashq::TinyModelSpec spec;
  std::string out_dir, preset, dtype = "bf16";
  CLI::App* make_tiny = app.add_subcommand(
      "make-tiny", "write a random Qwen3, Llama, Qwen3-MoE or gpt-oss model directory, or a drafter");
  make_tiny->add_option("--out", out_dir, "directory to write")->required();
  make_tiny->add_option("--seed", spec.seed, "random seed")->capture_default_str();
  make_tiny->add_option("--preset", preset,
                        "real shapes with random weights: qwen3-0.6b, qwen3-4b, qwen3-8b, llama3.2-1b, llama3.1-8b, "
                        "qwen3-30b-a3b, gpt-oss-20b, qwen3.5-9b, qwen3.5-35b-a3b (with --layers N: a preset's first "
                        "N layers)");
  make_tiny->add_option("--family", spec.family, "qwen3, llama, qwen3-moe, gpt-oss, qwen3_5, qwen3_5_moe or qwen3_next")
      ->capture_default_str();
  add_shape_options(*make_tiny, spec);
  add_family_options(*make_tiny, spec);
  make_tiny->add_option("--dtype", dtype, "bf16, f16 or f32")->capture_default_str();
  bool config_only = false;
  make_tiny->add_flag("--config-only", config_only,
                      "config files and tokenizer, no weights: enough to size caches (flashq-bench kv-memory)");
  std::string drafter_for;
  int64_t block_size = 16;
  make_tiny->add_option("--drafter-for", drafter_for, "write a random DFlash drafter for this target directory");
  make_tiny->add_option("--block-size", block_size, "drafter block size")->capture_default_str();
  bool dflash2 = false;
  make_tiny->add_flag("--dflash2", dflash2,
                      "with --drafter-for: a DFlash2 drafter (conv_kernel_size 2, conv_group_size 16, "
                      "selector_top_k 16, selector_rank 256, as published)");

  std::string model_dir;
  CLI::App* inspect = app.add_subcommand("inspect", "print config and tensors of a model directory");
  inspect->add_option("dir", model_dir, "model directory")->required();

  bool decode = false;
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "text lines (or JSON strings) on stdin -> JSON id arrays on stdout");
  tokenize->add_option("--model", model_dir, "directory with tokenizer.json or tokenizer.model")->required();
  CLI::Option* decode_flag = tokenize->add_flag("--decode", decode, "the reverse: JSON id arrays -> JSON strings");
  bool jsonl = false;
  tokenize->add_flag("--jsonl", jsonl, "each input line is a JSON string (text may hold newlines)")
      ->excludes(decode_flag);

  return flashq::run_cli(app, argc, argv, [&] {
    if (*make_tiny && !drafter_for.empty()) {
      flashq::TinyDrafterSpec drafter;
      drafter.layers = make_tiny->count("--layers") ? spec.layers : 1;
      drafter.block_size = block_size;
      drafter.seed = spec.seed;
      drafter.dflash2 = dflash2;
      flashq::write_tiny_drafter(drafter, drafter_for, out_dir);
      std::cout << "wrote " << out_dir << "\n";
    } else if (*make_tiny) {
      if (!preset.empty()) {
        uint64_t seed = spec.seed;
        const int64_t layers = spec.layers;
        spec = flashq::preset_spec(preset);
        spec.seed = seed;
        if (make_tiny->count("--layers")) spec.layers = layers;  // a preset's first layers, to fit memory
      } else {
        spec.dtype = parse_dtype(dtype);
      }
      flashq::write_tiny_model(spec, out_dir, config_only ? flashq::TinyWeights::kNone : flashq::TinyWeights::kRandom);
      std::cout << "wrote " << out_dir << "\n";
    } else if (*inspect) {
      flashq::inspect_model(model_dir, std::cout);
    } else if (*tokenize) {
      flashq::TokenizeMode mode = decode  ? flashq::TokenizeMode::kDecode
                                  : jsonl ? flashq::TokenizeMode::kEncodeJsonStrings
                                          : flashq::TokenizeMode::kEncodeText;
      flashq::tokenize_lines(model_dir, mode, std::cin, std::cout);
    }
  });
}
