#include "tools/flashq_bench/recurrent_state_bench.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "worker/model/gated_delta_net.h"
#include "worker/model/recurrent_state.h"
#include "worker/model/workspace.h"

namespace flashq {
namespace {

Tensor random_tensor(Backend& backend, DType dtype, Shape shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = backend.allocate(DType::kF32, shape);
  std::vector<float> values(static_cast<size_t>(t.numel()));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : values) x = dist(rng);
  backend.copy_from_host(values.data(), t);
  if (dtype == DType::kF32) return t;
  std::vector<uint16_t> bits;
  for (float x : values) bits.push_back(f32_to_bf16(x));
  Tensor b = backend.allocate(DType::kBF16, std::move(shape));
  backend.copy_from_host(bits.data(), b);
  return b;
}

}  // namespace

void report_speculation_state(Backend& backend, const TimePerCall& time) {
  ModelConfig config;
  config.rms_norm_eps = 1e-6f;
  LinearAttentionConfig& l = config.linear_attention;
  l.key_heads = 16, l.value_heads = 32, l.key_head_dim = 128, l.value_head_dim = 128, l.conv_kernel = 4;
  std::mt19937 rng(9);
  // The recurrence's weights (the replay runs only the convs and the delta rule).
  GatedDeltaNet layer;
  layer.q_conv = random_tensor(backend, DType::kBF16, {l.key_dim(), l.conv_kernel}, rng, -0.5f, 0.5f);
  layer.k_conv = random_tensor(backend, DType::kBF16, {l.key_dim(), l.conv_kernel}, rng, -0.5f, 0.5f);
  layer.v_conv = random_tensor(backend, DType::kBF16, {l.value_dim(), l.conv_kernel}, rng, -0.5f, 0.5f);
  Workspace workspace(backend);
  RecurrentState state(backend, l, 1);
  RecurrentState::Layer& live = state.layer(0);
  RecurrentState per_position(backend, l, 1);  // one more state, the alternative's copy target
  const double state_mb = static_cast<double>(state.state_bytes()) / (1 << 20);

  // One state written where the alternative keeps a row's (a whole layer's state: conv and S).
  RecurrentState::Layer& other = per_position.layer(0);
  const double copy_s = time([&] {
    backend.copy_rows(live.conv_q, other.conv_q, 0);
    backend.copy_rows(live.conv_k, other.conv_k, 0);
    backend.copy_rows(live.conv_v, other.conv_v, 0);
    backend.copy_rows(live.matrix, other.matrix, 0);
  });
  for (const int64_t block : {4, 8, 16}) {
    const int64_t kept = block / 2;
    state.begin_pass(0, block);  // makes the checkpoint and the input rows
    RecurrentState::PassInputs& inputs = state.inputs(0);
    for (Tensor* t : {&inputs.x_q, &inputs.x_k, &inputs.x_v})
      *t = random_tensor(backend, DType::kF32, t->shape(), rng, -1, 1);
    inputs.g = random_tensor(backend, DType::kF32, inputs.g.shape(), rng, -0.1f, 0.0f);
    inputs.beta = random_tensor(backend, DType::kF32, inputs.beta.shape(), rng, 0.0f, 1.0f);
    const double snapshot_s = time([&] { state.begin_pass(0, block); });
    const double restore_and_replay_s = time([&] {
      state.begin_pass(0, block);
      state.truncate(kept, block);
      replay_kept_rows(backend, workspace, layer, config, 0, state);
      state.replayed();
    });
    const double chosen_s = restore_and_replay_s;  // the snapshot, the restore and the replay
    const double per_position_s = static_cast<double>(block + 1) * copy_s;
    std::cout << nlohmann::json{{"kernel", "speculation_state"},
                                {"block", block},
                                {"kept_rows", kept},
                                {"state_mib_per_layer", state_mb},
                                {"snapshot_us", snapshot_s * 1e6},
                                {"snapshot_restore_replay_us", chosen_s * 1e6},
                                {"per_position_states_us", per_position_s * 1e6},
                                {"extra_mib_snapshot", static_cast<double>(state.checkpoint_bytes()) / (1 << 20)},
                                {"extra_mib_per_position", state_mb * static_cast<double>(block)}}
                     .dump()
              << std::endl;
  }
}

}  // namespace flashq
