// One sequence in the engine: its request, caches, output so far and speculation state.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/engine/generate.h"
#include "worker/engine/proposer.h"
#include "worker/engine/spec_policy.h"
#include "worker/engine/stop_matcher.h"
#include "worker/model/kv_cache.h"
#include "worker/tokenizer/incremental_decoder.h"

namespace flashq {

enum class SpecMode { kOff, kDflash, kAuto };
// "off", "dflash", "auto"; kInvalidArgument otherwise.
SpecMode parse_spec_mode(std::string_view name);
std::string_view spec_mode_name(SpecMode mode);

struct SequenceRequest {
  GenerationRequest generation;
  SpecMode spec = SpecMode::kAuto;
  int64_t block_size = 0;  // 0: the drafter's own
};

struct SpecStats {
  int64_t draft_steps = 0;      // verify passes that carried a draft
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;  // draft tokens the target kept
  int64_t target_passes = 0;    // after prefill
  int64_t committed_tokens = 0; // tokens produced by those passes
  double tau() const;           // tokens per target pass
};

struct Sequence {
  using Clock = std::chrono::steady_clock;

  Sequence(uint64_t sequence_id, SequenceRequest r, KvCache cache, const Tokenizer& tokenizer);

  uint64_t id;
  SequenceRequest request;
  KvCache target_cache;
  std::unique_ptr<ProposerState> proposer_state;  // null when this sequence never speculates
  Sampler sampler;
  IncrementalDecoder detokenizer;
  StopMatcher stops;
  SequenceSpecState spec_state;

  int32_t next_token = -1;  // chosen by the target and emitted, not yet in target_cache
  std::vector<int32_t> output;
  std::string text;
  std::optional<FinishReason> finish_reason;
  bool cancelled = false;
  SpecStats spec_stats;
  Clock::time_point admitted_at, first_token_at;
};

}  // namespace flashq
