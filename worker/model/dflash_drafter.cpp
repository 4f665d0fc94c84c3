#include "worker/model/dflash_drafter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "shared/error.h"

namespace flashq {

std::unique_ptr<DFlashDrafter> DFlashDrafter::load(const std::filesystem::path& dir, const TargetModel& target,
                                                   Backend& backend) {
  DrafterConfig config = load_drafter_config(dir, target.config());
  WeightStore weights = WeightStore::open(dir);
  return std::make_unique<DFlashDrafter>(std::move(config), weights, target, backend);
}

DFlashDrafter::DFlashDrafter(DrafterConfig config, const WeightStore& weights, const TargetModel& target,
                             Backend& backend)
    : config_(std::move(config)),
      backend_(backend),
      workspace_(backend),
      embed_tokens_(target.embedding_table()),
      lm_head_(target.lm_head()),
      recorder_(backend) {
  const ModelConfig& c = config_.layers;
  const int64_t features = static_cast<int64_t>(config_.target_layer_ids.size()) * target.config().hidden_size;
  fc_ = load_weight(weights, "fc.weight", {c.hidden_size, features}, backend_);
  hidden_norm_ = load_weight(weights, "hidden_norm.weight", {c.hidden_size}, backend_);
  final_norm_ = load_weight(weights, "norm.weight", {c.hidden_size}, backend_);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    layers_.push_back(load_decoder_layer(weights, "layers." + std::to_string(i) + ".", c, backend_));
  }
  if (config_.dflash2) {
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string prefix = "layers." + std::to_string(i) + ".";
      attention_conv_.push_back(load_sublayer_conv(weights, prefix + "attention_conv."));
      mlp_conv_.push_back(load_sublayer_conv(weights, prefix + "mlp_conv."));
    }
    selector_ = std::make_unique<CandidateSelector>(weights, config_, backend_);
  }
  for (const DrafterLayerAttention& attention : config_.layer_attention) {
    auto same = [&](const DrafterLayerAttention& p) {
      return p.causal == attention.causal && p.window == attention.window;
    };
    const auto found = std::find_if(patterns_.begin(), patterns_.end(), same);
    layer_pattern_.push_back(static_cast<size_t>(found - patterns_.begin()));
    if (found == patterns_.end()) patterns_.push_back(attention);
  }
  check_invariant(static_cast<int64_t>(layer_pattern_.size()) == c.num_layers,
                  "an attention pattern per drafter layer");
}

DFlashDrafter::SublayerConv DFlashDrafter::load_sublayer_conv(const WeightStore& weights,
                                                              const std::string& prefix) const {
  const int64_t hidden = config_.layers.hidden_size, taps = config_.dflash2->conv_kernel_size;
  const int64_t dynamic = taps * (hidden / config_.dflash2->conv_group_size);
  const Tensor base = load_weight(weights, prefix + "base_kernel", {2, taps, hidden}, backend_);
  const Tensor projection = load_weight(weights, prefix + "kernel_projection.weight", {2 * dynamic, hidden}, backend_);
  // The projection's output is [2, K, G]: its first K * G rows give the taps before the sublayer.
  return {base.slice_rows(0, 1).reshape({taps, hidden}), base.slice_rows(1, 1).reshape({taps, hidden}),
          projection.slice_rows(0, dynamic), projection.slice_rows(dynamic, dynamic)};
}

void DFlashDrafter::convolve_before(const SublayerConv& conv, const Tensor& in, const Tensor& row_in_block, Tensor& out,
                                    Tensor& dynamic_after) {
  const int64_t rows = in.dim(0);
  Tensor dynamic_before = workspace_.get("conv_dynamic_before", DType::kF32, {rows, conv.projection_before.dim(0)});
  const WeightProduct products[] = {{&conv.projection_before, &dynamic_before},
                                    {&conv.projection_after, &dynamic_after}};
  backend_.matmul_many(in, products);
  backend_.grouped_dynamic_conv(in, dynamic_before, conv.base_before, row_in_block, config_.dflash2->conv_group_size,
                                out);
}

