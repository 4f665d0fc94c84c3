// Test helpers for the engine against the NumPy DFlash references (dflash_reference.py,
// dflash2_reference.py): the greedy speculative request they replay, and each step of the
// engine's trace held to the reference's (where it started, the draft, how much was accepted,
// the bonus token).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/engine/engine.h"

namespace flashq::testing {

// `steps` full blocks of `block_size` after `prompt`, greedy, no end but max_tokens.
inline SequenceRequest reference_request(const std::vector<int32_t>& prompt, int64_t steps, int64_t block_size) {
  SequenceRequest request;
  request.generation.prompt_tokens = prompt;
  request.generation.max_tokens = 1 + steps * block_size;  // no step of the first `steps` is clamped
  request.generation.ignore_eos = true;
  request.spec = SpecMode::kDflash;
  request.block_size = block_size;
  return request;
}

// The first `steps` records of `trace` against the reference's "steps".
inline void expect_steps_match(const std::vector<TraceRecord>& trace, const nlohmann::json& expected, int64_t steps,
                               const std::string& name) {
  ASSERT_GE(trace.size(), static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const nlohmann::json& want = expected["steps"][s];
    const TraceRecord& got = trace[static_cast<size_t>(s)];
    EXPECT_EQ(got.start, want["start"].get<int64_t>()) << name << " step " << s;
    EXPECT_EQ(got.draft, want["draft"].get<std::vector<int32_t>>()) << name << " step " << s;
    EXPECT_EQ(got.accepted, want["accepted"].get<int64_t>()) << name << " step " << s;
    EXPECT_EQ(got.bonus, want["bonus"].get<int32_t>()) << name << " step " << s;
  }
}

}  // namespace flashq::testing
