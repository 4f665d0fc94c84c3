// The table of the op-parity harness: every case, grouped by the ops they exercise. A new op of
// Backend (kernels/backend_ops.h) gets its cases in one of these groups; backend_ops_test fails
// for an op of that list without a case.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/kernels/op_harness.h"

namespace flashq {

// allocate, upload_weight, the copies, store_rows, gather_rows, capture, replay.
std::vector<OpCase> memory_op_cases();
// matmul, matmul_many, matmul_swiglu, rmsnorm, add_rmsnorm, add, swiglu.
std::vector<OpCase> dense_op_cases();
// embedding, argmax, sample.
std::vector<OpCase> token_op_cases();
// rope, head_norm_rope, attention, store_and_attend, store_kv (with the gpt-oss and paged cases).
std::vector<OpCase> attention_op_cases();
// What gpt-oss adds (op_cases_gptoss.cpp, part of attention_op_cases): attention and
// store_and_attend with sinks and sliding windows over ring caches, and YaRN RoPE in rope,
// head_norm_rope, store_and_attend and store_kv; and key starts (a DFlash drafter's windows).
std::vector<OpCase> gptoss_attention_op_cases();
// Paged attention (op_cases_paged.cpp, part of attention_op_cases): attention through a block
// table, and store_and_attend of many sequences, each with its table, over one shared store.
std::vector<OpCase> paged_attention_op_cases();
// add_bias, and RoPE with linear and llama3 scaling in rope, head_norm_rope, store_and_attend
// and store_kv (the Llama family's).
std::vector<OpCase> llama_op_cases();
// matmul_mxfp4, linear, moe_route, moe_experts (mixture-of-experts layers and MXFP4 weights).
std::vector<OpCase> moe_op_cases();
// gated_delta_rule (Gated DeltaNet's recurrent state: Qwen3.5, Qwen3-Next).
std::vector<OpCase> deltanet_op_cases();
// DFlash2's drafter ops: grouped_dynamic_conv, top_k, selector_pair_scores.
std::vector<OpCase> dflash2_op_cases();

// Every case, made once.
const std::vector<OpCase>& op_table();

// Key counts of consecutive positions first, first + 1, ...: a causal block, each row seeing one
// key more than the row before.
inline std::vector<int32_t> causal_counts(int64_t rows, int32_t first) {
  std::vector<int32_t> counts;
  for (int64_t r = 0; r < rows; ++r) counts.push_back(first + static_cast<int32_t>(r));
  return counts;
}

// One attention case: rows of q against keys [0, count) of one k and v, with per-row counts in
// [0, keys] unless every row sees them all (`same_count`); `misaligned_q` puts q 4 bytes off
// 16-byte alignment, `no_keys` gives every row a count of 0; `cache_dtype` kBF16 keeps k and v
// as a bf16 cache does (the reference attends the same rounded values).
struct AttentionCaseShape {
  std::string name;
  int64_t rows, q_heads, kv_heads, head_dim, keys;
  bool same_count;
  bool misaligned_q = false;
  bool no_keys = false;
  DType cache_dtype = DType::kF32;
};
OpCase attention_case(const AttentionCaseShape& shape);

}  // namespace flashq
