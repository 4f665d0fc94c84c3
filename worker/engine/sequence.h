// One sequence in the engine: its request, caches, output so far and speculation state.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/engine/generation_request.h"
#include "worker/engine/proposer.h"
#include "worker/engine/spec_policy.h"
#include "worker/engine/token_constraint.h"
#include "worker/model/kv_cache.h"

namespace flashq {

enum class SpecMode { kOff, kDflash, kAuto };
// "off", "dflash", "auto"; kInvalidArgument otherwise.
SpecMode parse_spec_mode(std::string_view name);
std::string_view spec_mode_name(SpecMode mode);

struct SequenceRequest {
  GenerationRequest generation;
  SpecMode spec = SpecMode::kAuto;
  int64_t block_size = 0;  // 0: the drafter's own
  // What the output may be (token_constraint.h), in its state before the first output token;
  // null: anything. Stateful: one per sequence.
  std::shared_ptr<TokenConstraint> constraint;
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

  Sequence(uint64_t sequence_id, SequenceRequest r, KvCache cache);

  uint64_t id;
  SequenceRequest request;
  KvCache target_cache;
  std::unique_ptr<ProposerState> proposer_state;  // null when this sequence never speculates
  Sampler sampler;
  SequenceSpecState spec_state;

  int32_t next_token = -1;  // chosen by the target and emitted, not yet in target_cache
  // The tokens at positions [0, target_cache.length()): the prompt, then each committed block.
  // What a paged cache registers its full blocks under, and what a preempted sequence recomputes.
  std::vector<int32_t> context;
  // Set while a preempted sequence waits to be admitted again: its caches were given back, and
  // it resumes from `context` and next_token without emitting anything again.
  bool preempted = false;
  uint64_t admission_order = 0;  // increases with each admission (the preemption policy's)
  // Leading positions of the context whose drafter rows came with a cached prefix (the
  // proposer's import_context_blocks); the prefill observes only the positions after them.
  int64_t imported_draft_positions = 0;
  std::vector<int32_t> output;
  // The ids that end its output where a constraint allows them (the model's eos, its stop ids).
  std::vector<int32_t> end_ids;
  std::optional<FinishReason> finish_reason;
  // Asked for from outside (Engine::cancel, Engine::stop): the sequence ends so at the start of
  // the next step, before anything more is computed for it.
  std::optional<FinishReason> requested_end;
  SpecStats spec_stats;
  // added_at: when Engine::add queued it; admitted_at: when the engine took it out of the queue
  // (caches taken, prefill next), unset while it waits for a slot or for cache memory.
  Clock::time_point added_at, admitted_at, first_token_at;
};

}  // namespace flashq
