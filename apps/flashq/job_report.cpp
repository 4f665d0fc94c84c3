#include "apps/flashq/job_report.h"

#include <cstdio>
#include <iostream>

namespace flashq {

nlohmann::json final_result_json(const protocol::FinalResult& result) {
  nlohmann::json out = {
      {"finish_reason", protocol::finish_reason_name(result.finish_reason)},
      {"usage", {{"prompt_tokens", result.usage.prompt_tokens}, {"completion_tokens", result.usage.completion_tokens}}},
      {"spec_stats",
       {{"draft_steps", result.spec_stats.draft_steps},
        {"accepted_tokens", result.spec_stats.accepted_tokens},
        {"tau", result.spec_stats.tau}}},
      {"timings",
       {{"queue_ms", result.timings.queue_ms},
        {"ttft_ms", result.timings.ttft_ms},
        {"total_ms", result.timings.total_ms}}},
  };
  if (result.error) out["error"] = *result.error;
  return out;
}

nlohmann::json status_json(const protocol::StatusReply& status) {
  nlohmann::json out = {
      {"id", status.id},
      {"state", protocol::job_state_name(status.state)},
      {"attempt", status.attempt},
      {"seq", status.seq},
  };
  if (status.final_result) out["final"] = final_result_json(*status.final_result);
  return out;
}

nlohmann::json event_json(const protocol::Event& event) {
  nlohmann::json out = {{"id", event.id}, {"seq", event.seq}, {"text", event.text}, {"token_ids", event.token_ids}};
  if (event.final_result) out["final"] = final_result_json(*event.final_result);
  return out;
}

void print_json_line(const nlohmann::json& value) {
  std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

int report_finish(const std::string& id, const protocol::FinalResult& result) {
  const std::string reason(protocol::finish_reason_name(result.finish_reason));
  switch (result.finish_reason) {
    case protocol::FinishReason::kStop:
    case protocol::FinishReason::kLength:
      return 0;
    case protocol::FinishReason::kCancelled:
    case protocol::FinishReason::kDeadline:
      std::fprintf(stderr, "note: job %s ended: %s\n", id.c_str(), reason.c_str());
      return 0;
    case protocol::FinishReason::kError:
    case protocol::FinishReason::kRejected:
      break;
  }
  std::fprintf(stderr, "error: job %s failed: %s%s%s\n", id.c_str(), reason.c_str(), result.error ? ": " : "",
               result.error ? result.error->c_str() : "");
  return kExitJobFailed;
}

}  // namespace flashq
