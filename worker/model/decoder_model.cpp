#include "worker/model/decoder_model.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

#include "shared/error.h"

namespace flashq {
namespace {

// Where the language model's tensors are: model.* in a text model's checkpoint, and
// model.language_model.* in a multimodal one's (Qwen3.5's), whose other tensors (the vision tower
// model.visual.*, the multi-token prediction head mtp.*) a text model does not read.
std::string weight_prefix(const WeightStore& weights) {
  return weights.contains("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
}

// Names in the log the tensors a text model leaves unread: a multimodal checkpoint's vision
// tower and a multi-token-prediction head.
void log_unread_parts(const WeightStore& weights) {
  int64_t visual = 0, mtp = 0;
  for (const std::string& name : weights.names()) {
    visual += name.starts_with("model.visual.") ? 1 : 0;
    mtp += name.starts_with("mtp.") ? 1 : 0;
  }
  if (visual + mtp == 0) return;
  spdlog::info("{}: {} vision-tower tensors (model.visual.*) and {} multi-token-prediction tensors (mtp.*) are not read "
               "by the text model",
               weights.dir().string(), visual, mtp);
}

// kInvalidArgument for a tap layer outside the model's `layers`.
void check_tap_layers(const ForwardOptions& options, int64_t layers) {
  for (int64_t layer : options.tap_layers) {
    if (layer < 0 || layer >= layers) {
      throw Error(ErrorCode::kInvalidArgument, "tap layer " + std::to_string(layer) + " is outside the model's " +
                                                   std::to_string(layers) + " layers");
    }
  }
}

// The row of each chunk's logits, when they are not simply every row (chunks of one token);
// empty otherwise.
std::vector<int32_t> last_rows(std::span<const SequenceChunk> chunks, const ForwardOptions& options) {
  const bool one_row_each =
      std::all_of(chunks.begin(), chunks.end(), [](const SequenceChunk& c) { return c.tokens.size() == 1; });
  std::vector<int32_t> last;
  if (options.logits != LogitRows::kLastOfEachChunk || one_row_each) return last;
  int64_t end = 0;
  for (const SequenceChunk& chunk : chunks) {
    end += static_cast<int64_t>(chunk.tokens.size());
    last.push_back(static_cast<int32_t>(end - 1));
  }
  return last;
}

}  // namespace

DecoderModel::DecoderModel(ModelConfig config, const WeightStore& weights, Backend& backend)
    : config_(std::move(config)), backend_(backend), workspace_(backend), recorder_(backend) {
  const int64_t hidden = config_.hidden_size;
  const std::string model = weight_prefix(weights);
  log_unread_parts(weights);
  embed_tokens_ = load_weight(weights, model + "embed_tokens.weight", {config_.vocab_size, hidden}, backend_);
  final_norm_ = load_norm(weights, model + "norm.weight", {hidden}, config_, backend_);
  if (weights.contains("lm_head.weight")) {
    lm_head_ = load_weight(weights, "lm_head.weight", {config_.vocab_size, hidden}, backend_);
  } else if (config_.tie_word_embeddings) {
    lm_head_ = embed_tokens_;
  } else {
    throw Error(ErrorCode::kBadCheckpoint,
                "tensor 'lm_head.weight' not found in " + weights.dir().string() + " and tie_word_embeddings is false");
  }
  int64_t attending = 0, linear = 0;
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const bool linear_layer = config_.linear_attention.linear_layer(i);
    layers_.push_back(load_decoder_layer(weights, model + "layers." + std::to_string(i) + ".", config_, backend_,
                                         config_.moe.sparse_layer(i), linear_layer));
    cache_layers_.push_back(linear_layer ? linear++ : attending++);
  }
}

KvCache DecoderModel::make_cache(int64_t max_length) const {
  KvCache cache(backend_, static_cast<int64_t>(attention_layers(config_).size()), config_.num_kv_heads,
                config_.head_dim, std::min(max_length, config_.max_position_embeddings), attention_windows(config_),
                kv_cache_dtype());
  cache.attach_recurrent_state(make_recurrent_state());
  return cache;
}

void DecoderModel::settle_recurrent_state(KvCache& cache) {
  RecurrentState* state = cache.recurrent();
  if (state == nullptr || state->kept_rows() < 0) return;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const DecoderLayer& layer = layers_[static_cast<size_t>(l)];
    if (layer.linear_attention) {
      replay_kept_rows(backend_, workspace_, *layer.linear_attention, config_, cache_layers_[l], *state);
    }
  }
  state->replayed();
}

