#include "tools/flashq_bench/bench_peers.h"

#include <algorithm>

#include <zmq_addon.hpp>

namespace flashq::bench {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

void send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  std::vector<zmq::const_buffer> buffers;
  for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
  (void)zmq::send_multipart(socket, buffers);
}

std::optional<protocol::WireMessage> receive(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
  std::vector<zmq::message_t> parts;
  (void)zmq::recv_multipart(socket, std::back_inserter(parts));
  std::vector<std::string_view> frames;
  for (auto& p : parts) frames.push_back(p.to_string_view());
  return protocol::from_frames(frames);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1))];
}

zmq::socket_t make_socket(zmq::context_t& context, zmq::socket_type type, const std::string& endpoint) {
  zmq::socket_t socket(context, type);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::sndhwm, 0);
  socket.set(zmq::sockopt::rcvhwm, 0);
  socket.connect(endpoint);
  return socket;
}

RunningBroker::RunningBroker(zmq::context_t& c, std::int64_t max_jobs, const RedisOptions& redis) : context(c) {
  BrokerOptions options;
  options.redis = redis;
  if (options.redis.consumer.empty()) options.redis.consumer = "bench-" + std::to_string(now_ns());
  options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
  options.http = "";
  options.queue.max_jobs = max_jobs;
  options.queue.max_prompt_tokens = max_jobs * 16;
  options.drain_timeout_ms = 0;
  broker = std::make_unique<Broker>(context, options);
  thread = std::thread([this] { broker->run(stop); });
}

RunningBroker::~RunningBroker() {
  stop = true;
  thread.join();
}

}  // namespace flashq::bench
