// How a job attempt ended: the fields of FINAL, of the last stream EVENT's `final` map and of
// STATUS_REPLY's `final` map (docs/protocol.md, "The final map").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flashq::protocol {

class FieldReader;
class MapWriter;

enum class FinishReason : std::uint8_t { kStop, kLength, kCancelled, kDeadline, kError, kRejected };
// "stop", "length", "cancelled", "deadline", "error", "rejected".
std::string_view finish_reason_name(FinishReason reason);

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  bool operator==(const Usage&) const = default;
};

struct SpecStats {
  std::int64_t draft_steps = 0;      // verify passes that carried a draft
  std::int64_t accepted_tokens = 0;  // draft tokens the target kept
  double tau = 0;                    // mean tokens committed per target pass
  bool operator==(const SpecStats&) const = default;
};

struct Timings {
  std::int64_t queue_ms = 0;
  std::int64_t ttft_ms = 0;  // to the first token; 0 when there was none
  std::int64_t total_ms = 0;
  bool operator==(const Timings&) const = default;
};

struct FinalResult {
  FinishReason finish_reason = FinishReason::kStop;
  Usage usage;
  SpecStats spec_stats;
  Timings timings;
  // Required when finish_reason is error, absent for stop and length, optional otherwise.
  std::optional<std::string> error;
  bool operator==(const FinalResult&) const = default;
};

// Writes the fields into `out` (FINAL holds them at its top level, EVENT and STATUS_REPLY in a
// map of their own: use encode_final_result).
void write_final_fields(MapWriter& out, const FinalResult& result);
std::string encode_final_result(const FinalResult& result);
FinalResult read_final_fields(const FieldReader& fields);

}  // namespace flashq::protocol