void DFlashDrafter::convolve_after(const SublayerConv& conv, const Tensor& in, const Tensor& dynamic_after,
                                   const Tensor& row_in_block, Tensor& out) {
  backend_.grouped_dynamic_conv(in, dynamic_after, conv.base_after, row_in_block, config_.dflash2->conv_group_size,
                                out);
}

void DFlashDrafter::append_block_keys(const DrafterLayerAttention& pattern, int64_t context_rows, int64_t block_size,
                                      std::vector<int32_t>& counts, std::vector<int32_t>& starts) const {
  const int64_t end = context_rows + block_size;
  for (int64_t j = 0; j < block_size; ++j) {
    const int64_t row = context_rows + j;  // the block row's own key
    int64_t count = pattern.causal ? row + 1 : end;
    if (pattern.window > 0) {
      if (!pattern.causal) count = std::min(end, row + pattern.window);
      starts.push_back(static_cast<int32_t>(std::max<int64_t>(0, row - pattern.window + 1)));
    }
    counts.push_back(static_cast<int32_t>(count));
  }
}

KvCache DFlashDrafter::make_context_cache(int64_t max_length) const {
  const ModelConfig& c = config_.layers;
  return KvCache(backend_, c.num_layers, c.num_kv_heads, c.head_dim, max_length + config_.block_size, {},
                 kv_cache_dtype_);
}

void DFlashDrafter::inject(std::span<const ContextChunk> chunks) {
  const ModelConfig& c = config_.layers;
  int64_t rows = 0;
  for (const ContextChunk& chunk : chunks) rows += chunk.taps.dim(0);
  if (rows == 0) return;

  Tensor taps = workspace_.get("taps", DType::kF32, {rows, fc_.dim(1)});
  std::vector<int32_t> positions, store_rows;
  int64_t first = 0;
  for (const ContextChunk& chunk : chunks) {
    const int64_t n = chunk.taps.dim(0), start = chunk.context->length();
    check_invariant(chunk.taps.cols() == fc_.dim(1), "drafter taps have K * target_hidden columns");
    backend_.copy_rows(chunk.taps, taps, first);
    for (int64_t i = 0; i < n; ++i) {
      positions.push_back(static_cast<int32_t>(chunk.first_position + i));
      store_rows.push_back(static_cast<int32_t>(start + i));
    }
    chunk.context->reserve(start + n);
    first += n;
  }
  const std::vector<Tensor> uploaded = workspace_.upload_int32s("inject_ints", {positions, store_rows});
  const Tensor& position_tensor = uploaded[0];
  const Tensor& store_tensor = uploaded[1];
  Tensor context = workspace_.get("context", DType::kF32, {rows, c.hidden_size});
  backend_.matmul(taps, fc_, context);
  backend_.rmsnorm(context, hidden_norm_, c.rms_norm_eps, context);

  // The context rows skip input_layernorm, the residual stream and the MLP: only k and v, of
  // every layer from one x, so all layers' products go to the backend at once.
  const int64_t layers = static_cast<int64_t>(layers_.size());
  Tensor all_k = workspace_.get("inject_k", DType::kF32, {layers, rows, c.num_kv_heads, c.head_dim});
  Tensor all_v = workspace_.get("inject_v", DType::kF32, {layers, rows, c.num_kv_heads, c.head_dim});
  const int64_t kv_width = c.num_kv_heads * c.head_dim;
  std::vector<Tensor> outputs;
  outputs.reserve(2 * layers_.size());
  std::vector<WeightProduct> products;
  for (int64_t l = 0; l < layers; ++l) {
    outputs.push_back(all_k.slice_rows(l, 1).reshape({rows, kv_width}));
    products.push_back({&layers_[l].k_proj, &outputs.back()});
    outputs.push_back(all_v.slice_rows(l, 1).reshape({rows, kv_width}));
    products.push_back({&layers_[l].v_proj, &outputs.back()});
  }
  backend_.matmul_many(context, products);
  for (int64_t l = 0; l < layers; ++l) {
    if (!layers_[l].k_bias.defined()) continue;
    backend_.add_bias(outputs[2 * l], layers_[l].k_bias);
    backend_.add_bias(outputs[2 * l + 1], layers_[l].v_bias);
  }
  // Then per layer, k's norm and RoPE and every sequence's rows into its context: one call.
  for (int64_t l = 0; l < layers; ++l) {
    cache_chunks_.clear();
    first = 0;
    for (const ContextChunk& chunk : chunks) {
      const int64_t n = chunk.taps.dim(0);
      cache_chunks_.push_back({&chunk.context->keys(l), &chunk.context->values(l), first, n});
      first += n;
    }
    // The layer's k_norm, when it has one, and its RoPE; store_kv reads no q_norm.
    const QkNormRope k_norm_rope = qk_norm_rope(layers_[l], c, position_tensor);
    backend_.store_kv(all_k.slice_rows(l, 1).reshape({rows, c.num_kv_heads, c.head_dim}),
                      all_v.slice_rows(l, 1).reshape({rows, c.num_kv_heads, c.head_dim}), cache_chunks_, store_tensor,
                      &k_norm_rope);
  }
  for (const ContextChunk& chunk : chunks) chunk.context->commit(chunk.taps.dim(0));
}

