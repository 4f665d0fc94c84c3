#include "tools/flashq_model/inspect_model.h"

#include <ostream>
#include <string>

#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

// The layer options the family and config.json chose, e.g. "llama3 RoPE scaling x8 (low 1, high
// 4, original 8192), attention biases".
std::string layer_options(const ModelConfig& c) {
  std::string options;
  auto add = [&options](const std::string& option) { options += (options.empty() ? "" : ", ") + option; };
  if (c.qk_norm) add("q/k norm");
  if (c.attention_bias) add("attention biases");
  if (c.mlp_bias) add("MLP biases");
  if (c.attention_sinks) add("attention sinks");
  int64_t sliding = 0;
  for (bool s : c.sliding_layers) sliding += s ? 1 : 0;
  if (sliding > 0)
    add("sliding window " + std::to_string(c.sliding_window) + " on " + std::to_string(sliding) + " layers");
  auto number = [](double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  if (c.rope_scaling == RopeScaling::kLinear) add("linear RoPE scaling x" + number(c.rope_factor));
  if (c.rope_scaling == RopeScaling::kLlama3) {
    add("llama3 RoPE scaling x" + number(c.rope_factor) + " (low " + number(c.rope_low_freq_factor) + ", high " +
        number(c.rope_high_freq_factor) + ", original " + std::to_string(c.rope_original_max_position) + ")");
  }
  if (c.rope_scaling == RopeScaling::kYarn) {
    add("yarn RoPE scaling x" + number(c.rope_factor) + " (beta_fast " + number(c.rope_beta_fast) + ", beta_slow " +
        number(c.rope_beta_slow) + ", original " + std::to_string(c.rope_original_max_position) +
        (c.rope_truncate ? "" : ", not truncated") + ", attention factor " + number(c.rope_attention_factor) + ")");
  }
  return options.empty() ? "none" : options;
}

// The mixture of experts, e.g. "128 on 48 of 48 layers, 8 per token (softmax then top-k,
// renormalised), intermediate 768"; "none" for dense models.
std::string experts(const ModelConfig& c) {
  const MoeConfig& moe = c.moe;
  if (moe.num_experts == 0) return "none";
  int64_t sparse = 0;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) sparse += moe.sparse_layer(layer) ? 1 : 0;
  std::string routing =
      moe.routing_order == RoutingOrder::kSoftmaxThenTopK ? "softmax then top-k" : "top-k then softmax";
  if (moe.normalize_top_k) routing += ", renormalised";
  return std::to_string(moe.num_experts) + " on " + std::to_string(sparse) + " of " + std::to_string(c.num_layers) +
         " layers, " + std::to_string(moe.experts_per_token) + " per token (" + routing + "), intermediate " +
         std::to_string(moe.intermediate_size);
}

}  // namespace

void inspect_model(const std::filesystem::path& dir, std::ostream& out) {
  ModelConfig c = load_model_config(dir);
  out << "model " << dir.string() << "\n"
      << "  architecture " << c.architecture << " (family " << c.model_type << ")\n"
      << "  layer options " << layer_options(c) << "\n"
      << "  layers " << c.num_layers << ", hidden " << c.hidden_size << ", intermediate " << c.intermediate_size << "\n"
      << "  experts " << experts(c) << "\n"
      << "  heads " << c.num_heads << " (kv " << c.num_kv_heads << "), head_dim " << c.head_dim << "\n"
      << "  vocab " << c.vocab_size << ", context " << c.max_position_embeddings << ", rope_theta " << c.rope_theta
      << ", rms_norm_eps " << c.rms_norm_eps << "\n"
      << "  lm_head " << (c.tie_word_embeddings ? "tied to the embedding" : "separate") << "\n"
      << "  eos ids";
  for (int32_t id : c.eos_token_ids) out << " " << id;
  out << "\n";

  WeightStore weights = WeightStore::open(dir);
  int64_t parameters = 0;
  size_t bytes = 0;
  std::vector<std::string> names = weights.names();
  out << "tensors " << names.size() << "\n";
  for (const std::string& name : names) {
    Tensor t = weights.get(name);
    parameters += t.numel();
    bytes += t.nbytes();
    out << "  " << name << " " << dtype_name(t.dtype()) << " " << shape_to_string(t.shape()) << "\n";
  }
  out << "parameters " << parameters << " (" << bytes / (1024.0 * 1024.0) << " MiB)\n";

  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  out << "tokenizer vocab " << tokenizer->vocab_size() << "\n";
}

}  // namespace flashq
