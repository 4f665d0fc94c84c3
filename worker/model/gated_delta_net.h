// The Gated DeltaNet layer of the hybrid families (Qwen3.5, Qwen3-Next; docs/models.md): linear
// attention whose memory is a recurrent state per sequence (recurrent_state.h) instead of keys
// and values. Per row: the input projections (q, k, v for the conv, z for the output gate, b and
// a for the gates), the depthwise causal conv with SiLU over q, k and v, beta = sigmoid(b) and
// g = -exp(A_log) * softplus(a + dt_bias), the gated delta rule from the sequence's state, the
// gated RMSNorm with silu(z), and the output projection: all backend ops.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kernels/backend.h"
#include "worker/model/forward_pass.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"
#include "worker/model/workspace.h"

namespace flashq {

struct GatedDeltaNet {
  // The conv's inputs and their taps, split by part (q, k, v: each channel is convolved alone, so
  // the parts run as three convs): Qwen3.5's in_proj_qkv and conv1d rows in order; Qwen3-Next's
  // in_proj_qkvz rows gathered from their per-key-head groups.
  Tensor q_proj, k_proj, v_proj;  // [key_dim, H], [key_dim, H], [value_dim, H]
  Tensor q_conv, k_conv, v_conv;  // [key_dim, K], [key_dim, K], [value_dim, K]
  Tensor z_proj, b_proj, a_proj;  // [value_dim, H], [value heads, H], [value heads, H]
  Tensor a_log, dt_bias;          // [value heads]
  Tensor norm;                    // [value_head_dim]: the gated RMSNorm's weight (not zero-centred)
  Tensor out_proj;                // [H, value_dim]
};

// The tensors of `prefix`linear_attn.* in the layout config.linear_attention names. kNotFound for
// a tensor missing, kBadCheckpoint for one of the wrong shape or dtype.
GatedDeltaNet load_gated_delta_net(const WeightStore& weights, const std::string& prefix, const ModelConfig& config,
                                   Backend& backend);

// out [R, H] = the layer over `normed` [R, H], the rows of `chunks` in order, each chunk's rows
// continuing its cache's recurrent state (linear layer `linear_index` of it); a truncatable
// pass's rows' inputs are kept in the state (RecurrentState::inputs). `chunked_prefill`: a pass
// that keeps no inputs (a prefill) runs the delta rule in its chunked form.
void run_gated_delta_net(Backend& backend, Workspace& workspace, const GatedDeltaNet& layer, const ModelConfig& config,
                         int64_t linear_index, std::span<const SequenceChunk> chunks, const Tensor& normed,
                         bool chunked_prefill, Tensor& out);

// After a truncation into a cache's last pass (RecurrentState::kept_rows): the recurrence of
// linear layer `linear_index` re-run over the kept rows' saved inputs from the restored state.
void replay_kept_rows(Backend& backend, Workspace& workspace, const GatedDeltaNet& layer, const ModelConfig& config,
                      int64_t linear_index, RecurrentState& state);

}  // namespace flashq