void DecoderModel::prepare_recurrent_states(std::span<const SequenceChunk> chunks, const ForwardOptions& options) {
  // Only a verification (every row's logits asked for) may be truncated into after.
  const bool verification = options.logits == LogitRows::kAll;
  for (const SequenceChunk& chunk : chunks) {
    settle_recurrent_state(*chunk.cache);
    if (RecurrentState* state = chunk.cache->recurrent()) {
      state->begin_pass(chunk.cache->length(), verification ? static_cast<int64_t>(chunk.tokens.size()) : 0);
    }
  }
}

DecoderModel::PartPlan DecoderModel::plan_parts(std::span<const SequenceChunk> chunks,
                                                const ForwardOptions& options) const {
  // A prefill (no verification's rows of logits) keeping a recurrent-state snapshot runs up to
  // its block boundary first.
  const bool prefill = options.logits != LogitRows::kAll;
  PartPlan plan;
  for (const SequenceChunk& chunk : chunks) {
    const auto rows = static_cast<int64_t>(chunk.tokens.size()), length = chunk.cache->length();
    const int64_t boundary = prefill && rows > 1 ? chunk.cache->snapshot_boundary(rows) : -1;
    plan.snapshot_at.push_back(boundary);
    plan.first_rows.push_back(boundary > 0 ? boundary - length : rows);
    plan.split = plan.split || plan.first_rows.back() < rows ||
                 (chunk.cache->windowed() && rows > KvCache::kMaxRowsPerPass);
  }
  return plan;
}