Tensor DFlashDrafter::draft(std::span<const DraftBlock> blocks) {
  std::vector<int32_t> ids, positions, store_rows, output_rows, row_in_block;
  std::vector<std::vector<int32_t>> counts(patterns_.size()), starts(patterns_.size());
  for (const DraftBlock& block : blocks) {
    check_invariant(block.block_size >= 2, "a draft block has at least 2 rows");
    check_invariant(block.position >= block.context->length(), "a draft block follows its context");
    const int64_t start = block.context->length();
    // The block's own keys and values sit after the context, uncommitted: thrown away after the pass.
    block.context->reserve(start + block.block_size);
    const auto first_row = static_cast<int32_t>(ids.size());
    for (int64_t j = 0; j < block.block_size; ++j) {
      ids.push_back(j == 0 ? block.last_token : config_.mask_token_id);
      positions.push_back(static_cast<int32_t>(block.position + j));
      store_rows.push_back(static_cast<int32_t>(start + j));
      if (config_.dflash2) row_in_block.push_back(static_cast<int32_t>(j));
    }
    for (size_t p = 0; p < patterns_.size(); ++p) {
      append_block_keys(patterns_[p], start, block.block_size, counts[p], starts[p]);
    }
    // Rows 1..B-1 of the block carry its draft.
    for (int64_t j = 1; j < block.block_size; ++j) output_rows.push_back(first_row + static_cast<int32_t>(j));
  }
  std::vector<std::vector<int32_t>> ints = {ids, positions, store_rows, output_rows, row_in_block};
  for (size_t p = 0; p < patterns_.size(); ++p) {
    ints.push_back(counts[p]);
    ints.push_back(starts[p]);  // empty without a window
  }
  const std::vector<Tensor> uploaded = workspace_.upload_int32s("draft_ints", ints);
  std::vector<LayerKeys> layer_keys;
  for (size_t p : layer_pattern_) {
    layer_keys.push_back({&uploaded[5 + 2 * p], patterns_[p].window > 0 ? &uploaded[6 + 2 * p] : nullptr});
  }
  auto run = [&] {
    return run_draft_pass(blocks, uploaded[0], uploaded[1], layer_keys, uploaded[2], uploaded[3], uploaded[4]);
  };
  return recorder_.enabled() ? recorder_.run(draft_key(blocks), run) : run();
}

DFlashDrafter::DraftKey DFlashDrafter::draft_key(std::span<const DraftBlock> blocks) const {
  DraftKey key{.workspace = workspace_.generation()};
  for (const DraftBlock& block : blocks) {
    key.block_sizes.push_back(block.block_size);
    key.contexts.push_back(block.context->keys(0).raw());  // its layers are allocated together
  }
  return key;
}

