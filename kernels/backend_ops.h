// The ops of the Backend interface (kernels/backend.h), by name: what the op-parity harness
// (tests/kernels/backend_ops_test.cpp) runs on every available backend against a plain
// reference. A new op of Backend must be added here; the harness then fails until the op has a
// case in its table (tests/kernels/op_cases_*.cpp).
//
// Every op that reads or writes tensors is listed. device(), name() and memory() describe the
// backend and are not ops.
#pragma once

#include <array>
#include <string_view>

namespace flashq {

inline constexpr auto kBackendOps = std::to_array<std::string_view>({
    // memory
    "allocate",
    "upload_weight",
    "copy_to_host",
    "copy_from_host",
    "copy_rows",
    "copy_columns",
    // products
    "matmul",
    "matmul_many",
    "matmul_swiglu",
    // mixture of experts and MXFP4 weights
    "matmul_mxfp4",
    "linear",
    "moe_route",
    "moe_experts",
    // norms, positions, element-wise
    "rmsnorm",
    "add_rmsnorm",
    "add",
    "add_bias",
    "rope",
    "head_norm_rope",
    "swiglu",
    // attention and the KV cache
    "attention",
    "store_rows",
    "gather_rows",
    "store_and_attend",
    "store_kv",
    // recurrent state (Gated DeltaNet)
    "delta_rule_gates",
    "gated_rmsnorm",
    "sigmoid_gate",
    "causal_conv1d",
    "gated_delta_rule",
    "gated_delta_rule_chunked",
    // DFlash2's drafter
    "grouped_dynamic_conv",
    "top_k",
    "selector_pair_scores",
    // tokens
    "embedding",
    "argmax",
    "sample",
    // recording
    "capture",
    "replay",
});

}  // namespace flashq
