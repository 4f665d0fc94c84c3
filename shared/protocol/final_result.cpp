#include "shared/protocol/final_result.h"

#include <limits>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"
#include "shared/protocol/strict_unpack.h"
#include "shared/protocol/wire.h"

namespace flashq::protocol {
namespace {

constexpr std::int64_t kCountMax = std::numeric_limits<std::int64_t>::max();

FinishReason read_finish_reason(const FieldReader& fields) {
  const std::string name = fields.string("finish_reason", {1, kMaxCodeBytes});
  for (FinishReason reason : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled,
                              FinishReason::kDeadline, FinishReason::kError, FinishReason::kRejected}) {
    if (name == finish_reason_name(reason)) return reason;
  }
  fields.fail("finish_reason", "must be one of stop, length, cancelled, deadline, error, rejected");
}

Usage read_usage(const FieldReader& fields) {
  const FieldReader usage = fields.map("usage");
  return {usage.integer("prompt_tokens", 0, kCountMax), usage.integer("completion_tokens", 0, kCountMax)};
}

SpecStats read_spec_stats(const FieldReader& fields) {
  const FieldReader stats = fields.map("spec_stats");
  SpecStats out{stats.integer("draft_steps", 0, kCountMax), stats.integer("accepted_tokens", 0, kCountMax),
                stats.number("tau")};
  if (out.tau < 0) stats.fail("tau", "must be >= 0");
  return out;
}

Timings read_timings(const FieldReader& fields) {
  const FieldReader timings = fields.map("timings");
  return {timings.integer("queue_ms", 0, kCountMax), timings.integer("ttft_ms", 0, kCountMax),
          timings.integer("total_ms", 0, kCountMax)};
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
    case FinishReason::kRejected: return "rejected";
  }
  return "error";
}

void write_final_fields(MapWriter& out, const FinalResult& result) {
  out.string("finish_reason", finish_reason_name(result.finish_reason))
      .map("usage", MapWriter()
                        .integer("prompt_tokens", result.usage.prompt_tokens)
                        .integer("completion_tokens", result.usage.completion_tokens)
                        .finish())
      .map("spec_stats", MapWriter()
                             .integer("draft_steps", result.spec_stats.draft_steps)
                             .integer("accepted_tokens", result.spec_stats.accepted_tokens)
                             .number("tau", result.spec_stats.tau)
                             .finish())
      .map("timings", MapWriter()
                          .integer("queue_ms", result.timings.queue_ms)
                          .integer("ttft_ms", result.timings.ttft_ms)
                          .integer("total_ms", result.timings.total_ms)
                          .finish());
  if (result.error) out.string("error", *result.error);
}

std::string encode_final_result(const FinalResult& result) {
  MapWriter out;
  write_final_fields(out, result);
  std::string packed = out.finish();
#ifndef NDEBUG
  // The final map also goes where no to_wire checks it (Redis's result streams): checked here too.
  try {
    msgpack::object_handle handle = unpack_body(packed, "final");
    (void)read_final_fields(FieldReader(handle.get(), FieldPath{"final", ""}));
  } catch (const Error& e) {
    refused_own_encoding("final map", e.what());
  }
#endif
  return packed;
}

FinalResult read_final_fields(const FieldReader& fields) {
  FinalResult result;
  result.finish_reason = read_finish_reason(fields);
  result.usage = read_usage(fields);
  result.spec_stats = read_spec_stats(fields);
  result.timings = read_timings(fields);
  result.error = fields.optional_string("error", {1, kMaxMessageBytes});
  // An error is never reported as success, and success never carries an error.
  const bool success = result.finish_reason == FinishReason::kStop || result.finish_reason == FinishReason::kLength;
  if (result.finish_reason == FinishReason::kError && !result.error) {
    fields.fail("error", "missing (required when finish_reason is error)");
  }
  if (success && result.error) {
    fields.fail("error", "not allowed when finish_reason is " + std::string(finish_reason_name(result.finish_reason)));
  }
  return result;
}

}  // namespace flashq::protocol
