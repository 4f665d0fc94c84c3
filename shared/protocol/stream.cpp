#include "shared/protocol/stream.h"

#include "shared/error.h"
#include "shared/protocol/wire.h"

namespace flashq::protocol {

std::string stream_topic(std::string_view job_id) { return std::string(kStreamTopicPrefix) + std::string(job_id); }

std::vector<std::string> to_stream_frames(const Event& event) {
  std::vector<std::string> frames = to_frames(to_wire(event));
  frames.insert(frames.begin(), stream_topic(event.id));
  return frames;
}

Event from_stream_frames(std::span<const std::string_view> frames) {
  if (frames.size() != kMessageFrames + 1) {
    throw Error(ErrorCode::kProtocol, "stream message: expected 4 frames (topic, tag, type, body), got " +
                                          std::to_string(frames.size()));
  }
  Event event = from_wire<Event>(from_frames(frames.subspan(1)));
  if (frames[0] != stream_topic(event.id)) {
    throw Error(ErrorCode::kProtocol, "stream message: topic does not match EVENT field id (expected " +
                                          stream_topic(event.id) + ")");
  }
  return event;
}

}  // namespace flashq::protocol
