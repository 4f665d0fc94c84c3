// Ids the gateway gives its jobs (and so its responses): a prefix naming the kind, then 24
// random hex digits, so ids never repeat across gateways or restarts. The broker takes a job's
// id as given, and every answer names it, so the gateway can match answers without a table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashq::gateway {

std::string new_job_id(std::string_view prefix);  // e.g. "chatcmpl-3f9a..."
std::int64_t unix_seconds_now();

}  // namespace flashq::gateway
