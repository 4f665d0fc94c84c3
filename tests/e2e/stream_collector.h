// A subscriber to the broker's stream socket on a thread of its own: one SUB socket subscribed
// to a topic prefix ("job/": every job), keeping the events it receives, grouped by job id, in
// arrival order. As docs/protocol.md §8.5 asks of subscribers, an event whose seq is below the
// next expected one is a duplicate (a replay) and dropped; gaps are kept, for the test to see.
// Malformed stream messages are kept as problems.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/error.h"
#include "shared/protocol/stream.h"

namespace flashq::testing {

class StreamCollector {
 public:
  StreamCollector(std::string endpoint, std::string prefix = "job/")
      : endpoint_(std::move(endpoint)), prefix_(std::move(prefix)), thread_([this] { run(); }) {}
  ~StreamCollector() {
    stop_ = true;
    thread_.join();
  }
  StreamCollector(const StreamCollector&) = delete;
  StreamCollector& operator=(const StreamCollector&) = delete;

  std::vector<protocol::Event> events(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(id);
    return it == events_.end() ? std::vector<protocol::Event>{} : it->second;
  }

  std::vector<std::string> problems() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return problems_;
  }

  // Waits until an event with `final` arrived for job `id`.
  bool wait_final(const std::string& id, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      auto it = events_.find(id);
      if (it == events_.end()) return false;
      for (const protocol::Event& e : it->second) {
        if (e.final_result) return true;
      }
      return false;
    });
  }

 private:
  void run() {
    zmq::context_t context;
    zmq::socket_t socket(context, zmq::socket_type::sub);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::rcvhwm, 0);  // unlimited: this subscriber must see everything
    socket.set(zmq::sockopt::subscribe, prefix_);
    socket.connect(endpoint_);
    while (!stop_) {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      while (zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
        std::vector<std::string_view> frames;
        for (const zmq::message_t& part : parts) frames.push_back(part.to_string_view());
        std::lock_guard<std::mutex> lock(mutex_);
        try {
          protocol::Event event = protocol::from_stream_frames(frames);
          std::vector<protocol::Event>& kept = events_[event.id];
          if (kept.empty() || event.seq > kept.back().seq) kept.push_back(std::move(event));
        } catch (const Error& e) {
          problems_.push_back(e.what());
        }
        parts.clear();
        changed_.notify_all();
      }
    }
  }

  std::string endpoint_;
  std::string prefix_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::string, std::vector<protocol::Event>> events_;
  std::vector<std::string> problems_;
  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace flashq::testing
