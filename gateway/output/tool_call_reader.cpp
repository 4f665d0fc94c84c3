// One JSON tool call into deltas, validated or incremental.
#include "gateway/output/tool_call_reader.h"

#include <utility>

namespace flashq::gateway {

ToolCallReader::ToolCallReader(ArgumentStreaming mode, ToolCallIdGenerator make_id)
    : mode_(mode), make_id_(std::move(make_id)) {}

void ToolCallReader::begin(std::string_view opening) {
  scanner_.reset();
  held_ = std::string(opening);
  started_ = false;
  byte_consumed_ = false;
}

void ToolCallReader::send_start(OutputDeltas& out) {
  OutputDelta start;
  start.kind = DeltaKind::kToolCallStart;
  start.index = next_index_;
  start.id = make_id_(next_index_);
  start.name = scanner_.name();
  out.push_back(std::move(start));
  started_ = true;
}

ToolCallReader::Outcome ToolCallReader::fail(bool byte_consumed) {
  byte_consumed_ = byte_consumed;
  if (started_) {
    // The start and the arguments so far are sent; this call ends without kToolCallEnd and its
    // index stays taken.
    ++next_index_;
    started_ = false;
  }
  return Outcome::kFailed;
}

ToolCallReader::Outcome ToolCallReader::push(char c, OutputDeltas& out) {
  const JsonCallScanner::Step step = scanner_.push(c);
  const bool incremental = mode_ == ArgumentStreaming::kIncremental;
  switch (step) {
    case JsonCallScanner::Step::kMismatch:
      return fail(false);
    case JsonCallScanner::Step::kHeader:
      held_ += c;
      return Outcome::kReading;
    case JsonCallScanner::Step::kArgumentsBegin:
      if (!incremental) {
        held_ += c;
        return Outcome::kReading;
      }
      send_start(out);
      held_.clear();  // the text before the arguments is the call's own syntax, now sent as one
      append_text(out, DeltaKind::kToolCallArguments, std::string_view(&c, 1), next_index_);
      return Outcome::kReading;
    case JsonCallScanner::Step::kArgument:
    case JsonCallScanner::Step::kArgumentsEnd:
      if (!incremental) {
        held_ += c;
      } else {
        append_text(out, DeltaKind::kToolCallArguments, std::string_view(&c, 1), next_index_);
      }
      if (step == JsonCallScanner::Step::kArgumentsEnd && !scanner_.arguments_valid()) {
        if (incremental) return fail(true);
        held_.pop_back();  // the caller reads the failing byte again, as content
        return fail(false);
      }
      return Outcome::kReading;
    case JsonCallScanner::Step::kStringArgumentsEnd:
      if (!scanner_.arguments_valid()) return fail(false);
      held_ += c;
      if (incremental) {
        // A string is sent decoded, so it is sent whole.
        send_start(out);
        append_text(out, DeltaKind::kToolCallArguments, scanner_.arguments(), next_index_);
        held_.clear();
      }
      return Outcome::kReading;
    case JsonCallScanner::Step::kCallEnd: {
      if (!incremental) {
        send_start(out);
        append_text(out, DeltaKind::kToolCallArguments, scanner_.arguments(), next_index_);
      }
      OutputDelta end;
      end.kind = DeltaKind::kToolCallEnd;
      end.index = next_index_;
      out.push_back(std::move(end));
      ++next_index_;
      started_ = false;
      held_.clear();
      return Outcome::kComplete;
    }
  }
  return fail(false);
}

ToolCallReader::Outcome ToolCallReader::finish() { return fail(false); }

std::string ToolCallReader::take_unsent() { return std::exchange(held_, std::string()); }

}  // namespace flashq::gateway