ForwardOutput DecoderModel::forward(std::span<const SequenceChunk> chunks, const ForwardOptions& options) {
  for (const SequenceChunk& chunk : chunks) {
    check_invariant(chunk.cache != nullptr && !chunk.tokens.empty(), "forward chunks are non-empty with a cache");
  }
  const PartPlan plan = plan_parts(chunks, options);
  if (plan.split) return forward_in_parts(chunks, options);
  const bool windows =
      std::any_of(chunks.begin(), chunks.end(), [](const SequenceChunk& c) { return c.cache->windowed(); });
  check_tap_layers(options, config_.num_layers);
  for (const SequenceChunk& chunk : chunks) {
    chunk.cache->reserve(chunk.cache->length() + static_cast<int64_t>(chunk.tokens.size()));
  }
  check_token_ids(chunks);
  prepare_recurrent_states(chunks, options);
  std::vector<int32_t> ids, positions, key_counts, window_rows, store_rows;
  // A paged chunk's tables are padded to the blocks of its whole length, so that their shape (what
  // a recorded pass depends on) stays the same while the sequence grows.
  block_table_ints_.clear();
  using TableSpan = std::pair<int64_t, int64_t>;  // first entry, entries
  std::vector<TableSpan> table_spans, window_spans;  // per chunk
  const auto append_table = [this](std::span<const BlockId> blocks, int64_t entries) {
    const TableSpan span{static_cast<int64_t>(block_table_ints_.size()), entries};
    block_table_ints_.insert(block_table_ints_.end(), blocks.begin(), blocks.end());
    block_table_ints_.resize(static_cast<size_t>(span.first + entries), 0);
    return span;
  };
  bool paged = false;
  for (const SequenceChunk& chunk : chunks) {
    const KvCache& cache = *chunk.cache;
    for (size_t i = 0; i < chunk.tokens.size(); ++i) {
      ids.push_back(chunk.tokens[i]);
      positions.push_back(static_cast<int32_t>(cache.length() + static_cast<int64_t>(i)));
      // Causal: a row sees its chunk's cache and the chunk's rows up to itself.
      key_counts.push_back(positions.back() + 1);
      // Where a windowed layer keeps the row's key and value.
      if (windows) window_rows.push_back(static_cast<int32_t>(cache.window_slot(positions.back())));
      store_rows.push_back(static_cast<int32_t>(cache.slot(positions.back())));
    }
    table_spans.emplace_back(static_cast<int64_t>(block_table_ints_.size()), 0);
    window_spans.emplace_back(static_cast<int64_t>(block_table_ints_.size()), 0);
    if (cache.paged()) {
      paged = true;
      const int64_t entries = (cache.max_length() + cache.block_size() - 1) / cache.block_size();
      table_spans.back() = append_table(cache.block_ids(), entries);
      if (cache.windowed()) window_spans.back() = append_table(cache.window_block_ids(), entries);
    }
  }
  const std::vector<int32_t> last = last_rows(chunks, options);
  const bool pick_last_rows = !last.empty();
  // One copy per pass, not per layer: the same for every layer.
  const std::vector<Tensor> uploaded = workspace_.upload_int32s(
      "pass_ints",
      {ids, positions, key_counts, last, window_rows, paged ? store_rows : std::vector<int32_t>(), block_table_ints_});
  PassRows rows{.ids = uploaded[0],
                .positions = uploaded[1],
                .key_counts = uploaded[2],
                .last_rows = pick_last_rows ? uploaded[3] : Tensor(),
                .window_rows = windows ? uploaded[4] : Tensor(),
                // Unpaged caches keep position t at row t.
                .store_rows = paged ? uploaded[5] : uploaded[1],
                .block_tables = {},
                .window_tables = {}};
  const auto table_of = [&uploaded](const TableSpan& span) {
    return span.second > 0 ? uploaded[6].slice_rows(span.first, span.second) : Tensor();
  };
  for (size_t c = 0; c < chunks.size(); ++c) {
    rows.block_tables.push_back(table_of(table_spans[c]));
    rows.window_tables.push_back(table_of(window_spans[c]));
  }
  auto run = [&] { return run_pass(chunks, options, rows); };
  const ForwardOutput out = recorder_.enabled() ? recorder_.run(pass_key(chunks, options), run) : run();
  for (size_t c = 0; c < chunks.size(); ++c) {
    KvCache& cache = *chunks[c].cache;
    cache.commit(static_cast<int64_t>(chunks[c].tokens.size()));
    if (plan.snapshot_at[c] == cache.length()) cache.keep_state_snapshot();
  }
  return out;
}

DecoderModel::PassKey DecoderModel::pass_key(std::span<const SequenceChunk> chunks,
                                             const ForwardOptions& options) const {
  PassKey key{.logits = options.logits, .tap_layers = options.tap_layers, .workspace = workspace_.generation()};
  for (const SequenceChunk& chunk : chunks) {
    key.chunk_rows.push_back(static_cast<int64_t>(chunk.tokens.size()));
    key.caches.push_back(chunk.cache->identity());
  }
  return key;
}

void DecoderModel::check_token_ids(std::span<const SequenceChunk> chunks) const {
  for (const SequenceChunk& chunk : chunks) {
    for (int32_t id : chunk.tokens) {
      if (id < 0 || id >= config_.vocab_size) {
        throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                     " is outside the embedding table of " +
                                                     std::to_string(config_.vocab_size) + " rows");
      }
    }
  }
}