Tensor DFlashDrafter::run_draft_pass(std::span<const DraftBlock> blocks, const Tensor& id_tensor,
                                     const Tensor& position_tensor, std::span<const LayerKeys> layer_keys,
                                     const Tensor& store_tensor, const Tensor& output_tensor,
                                     const Tensor& row_in_block) {
  const ModelConfig& c = config_.layers;
  const int64_t rows = id_tensor.numel();
  Tensor h = workspace_.get("draft_residual", DType::kF32, {rows, c.hidden_size});
  Tensor normed = workspace_.get("draft_normed", DType::kF32, {rows, c.hidden_size});
  Tensor delta = workspace_.get("draft_delta", DType::kF32, {rows, c.hidden_size});
  Tensor q = workspace_.get("draft_q", DType::kF32, {rows, c.num_heads, c.head_dim});
  Tensor k = workspace_.get("draft_k", DType::kF32, {rows, c.num_kv_heads, c.head_dim});
  Tensor v = workspace_.get("draft_v", DType::kF32, {rows, c.num_kv_heads, c.head_dim});
  Tensor attended = workspace_.get("draft_attended", DType::kF32, {rows, c.num_heads, c.head_dim});
  backend_.embedding(embed_tokens_, id_tensor, h);
  const bool convolved = config_.dflash2.has_value();
  Tensor conv_in, conv_out, dynamic_after;
  if (convolved) {
    conv_in = workspace_.get("draft_conv_in", DType::kF32, {rows, c.hidden_size});
    conv_out = workspace_.get("draft_conv_out", DType::kF32, {rows, c.hidden_size});
    dynamic_after =
        workspace_.get("draft_dynamic_after", DType::kF32, {rows, attention_conv_[0].projection_after.dim(0)});
  }

  for (size_t l = 0; l < layers_.size(); ++l) {
    const DecoderLayer& layer = layers_[l];
    backend_.rmsnorm(h, layer.input_norm, c.rms_norm_eps, normed);
    if (convolved) convolve_before(attention_conv_[l], normed, row_in_block, conv_in, dynamic_after);
    project_qkv(backend_, layer, c, convolved ? conv_in : normed, q, k, v);
    cache_chunks_.clear();
    int64_t first = 0;
    for (const DraftBlock& block : blocks) {
      KvCache& context = *block.context;
      cache_chunks_.push_back(
          {&context.keys(static_cast<int64_t>(l)), &context.values(static_cast<int64_t>(l)), first, block.block_size});
      first += block.block_size;
    }
    const QkNormRope norm_rope = qk_norm_rope(layer, c, position_tensor);
    AttentionOptions options;
    options.key_starts = layer_keys[l].starts;
    backend_.store_and_attend(q, k, v, cache_chunks_, store_tensor, *layer_keys[l].counts, attended, &norm_rope,
                              options);
    project_attention_out(backend_, layer, attended, delta);
    if (convolved) convolve_after(attention_conv_[l], delta, dynamic_after, row_in_block, conv_out);
    backend_.add_rmsnorm(h, convolved ? conv_out : delta, layer.post_attention_norm, c.rms_norm_eps, normed);
    if (convolved) convolve_before(mlp_conv_[l], normed, row_in_block, conv_in, dynamic_after);
    run_swiglu_mlp(backend_, workspace_, layer, c.intermediate_size, convolved ? conv_in : normed, delta);
    if (convolved) convolve_after(mlp_conv_[l], delta, dynamic_after, row_in_block, conv_out);
    backend_.add(h, convolved ? conv_out : delta);
  }

  // Row j predicts the token at position start + j: rows 1..B-1 carry the draft.
  const int64_t output_rows = output_tensor.numel();
  Tensor selected = workspace_.get("draft_selected", DType::kF32, {output_rows, c.hidden_size});
  backend_.gather_rows(h, output_tensor, selected);
  Tensor final_normed = workspace_.get("draft_final_normed", DType::kF32, {output_rows, c.hidden_size});
  backend_.rmsnorm(selected, final_norm_, c.rms_norm_eps, final_normed);
  last_hidden_ = final_normed;
  Tensor logits = workspace_.get("draft_logits", DType::kF32, {output_rows, lm_head_.dim(0)});
  backend_.matmul(final_normed, lm_head_, logits);
  return logits;
}

}  // namespace flashq
