// How the job commands show a job: its final result, status and events as JSON, and the exit
// code a finished job gives. Exit codes of the job commands: 0 done, 1 the job failed, 2 bad input
// or the broker refused or did not answer, 3 `flashq stream` could not show every event asked for.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "shared/protocol/final_result.h"
#include "shared/protocol/producer_messages.h"

namespace flashq {

inline constexpr int kExitJobFailed = 1;         // finish_reason error or rejected
inline constexpr int kExitStreamIncomplete = 3;  // `flashq stream` missed events it was asked for

// finish_reason, usage, spec_stats, timings, and error when there is one.
nlohmann::json final_result_json(const protocol::FinalResult& result);
// id, state, attempt, seq, and final once finished.
nlohmann::json status_json(const protocol::StatusReply& status);
// id, seq, text, token_ids, and final on the last one.
nlohmann::json event_json(const protocol::Event& event);

// One JSON object on one line of stdout (invalid UTF-8 in model text replaced, never fatal).
void print_json_line(const nlohmann::json& value);

// The exit code for a job that ended this way: 0, or kExitJobFailed with "error: job ... failed"
// on stderr. A cancelled job or one past its deadline exits 0 with a note on stderr, since its
// text is shorter than asked for.
int report_finish(const std::string& id, const protocol::FinalResult& result);

}  // namespace flashq
