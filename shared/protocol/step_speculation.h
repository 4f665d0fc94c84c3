// What speculation did in the engine steps one TOKENS message reports (docs/protocol.md, TOKENS
// `spec`): drafts verified, draft tokens, accepted draft tokens, and per draft position how many
// drafts had that position accepted. The broker counts these as they arrive, so /metrics shows
// acceptance while jobs run, not only when they end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashq::protocol {

class FieldReader;

struct StepSpeculation {
  std::int64_t drafts = 0;           // verify passes that carried a draft
  std::int64_t draft_tokens = 0;     // tokens those drafts proposed
  std::int64_t accepted_tokens = 0;  // of them, kept by the target
  // [i]: drafts whose position i (0 = the first drafted token) was accepted. Acceptance is a
  // prefix of the draft, so the entries never increase and sum to accepted_tokens.
  std::vector<std::int64_t> accepted_per_pos;

  // Adds one draft of `drafted` tokens of which the first `accepted` were kept.
  void add_draft(std::int64_t drafted, std::int64_t accepted);
  bool empty() const { return drafts == 0; }
  bool operator==(const StepSpeculation&) const = default;
};

std::string encode_step_speculation(const StepSpeculation& spec);
// Reads and checks the map at `fields`: counts >= 0, accepted <= draft tokens, drafts <= draft
// tokens, per-position entries <= drafts, never increasing, summing to accepted_tokens.
StepSpeculation read_step_speculation(const FieldReader& fields);

}  // namespace flashq::protocol