ForwardOutput DecoderModel::forward_in_parts(std::span<const SequenceChunk> chunks, const ForwardOptions& options) {
  // What a part would refuse is refused before the first part runs, so an error leaves every
  // cache as it was, as one pass does.
  for (const SequenceChunk& chunk : chunks) {
    chunk.cache->reserve(chunk.cache->length() + static_cast<int64_t>(chunk.tokens.size()));
  }
  check_token_ids(chunks);
  check_tap_layers(options, config_.num_layers);
  // Row r of chunk c is row first_row[c] + r of the whole pass.
  std::vector<int64_t> first_row(chunks.size() + 1, 0), done(chunks.size(), 0);
  for (size_t c = 0; c < chunks.size(); ++c)
    first_row[c + 1] = first_row[c] + static_cast<int64_t>(chunks[c].tokens.size());
  const int64_t total = first_row.back();
  const int64_t logit_rows = options.logits == LogitRows::kAll ? total : static_cast<int64_t>(chunks.size());
  const int64_t tap_width = static_cast<int64_t>(options.tap_layers.size()) * config_.hidden_size;
  ForwardOutput whole;
  if (options.logits != LogitRows::kNone) {
    whole.logits = workspace_.get("logits_in_parts", DType::kF32, {logit_rows, config_.vocab_size});
  }
  if (tap_width > 0) whole.taps = workspace_.get("taps_in_parts", DType::kF32, {total, tap_width});
  while (true) {
    std::vector<SequenceChunk> part;
    std::vector<size_t> of_chunk;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const int64_t left = static_cast<int64_t>(chunks[c].tokens.size()) - done[c];
      if (left == 0) continue;
      const SequenceChunk rest{chunks[c].tokens.subspan(static_cast<size_t>(done[c])), chunks[c].cache};
      const int64_t n = chunks[c].cache->windowed() ? std::min(left, KvCache::kMaxRowsPerPass)
                                                    : plan_parts({&rest, 1}, options).first_rows[0];
      part.push_back({chunks[c].tokens.subspan(static_cast<size_t>(done[c]), static_cast<size_t>(n)), chunks[c].cache});
      of_chunk.push_back(c);
    }
    if (part.empty()) break;
    const ForwardOutput out = forward(part, options);
    int64_t row = 0;
    for (size_t p = 0; p < part.size(); ++p) {
      const size_t c = of_chunk[p];
      const auto n = static_cast<int64_t>(part[p].tokens.size());
      const int64_t at = first_row[c] + done[c];
      if (tap_width > 0) backend_.copy_rows(out.taps.slice_rows(row, n), whole.taps, at);
      if (options.logits == LogitRows::kAll) backend_.copy_rows(out.logits.slice_rows(row, n), whole.logits, at);
      done[c] += n;
      // The chunk's last row is its logits row once its last part has run.
      if (options.logits == LogitRows::kLastOfEachChunk && done[c] == static_cast<int64_t>(chunks[c].tokens.size())) {
        backend_.copy_rows(out.logits.slice_rows(static_cast<int64_t>(p), 1), whole.logits, static_cast<int64_t>(c));
      }
      row += n;
    }
  }
  return whole;
}

ForwardOutput DecoderModel::run_pass(std::span<const SequenceChunk> chunks, const ForwardOptions& options,
                                     const PassRows& pass_rows) {
  const Tensor& id_tensor = pass_rows.ids;
  const int64_t hidden = config_.hidden_size, rows = id_tensor.numel();
  Tensor h = workspace_.get("residual", DType::kF32, {rows, hidden});
  Tensor normed = workspace_.get("normed", DType::kF32, {rows, hidden});
  Tensor delta = workspace_.get("delta", DType::kF32, {rows, hidden});
  backend_.embedding(embed_tokens_, id_tensor, h);

  ForwardOutput out;
  const int64_t tap_count = static_cast<int64_t>(options.tap_layers.size());
  if (tap_count > 0) out.taps = workspace_.get("taps", DType::kF32, {rows, tap_count * hidden});

  const bool chunked_prefill = delta_rule_form() == DeltaRuleForm::kChunked ||
                               (delta_rule_form() == DeltaRuleForm::kAuto && backend_.prefers_chunked_delta_rule());
  backend_.rmsnorm(h, layers_[0].input_norm, config_.rms_norm_eps, normed);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const DecoderLayer& layer = layers_[l];
    if (layer.linear_attention) {
      run_gated_delta_net(backend_, workspace_, *layer.linear_attention, config_, cache_layers_[l], chunks, normed,
                          chunked_prefill, delta);
    } else {
      run_attention(layer, l, chunks, normed, pass_rows, delta);
    }
    backend_.add_rmsnorm(h, delta, layer.post_attention_norm, config_.rms_norm_eps, normed);
    run_mlp(backend_, workspace_, layer, config_, normed, delta);
    // The residual add is fused with the next layer's input norm; the last layer adds plainly.
    if (l + 1 < config_.num_layers) {
      backend_.add_rmsnorm(h, delta, layers_[l + 1].input_norm, config_.rms_norm_eps, normed);
    } else {
      backend_.add(h, delta);
    }
    for (int64_t t = 0; t < tap_count; ++t) {
      if (options.tap_layers[t] == l) backend_.copy_columns(h, out.taps, t * hidden);
    }
  }
  if (options.logits != LogitRows::kNone) out.logits = compute_logits(h, pass_rows.last_rows);
  return out;
}

