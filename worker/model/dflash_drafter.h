// The DFlash drafter (docs/dflash.md §2): a small Qwen3-style layer stack (decoder_layer.h, with
// the options its own config names) that fills a whole block of future positions in one forward
// pass (non-causal, unless its config makes layers causal or windowed: §2.5), conditioned on the
// target's hidden states through KV injection. It has no embedding or LM head of its own: it
// borrows the target's, which may be of any family (TargetModel). A DFlash2 drafter (§7) adds a
// grouped dynamic convolution around each sublayer and a candidate selector over its logits.
//
// Per sequence it keeps a draft context cache (a KvCache over the drafter's layers) holding the
// injected keys and values of committed tokens. The cache holds only committed positions, so a
// rejected draft needs no rollback. Positions are absolute and given by the caller: a context
// may skip positions (the proposer drops old ones of a sequence that stopped drafting), since
// attention sees a set of keys, each rotated for its own position.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/candidate_selector.h"
#include "worker/model/decoder_layer.h"
#include "worker/model/drafter_config.h"
#include "worker/model/kv_cache.h"
#include "worker/model/pass_recorder.h"
#include "worker/model/target_model.h"
#include "worker/model/workspace.h"

namespace flashq {

// Target hidden states (taps) of committed tokens of one sequence, [n, K * target_hidden], at
// positions first_position ..., appended to the context.
struct ContextChunk {
  Tensor taps;
  KvCache* context;
  int64_t first_position;
};

// One block to draft: [last_token, MASK x (block_size - 1)] at positions position ...
struct DraftBlock {
  int32_t last_token;
  int64_t block_size;
  KvCache* context;
  int64_t position;
};

class DFlashDrafter {
 public:
  static std::unique_ptr<DFlashDrafter> load(const std::filesystem::path& dir, const TargetModel& target,
                                             Backend& backend);
  DFlashDrafter(DrafterConfig config, const WeightStore& weights, const TargetModel& target, Backend& backend);

  const DrafterConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  // A draft context cache for a sequence of up to max_length tokens (plus room for one block).
  KvCache make_context_cache(int64_t max_length) const;
  // Columns of the taps inject() takes: target_layer_ids.size() * target hidden size.
  int64_t tap_columns() const { return fc_.dim(1); }

  // c(t) = hidden_norm(fc * taps(t)); per layer K = rope(k_norm(k_proj c + k_bias)),
  // V = v_proj c + v_bias, appended.
  void inject(std::span<const ContextChunk> chunks);

  // One pass over every block, each layer attending as its config says (non-causal by default;
  // DrafterLayerAttention). Returns the logits of rows 1..B-1 of each block, in block order:
  // [sum(block_size - 1), vocab]. Valid until the next call.
  Tensor draft(std::span<const DraftBlock> blocks);

  // The draft rows' final-normed hidden states of the last draft() (the selector's input), in the
  // logits' order; valid until the next call.
  const Tensor& last_hidden() const { return last_hidden_; }
  // DFlash2's candidate selector (null for a DFlash drafter).
  CandidateSelector* selector() const { return selector_.get(); }

  // Records draft passes and replays them (pass_recorder.h): the same block sizes over the same
  // context caches, step after step, replay one recording. Off by default.
  void set_capture_passes(bool on) { recorder_.set_enabled(on); }
  // The element type of the context caches made after (kv_cache_dtype.h); the target's, so that
  // a paged store's drafter rows and these caches copy into each other.
  DType kv_cache_dtype() const { return kv_cache_dtype_; }
  void set_kv_cache_dtype(DType dtype) { kv_cache_dtype_ = dtype; }
  int64_t replayed_passes() const { return recorder_.replayed(); }

 private:
  DType kv_cache_dtype_ = DType::kBF16;
  // What a recorded draft pass depends on besides the contents of its input tensors.
  struct DraftKey {
    std::vector<int64_t> block_sizes;
    std::vector<const void*> contexts;
    uint64_t workspace = 0;  // Workspace::generation(): no buffer moved since
    bool operator==(const DraftKey&) const = default;
  };
  DraftKey draft_key(std::span<const DraftBlock> blocks) const;
  // The keys each block row attends under one attention pattern: a count per row and, for a
  // windowed pattern, a start per row (docs/dflash.md §2.5). Rows of the context's cache.
  void append_block_keys(const DrafterLayerAttention& pattern, int64_t context_rows, int64_t block_size,
                         std::vector<int32_t>& counts, std::vector<int32_t>& starts) const;
  // Per layer, the counts and (windowed layers only) starts of its pattern, on the device.
  struct LayerKeys {
    const Tensor* counts = nullptr;
    const Tensor* starts = nullptr;
  };
  // Every op of a draft pass, on tensors the host filled before; row_in_block only for DFlash2.
  Tensor run_draft_pass(std::span<const DraftBlock> blocks, const Tensor& ids, const Tensor& positions,
                        std::span<const LayerKeys> layer_keys, const Tensor& store_rows, const Tensor& output_rows,
                        const Tensor& row_in_block);
  // DFlash2's convolution around a sublayer (z-lab's GroupedDynamicCausalConv): its static taps
  // [K, H] before and after, and the two halves of its projection [K * G, H] of the sublayer's
  // input, which give the dynamic taps of both.
  struct SublayerConv {
    Tensor base_before, base_after, projection_before, projection_after;
  };
  SublayerConv load_sublayer_conv(const WeightStore& weights, const std::string& prefix) const;
  // `in` convolved into `out` (the sublayer's input), and the dynamic taps for after it.
  void convolve_before(const SublayerConv& conv, const Tensor& in, const Tensor& row_in_block, Tensor& out,
                       Tensor& dynamic_after);
  void convolve_after(const SublayerConv& conv, const Tensor& in, const Tensor& dynamic_after,
                      const Tensor& row_in_block, Tensor& out);

  DrafterConfig config_;
  Backend& backend_;
  Workspace workspace_;
  std::vector<CacheChunk> cache_chunks_;  // reused every layer, so a step allocates nothing
  const Tensor embed_tokens_;             // the target's
  const Tensor lm_head_;                  // the target's
  Tensor fc_, hidden_norm_, final_norm_;
  std::vector<DecoderLayer> layers_;
  std::vector<SublayerConv> attention_conv_, mlp_conv_;  // DFlash2 only
  std::unique_ptr<CandidateSelector> selector_;          // DFlash2 only
  Tensor last_hidden_;
  // The distinct attention patterns of the layers, and each layer's index into them.
  std::vector<DrafterLayerAttention> patterns_;
  std::vector<size_t> layer_pattern_;
  PassRecorder<DraftKey, Tensor> recorder_;
};

}  // namespace flashq
