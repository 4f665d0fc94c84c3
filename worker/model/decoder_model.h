// The decoder-only target model on any backend: the TargetModel of every family here (Qwen3,
// Llama 3, Qwen3-MoE, gpt-oss, the hybrid Qwen3.5 / Qwen3-Next; docs/models.md), whose layers
// (decoder_layer.h) differ only in options their config decides: the q/k norm, biases, RoPE
// scaling, tied embeddings, attention sinks and sliding windows, a mixture of experts (moe_mlp.h,
// MXFP4 for gpt-oss) in place of the dense MLP on sparse layers, and on a hybrid's linear layers
// a Gated DeltaNet (gated_delta_net.h) over the sequence's recurrent state in place of attention.
// One forward pass runs a batch of sequence chunks together: every chunk's tokens are appended
// on top of its own KV cache, the projections run once over all rows, attention runs per
// chunk. Prefill (N tokens), decode (1 token) and verification (B tokens) are the same call.
// The residual stream after any list of layers can be captured (the DFlash taps, docs/dflash.md
// §2.1). The model sees token ids only: chat templates are the tokenizer's (worker/text).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/decoder_layer.h"
#include "worker/model/forward_pass.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_config.h"
#include "worker/model/pass_recorder.h"
#include "worker/model/safetensors.h"
#include "worker/model/target_model.h"
#include "worker/model/workspace.h"

namespace flashq {

class DecoderModel final : public TargetModel {
 public:
  // The weights `config` names, read from `weights` onto `backend` (kBadCheckpoint naming a
  // tensor that is missing or of the wrong shape).
  DecoderModel(ModelConfig config, const WeightStore& weights, Backend& backend);

  const ModelConfig& config() const override { return config_; }
  Backend& backend() const override { return backend_; }
  KvCache make_cache(int64_t max_length) const override;
  using TargetModel::make_cache;  // the paged one
  ForwardOutput forward(std::span<const SequenceChunk> chunks, const ForwardOptions& options) override;
  void settle_recurrent_state(KvCache& cache) override;
  void set_capture_passes(bool on) override { recorder_.set_enabled(on); }
  int64_t replayed_passes() const override { return recorder_.replayed(); }
  const Tensor& embedding_table() const override { return embed_tokens_; }
  const Tensor& lm_head() const override { return lm_head_; }

 private:
  // What a recorded pass depends on besides the contents of its input tensors.
  struct PassKey {
    std::vector<int64_t> chunk_rows;
    std::vector<const void*> caches;
    LogitRows logits = LogitRows::kNone;
    std::vector<int64_t> tap_layers;
    uint64_t workspace = 0;  // Workspace::generation(): no buffer moved since
    bool operator==(const PassKey&) const = default;
  };

  // The int32 tensors of a pass's rows, which the host fills before the ops run.
  struct PassRows {
    Tensor ids, positions;
    Tensor key_counts;  // the keys each row's attention sees (causal over its chunk's cache)
    Tensor last_rows;   // the rows whose logits are wanted, when not every row's
    Tensor window_rows;  // where a windowed layer stores each row (KvCache::window_slot), when any
    Tensor store_rows;   // where every other layer stores each row: its slot in the chunk's cache
    std::vector<Tensor> block_tables;   // per chunk: a paged cache's block ids, else undefined
    std::vector<Tensor> window_tables;  // per chunk: a paged cache's windowed layers' block ids
  };

  // How forward() runs its chunks: per chunk the rows of its first pass (all of them, unless a
  // prefill keeps a recurrent-state snapshot at a point inside them: KvCache::snapshot_boundary)
  // and where that snapshot is kept (-1: none); split when any chunk runs in parts (that, or a
  // windowed cache's long chunk).
  struct PartPlan {
    std::vector<int64_t> first_rows, snapshot_at;
    bool split = false;
  };
  PartPlan plan_parts(std::span<const SequenceChunk> chunks, const ForwardOptions& options) const;
  PassKey pass_key(std::span<const SequenceChunk> chunks, const ForwardOptions& options) const;
  // forward() in passes, their logits and taps gathered in chunk order: a windowed cache's chunk
  // in parts of at most KvCache::kMaxRowsPerPass rows (what a windowed layer takes in one pass),
  // any other chunk in parts ending where its state snapshots are kept (plan_parts).
  ForwardOutput forward_in_parts(std::span<const SequenceChunk> chunks, const ForwardOptions& options);
  // Every op of a pass.
  ForwardOutput run_pass(std::span<const SequenceChunk> chunks, const ForwardOptions& options, const PassRows& rows);
  void run_attention(const DecoderLayer& layer, int64_t layer_index, std::span<const SequenceChunk> chunks,
                     const Tensor& normed, const PassRows& rows, Tensor& attention_out);
  // Logits of `hidden`'s rows, or of those `last_rows` names when defined.
  Tensor compute_logits(const Tensor& hidden, const Tensor& last_rows);

  // Before a pass: a truncated recurrent state's kept rows replayed (settle_recurrent_state), then
  // the pass begun on each chunk's state (RecurrentState::begin_pass), as one that may be
  // truncated only when it is a verification (every row's logits asked for).
  void prepare_recurrent_states(std::span<const SequenceChunk> chunks, const ForwardOptions& options);
  // kInvalidArgument, before anything changes, for a token outside the vocabulary.
  void check_token_ids(std::span<const SequenceChunk> chunks) const;

  ModelConfig config_;
  Backend& backend_;
  Workspace workspace_;
  std::vector<CacheChunk> cache_chunks_;  // reused every layer, so a step allocates nothing
  std::vector<int32_t> block_table_ints_;  // every paged chunk's table, one after another
  Tensor embed_tokens_, final_norm_, lm_head_;
  std::vector<DecoderLayer> layers_;
  // Per layer: its index among the cache's attention layers, or among the recurrent state's
  // linear layers.
  std::vector<int64_t> cache_layers_;
  PassRecorder<PassKey, ForwardOutput> recorder_;
};

}  // namespace flashq
