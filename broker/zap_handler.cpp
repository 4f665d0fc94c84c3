#include "broker/zap_handler.h"

#include <array>
#include <vector>

#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include "shared/curve/curve_keys.h"
#include "shared/curve/curve_socket.h"
#include "shared/error.h"

namespace flashq {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by RFC 27
constexpr int kStopCheckMs = 50;                                // how soon the destructor is heard
constexpr size_t kRefusedKeysLogged = 1024;

std::string z85_of(std::string_view key_bytes) {
  std::array<char, kCurveKeyZ85Length + 1> text{};
  zmq_z85_encode(text.data(), reinterpret_cast<const uint8_t*>(key_bytes.data()), key_bytes.size());
  return std::string(text.data(), kCurveKeyZ85Length);
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, std::set<std::string> allowed_public_keys)
    : allowed_(std::move(allowed_public_keys)), socket_(context, zmq::socket_type::rep) {
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::kIo, std::string("cannot bind the ZAP handler at ") + kZapEndpoint + ": " + e.what());
  }
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  thread_.join();
  // Closing alone frees the endpoint later, in libzmq's reaper thread; unbinding frees it now, so
  // a broker started next in this context can bind its own handler.
  try {
    socket_.unbind(kZapEndpoint);
  } catch (const zmq::error_t&) {
  }
}

void ZapHandler::serve() {
  while (!stop_.load()) {
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(kStopCheckMs));
      if (item.revents & ZMQ_POLLIN) answer_one();
    } catch (const std::exception& e) {
      // Keep serving: without an answer the handshake waiting on it would hang, and without a
      // bound handler libzmq would let everyone in.
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
}

// Request (RFC 27): version, request id, domain, address, identity, mechanism, credentials...
// Reply: version, request id, status code, status text, user id, metadata.
void ZapHandler::answer_one() {
  std::vector<zmq::message_t> request;
  if (!zmq::recv_multipart(socket_, std::back_inserter(request), zmq::recv_flags::dontwait)) return;
  const auto frame = [&](size_t i) { return i < request.size() ? request[i].to_string_view() : std::string_view(); };
  std::string status = "400", text = "not on the allow-list", user_id;
  if (frame(0) != "1.0" || request.size() < 7) {
    status = "500";
    text = "malformed ZAP request";
  } else if (frame(2) != kCurveZapDomain || frame(5) != "CURVE" || frame(6).size() != 32) {
    text = "only CURVE clients of the flashq domain are served";
  } else {
    const std::string key = z85_of(frame(6));
    if (allowed_.count(key)) {
      status = "200";
      text = "OK";
      user_id = key;
    } else if (refused_logged_.size() < kRefusedKeysLogged && refused_logged_.insert(key).second) {
      spdlog::warn("refused a CURVE client from {} with public key {}: not on the allow-list", frame(3), key);
    } else {
      spdlog::debug("refused a CURVE client from {} with public key {}", frame(3), key);
    }
  }
  const std::array<std::string_view, 6> reply = {"1.0", frame(1), status, text, user_id, ""};
  std::vector<zmq::const_buffer> buffers;
  for (std::string_view part : reply) buffers.push_back(zmq::buffer(part));
  (void)zmq::send_multipart(socket_, buffers);
}

}  // namespace flashq
