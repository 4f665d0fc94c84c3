// The routing figure of `flashq-bench agentic`: one flashq-broker and several flashq-worker
// processes, conversations of the agentic script submitted over ZeroMQ, each turn a job naming
// its conversation as `session` and extending the previous turn's prompt and output. Every
// conversation's first turn runs first; then each conversation goes on at its own pace, its next
// turn submitted a tool call's time (seeded) after its last one finished. Run once per routing
// policy, each on a fresh cluster; reported: the share of later turns' prompt tokens the workers
// found in their prefix caches (their /metrics counters, read after the first turns and at the
// end) and the throughput.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/flashq_bench/agentic_conversation.h"

namespace flashq {

struct RoutingFigureOptions {
  std::filesystem::path bin_dir;
  std::filesystem::path log_dir;
  std::string model_dir;
  int workers = 3;
  int64_t conversations = 32;
  int64_t turns = 3;
  int64_t output_tokens = 32;
  int64_t tool_ms = 500;                 // a tool call's mean time between a turn and the next
  uint64_t seed = 1;                     // of the tool calls' times
  std::vector<std::string> worker_args;  // --slots, --device, cache flags
  std::string load_gap;                  // the broker's --routing-load-gap; empty: its default
  std::vector<std::string> policies = {"cache-aware", "least-loaded"};
};

// One arm per policy; `script` writes the conversations (the same for every arm).
nlohmann::ordered_json measure_routing(const RoutingFigureOptions& options, const AgenticScript& script);

}  // namespace flashq
