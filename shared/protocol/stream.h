// The stream socket (XPUB): each job's EVENTs under the topic "job/<id>", as four frames
// [topic] [tag] [EVENT] [body]. Subscriptions are prefix matches, so "job/a" also receives
// "job/ab": from_stream_frames checks that the topic is exactly the event's own.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shared/protocol/producer_messages.h"

namespace flashq::protocol {

inline constexpr std::string_view kStreamTopicPrefix = "job/";

std::string stream_topic(std::string_view job_id);  // "job/<id>"

std::vector<std::string> to_stream_frames(const Event& event);
// kProtocol unless there are four frames, the last three are an EVENT and the topic is
// "job/<event id>".
Event from_stream_frames(std::span<const std::string_view> frames);

}  // namespace flashq::protocol