void DecoderModel::run_attention(const DecoderLayer& layer, int64_t layer_index, std::span<const SequenceChunk> chunks,
                                 const Tensor& normed, const PassRows& pass_rows, Tensor& attention_out) {
  const Tensor& positions = pass_rows.positions;
  const int64_t rows = normed.dim(0), head_dim = config_.head_dim;
  const int64_t q_heads = config_.num_heads, kv_heads = config_.num_kv_heads;
  Tensor q = workspace_.get("q", DType::kF32, {rows, q_heads, head_dim});
  Tensor k = workspace_.get("k", DType::kF32, {rows, kv_heads, head_dim});
  Tensor v = workspace_.get("v", DType::kF32, {rows, kv_heads, head_dim});
  Tensor attended = workspace_.get("attended", DType::kF32, {rows, q_heads, head_dim});
  Tensor gate = layer.q_gate_proj.defined() ? workspace_.get("q_gate", DType::kF32, {rows, q_heads, head_dim}) : Tensor();
  project_qkv(backend_, layer, config_, normed, q, k, v, &gate);

  // A windowed layer's rows are kept apart (a ring, or the window table's blocks).
  const AttentionOptions options = attention_options(layer, config_, layer_index);
  const bool windowed = options.sliding_window > 0;
  const std::vector<Tensor>& tables = windowed ? pass_rows.window_tables : pass_rows.block_tables;
  cache_chunks_.clear();
  int64_t first = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& chunk = chunks[c];
    const int64_t n = static_cast<int64_t>(chunk.tokens.size());
    const Tensor& table = tables[c];
    const int64_t cache_layer = cache_layers_[layer_index];
    cache_chunks_.push_back({&chunk.cache->keys(cache_layer), &chunk.cache->values(cache_layer), first, n,
                             table.defined() ? &table : nullptr, chunk.cache->block_size()});
    first += n;
  }
  const QkNormRope norm_rope = qk_norm_rope(layer, config_, positions);
  const Tensor& store_at = windowed ? pass_rows.window_rows : pass_rows.store_rows;
  backend_.store_and_attend(q, k, v, cache_chunks_, store_at, pass_rows.key_counts, attended, &norm_rope, options);
  if (gate.defined()) backend_.sigmoid_gate(attended, gate);
  project_attention_out(backend_, layer, attended, attention_out);
}

Tensor DecoderModel::compute_logits(const Tensor& hidden, const Tensor& last_rows) {
  Tensor selected = hidden;
  if (last_rows.defined()) {
    selected = workspace_.get("last_hidden", DType::kF32, {last_rows.numel(), config_.hidden_size});
    backend_.gather_rows(hidden, last_rows, selected);
  }
  Tensor normed = workspace_.get("final_normed", DType::kF32, selected.shape());
  backend_.rmsnorm(selected, final_norm_, config_.rms_norm_eps, normed);
  Tensor logits = workspace_.get("logits", DType::kF32, {selected.dim(0), config_.vocab_size});
  backend_.matmul(normed, lm_head_, logits);
  return logits;
}

}  // namespace flashq
