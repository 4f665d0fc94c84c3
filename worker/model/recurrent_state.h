// The recurrent state of one sequence in the Gated DeltaNet layers of a hybrid model (Qwen3.5,
// Qwen3-Next; docs/models.md): per linear layer the conv's last K - 1 inputs (kept apart for the
// q, k and v channels, which the layer convolves separately) and the delta rule's matrix S
// [value heads, key head dim, value head dim], float32 on the backend's device. It lives beside
// the sequence's KV cache (kv_cache.h), which holds the attention layers' keys and values.
//
// Truncation (a rejected draft): the state has no rows to drop, so a pass that may be truncated
// (a verification block, 2 to kMaxTruncatableRows rows) first keeps the state as it was before the
// pass (the checkpoint) and its rows' inputs to the recurrence (the conv's inputs, g and beta).
// Truncating into that pass leaves n of its rows: the checkpoint is restored and the recurrence
// alone re-runs over the n kept rows from their saved inputs, before the next pass
// (gated_delta_net.h: replay_kept_rows). The projections, attention and MLPs of the block are not
// run again; the rejected rows leave no trace. docs/decisions.md, "Recurrent state under
// speculation", weighs this against keeping a state per drafted position.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/model_config.h"

namespace flashq {

class RecurrentState {
 public:
  // The most rows of a pass that can be truncated afterwards (a verification block's).
  static constexpr int64_t kMaxTruncatableRows = 64;

  // What one linear layer keeps.
  struct Layer {
    Tensor conv_q, conv_k, conv_v;  // [K - 1, key_dim], [K - 1, key_dim], [K - 1, value_dim]
    Tensor matrix;                  // S: [value_heads, key_head_dim, value_head_dim]
  };
  // A truncatable pass's inputs to the recurrence in one linear layer, its rows first.
  struct PassInputs {
    Tensor x_q, x_k, x_v;  // the conv's inputs, [kMaxTruncatableRows, width]
    Tensor g, beta;        // [kMaxTruncatableRows, value_heads]
  };

  // Zero state for `linear_layers` layers of `shape`.
  RecurrentState(Backend& backend, const LinearAttentionConfig& shape, int64_t linear_layers);

  Layer& layer(int64_t linear_index) { return layers_[static_cast<size_t>(linear_index)]; }
  int64_t layers() const { return static_cast<int64_t>(layers_.size()); }

  // A pass at positions from `length` begins, of `truncatable_rows` rows that may be truncated
  // into after (a verification's; 0 for any other pass): when there are 2 to kMaxTruncatableRows,
  // the state before it is kept. Settles a truncation first (kept_rows() must be -1: the decoder
  // replays before it calls this).
  void begin_pass(int64_t length, int64_t truncatable_rows);
  // Whether the pass under way keeps its inputs (inputs(i) then holds room for its rows).
  bool keeps_inputs() const { return pass_rows_ > 0; }
  PassInputs& inputs(int64_t linear_index) { return inputs_[static_cast<size_t>(linear_index)]; }

  // The sequence now ends at `length`, from `current`: a no-op when equal; inside the last
  // truncatable pass, the checkpoint is restored and the kept rows are owed a replay
  // (kept_rows()); anything else is kInternal (the engine truncates only into its last block).
  void truncate(int64_t length, int64_t current);
  // Rows of the last pass owed a replay after a truncation, or -1.
  int64_t kept_rows() const { return kept_rows_; }
  void replayed() { kept_rows_ = -1; }

  // Back to the zero state of an empty sequence (preemption, reuse).
  void clear();
  // The live state made equal to `other`'s (a prefix cache's snapshot, state_snapshots.h); no
  // truncation is owed after.
  void copy_live_from(const RecurrentState& other);

  // The bytes the live state holds per sequence, and those a truncatable pass adds.
  int64_t state_bytes() const { return state_bytes_per_layer() * layers(); }
  int64_t state_bytes_per_layer() const;
  int64_t checkpoint_bytes() const;

 private:
  Layer make_layer() const;
  void copy_layer(const Layer& from, Layer& to);

  Backend& backend_;
  LinearAttentionConfig shape_;
  std::vector<Layer> layers_;
  std::vector<Layer> checkpoint_;   // made at the first truncatable pass
  std::vector<PassInputs> inputs_;  // likewise
  int64_t pass_start_ = -1;         // the last truncatable pass's first position, or -1
  int64_t pass_rows_ = 0;           // its rows while it is the last pass, else 0
  int64_t kept_rows_ = -1;
};

}  // namespace flashq
