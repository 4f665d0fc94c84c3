// What the engine, the worker, the DFlash drafter and the benchmarks need of a target model,
// whatever its family: its configuration, KV caches, one batched forward pass with taps, the
// embedding table and LM head the drafter borrows. (How a chat becomes its prompt belongs to the
// checkpoint: worker/text/load_chat_template.h.) A family (worker/model/qwen3.h, ...)
// implements it; model_registry.h picks the family a checkpoint
// names. Attention biases, sliding windows and attention sinks, when a family has them, are that
// family's weights and options of the backend's attention ops, never part of this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/backend.h"
#include "worker/model/forward_pass.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_config.h"
#include "worker/model/paged_kv_store.h"

namespace flashq {

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  // Layers, hidden size, vocabulary, context (max_position_embeddings), and the special tokens
  // that end a turn (eos_token_ids, config.json and generation_config.json).
  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() const = 0;

  // A cache for one sequence of at most max_length positions (capped at the model's context),
  // with the recurrent state of the model's linear-attention layers when it has any.
  virtual KvCache make_cache(int64_t max_length) const = 0;

  // The element type of every cache made after (kv_cache_dtype.h): kBF16 (the default, as the
  // programs' --kv-cache-dtype) or kF32.
  DType kv_cache_dtype() const { return kv_cache_dtype_; }
  void set_kv_cache_dtype(DType dtype);

  // The form a hybrid model's prefill runs the delta rule in (verification, decoding and the
  // replay after a truncation always take the recurrent form): kAuto, the backend's preference
  // (Backend::prefers_chunked_delta_rule: chunked on a GPU, recurrent on the CPU).
  enum class DeltaRuleForm { kAuto, kRecurrent, kChunked };
  DeltaRuleForm delta_rule_form() const { return delta_rule_form_; }
  void set_delta_rule_form(DeltaRuleForm form) { delta_rule_form_ = form; }

  // A paged KV cache (kv_cache.h, paged_kv_store.h): the bytes a block of `block_size` positions
  // takes (of the larger of its full-attention and its sliding-window layers), the store of
  // `blocks` blocks (from `pool` when given), and one sequence's cache over it.
  int64_t paged_bytes_per_block(int64_t block_size) const;
  // The store's layer slots: max(full-attention layers, sliding-window layers); a hybrid model's
  // linear-attention layers have none.
  int64_t paged_layer_slots() const;
  // `draft_context`: a drafter's context rows kept beside the target's (none: layers 0).
  std::unique_ptr<PagedKvStore> make_paged_store(int64_t blocks, int64_t block_size, CachePool* pool = nullptr,
                                                 KvShape draft_context = {}) const;
  KvCache make_cache(int64_t max_length, PagedKvStore& store) const;

  // Appends every chunk's tokens on top of its own cache, in one pass over all rows, and returns
  // the logits and taps asked for. kInvalidArgument for a tap layer outside the model or a chunk
  // beyond its cache's max_length (the context); an error, and no cache changed, for a token
  // outside the vocabulary.
  virtual ForwardOutput forward(std::span<const SequenceChunk> chunks, const ForwardOptions& options) = 0;
  // Brings `cache`'s recurrent state (a hybrid model's) up to its length: the replay a truncation
  // left owed, which the next pass would run first. For a sequence that ends or is preempted, so
  // that the state kept for its blocks (state_snapshots.h) is the one after its last position.
  virtual void settle_recurrent_state(KvCache& cache) = 0;

  // Records passes and replays them (pass_recorder.h): a pass with the same rows per chunk,
  // caches and options as the last one run directly is recorded once and replayed while they
  // repeat, launching a whole pass as one graph. Off by default.
  virtual void set_capture_passes(bool on) = 0;
  virtual int64_t replayed_passes() const = 0;

  // [vocab, hidden] each; borrowed by the DFlash drafter, which has neither of its own.
  virtual const Tensor& embedding_table() const = 0;
  virtual const Tensor& lm_head() const = 0;

 protected:
  // A zero recurrent state for one sequence, or null when the model has no linear-attention layers.
  std::unique_ptr<RecurrentState> make_recurrent_state() const;

 private:
  DType kv_cache_dtype_ = DType::kBF16;
  DeltaRuleForm delta_rule_form_ = DeltaRuleForm::kAuto;
};

}  // namespace flashq
