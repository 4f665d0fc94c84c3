#include "client/stream_subscriber.h"

#include <spdlog/spdlog.h>

#include "client/flashq_client.h"
#include "shared/error.h"
#include "shared/protocol/stream.h"
#include "shared/transport/frames.h"

namespace flashq {

StreamSubscriber::StreamSubscriber(std::shared_ptr<zmq::context_t> context, const std::string& endpoint,
                                   std::string job_id, const std::optional<CurveClientKeys>& curve)
    : context_(std::move(context)), socket_(*context_, zmq::socket_type::sub), job_id_(std::move(job_id)) {
  check_job_id(job_id_);
  configure_socket(socket_);
  if (curve) make_curve_client(socket_, *curve);
  socket_.set(zmq::sockopt::subscribe, protocol::stream_topic(job_id_));
  try {
    socket_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::kInvalidArgument, "stream endpoint " + endpoint + ": " + e.what());
  }
}

StreamSubscriber::StreamSubscriber(const std::string& endpoint, std::string job_id,
                                   const std::optional<CurveClientKeys>& curve)
    : StreamSubscriber(std::make_shared<zmq::context_t>(), endpoint, std::move(job_id), curve) {}

std::optional<protocol::Event> StreamSubscriber::next(int timeout_ms) {
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  while (std::optional<std::vector<std::string>> frames = receive_frames(socket_, deadline)) {
    try {
      const std::vector<std::string_view> views = frame_views(*frames);
      protocol::Event event = protocol::from_stream_frames(views);
      // The topic matched as a prefix only ("job/ab" for "a").
      if (event.id == job_id_) return event;
    } catch (const Error& e) {
      spdlog::warn("dropped a malformed stream message for job {}: {}", job_id_, e.what());
    }
  }
  return std::nullopt;
}

}  // namespace flashq
