// Random tensors written into a checkpoint by `flashq-model make-tiny` (make_tiny.h): matrices
// ~ U(-a, a) with variance 1/in, so activations keep unit scale through the layers; norm weights
// near 1 but not equal (near 0 for families that store them zero-centred), so a missing or
// misplaced norm changes the logits.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "tools/flashq_model/random_weights.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"

namespace flashq {

struct RandomTensors {
  SafetensorsWriter& writer;
  RandomWeights& random;
  DType dtype;

  void matrix(const std::string& name, int64_t rows, int64_t cols) {
    const float spread = std::sqrt(3.0f / static_cast<float>(cols));
    writer.add(name, dtype, {rows, cols}, random.fill(dtype, rows * cols, 0.0f, spread));
  }
  void norm(const std::string& name, int64_t size) {
    writer.add(name, dtype, {size}, random.fill(dtype, size, 1.0f, 0.25f));
  }
  // A norm weight stored around 0 (the scale is 1 + w: ModelConfig::zero_centred_norms).
  void zero_centred_norm(const std::string& name, int64_t size) {
    writer.add(name, dtype, {size}, random.fill(dtype, size, 0.0f, 0.25f));
  }
  // Biases of the size of a typical activation, so a missing or misplaced one shows.
  void bias(const std::string& name, int64_t size) {
    writer.add(name, dtype, {size}, random.fill(dtype, size, 0.0f, 0.5f));
  }
  // An MXFP4 weight of every expert, [experts, out, in] in blocks and scales as gpt-oss stores
  // it: random codes, and scales that give the elements a spread near sqrt(3 / in), as matrix()'s.
  void mxfp4_experts(const std::string& name, int64_t experts, int64_t out, int64_t in) {
    const int64_t groups = in / 32;
    std::string blocks(static_cast<size_t>(experts * out * in / 2), '\0');
    for (char& byte : blocks) byte = static_cast<char>(random.next() & 0xff);
    // E2M1 codes drawn uniformly have a root mean square of about 2.93.
    const int base = 127 + static_cast<int>(std::lround(std::log2(1.0 / (2.93 * std::sqrt(static_cast<double>(in))))));
    std::string scales(static_cast<size_t>(experts * out * groups), '\0');
    for (char& scale : scales) scale = static_cast<char>(base + static_cast<int>(random.next() % 3) - 1);
    writer.add(name + "_blocks", DType::kU8, {experts, out, groups, 16}, std::move(blocks));
    writer.add(name + "_scales", DType::kU8, {experts, out, groups}, std::move(scales));
  }
  // gpt-oss's MLP: a router with bias, and every expert's gate_up and down stacked, in MXFP4.
  void add_mxfp4_experts(const std::string& p, const ModelConfig& c) {
    const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size, experts = c.moe.num_experts;
    matrix(p + "mlp.router.weight", experts, hidden);
    bias(p + "mlp.router.bias", experts);
    mxfp4_experts(p + "mlp.experts.gate_up_proj", experts, 2 * inter, hidden);
    writer.add(p + "mlp.experts.gate_up_proj_bias", dtype, {experts, 2 * inter},
               random.fill(dtype, experts * 2 * inter, 0.0f, 0.5f));
    mxfp4_experts(p + "mlp.experts.down_proj", experts, hidden, inter);
    writer.add(p + "mlp.experts.down_proj_bias", dtype, {experts, hidden},
               random.fill(dtype, experts * hidden, 0.0f, 0.5f));
  }
  // Qwen3-MoE's sparse MLP: the router and each expert's three projections.
  void add_experts(const std::string& p, const ModelConfig& c) {
    if (c.moe.layout == ExpertLayout::kStackedMxfp4) return add_mxfp4_experts(p, c);
    const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size;
    matrix(p + "mlp.gate.weight", c.moe.num_experts, hidden);
    for (int64_t e = 0; e < c.moe.num_experts; ++e) {
      const std::string expert = p + "mlp.experts." + std::to_string(e) + ".";
      matrix(expert + "gate_proj.weight", inter, hidden);
      matrix(expert + "up_proj.weight", inter, hidden);
      matrix(expert + "down_proj.weight", hidden, inter);
    }
  }
  void add_layer(const std::string& p, const ModelConfig& c, bool sparse_mlp = false) {
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
    const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
    norm(p + "input_layernorm.weight", hidden);
    matrix(p + "self_attn.q_proj.weight", q_width, hidden);
    matrix(p + "self_attn.k_proj.weight", kv_width, hidden);
    matrix(p + "self_attn.v_proj.weight", kv_width, hidden);
    matrix(p + "self_attn.o_proj.weight", hidden, q_width);
    if (c.attention_bias) {
      bias(p + "self_attn.q_proj.bias", q_width);
      bias(p + "self_attn.k_proj.bias", kv_width);
      bias(p + "self_attn.v_proj.bias", kv_width);
      bias(p + "self_attn.o_proj.bias", hidden);
    }
    // Sink logits about the size of a row's scores, so that they take a visible share.
    if (c.attention_sinks)
      writer.add(p + "self_attn.sinks", dtype, {c.num_heads}, random.fill(dtype, c.num_heads, 0.0f, 2.0f));
    if (c.qk_norm) {
      norm(p + "self_attn.q_norm.weight", c.head_dim);
      norm(p + "self_attn.k_norm.weight", c.head_dim);
    }
    norm(p + "post_attention_layernorm.weight", hidden);
    if (sparse_mlp) return add_experts(p, c);
    matrix(p + "mlp.gate_proj.weight", inter, hidden);
    matrix(p + "mlp.up_proj.weight", inter, hidden);
    matrix(p + "mlp.down_proj.weight", hidden, inter);
    if (c.mlp_bias) {
      bias(p + "mlp.gate_proj.bias", inter);
      bias(p + "mlp.up_proj.bias", inter);
      bias(p + "mlp.down_proj.bias", hidden);
    }
  }
};

}  // namespace flashq
