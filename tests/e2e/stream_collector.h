// A subscriber to the broker's stream socket on a thread of its own: one SUB socket subscribed
// to a topic prefix ("job/": every job), keeping the events it receives, grouped by job id, in
// arrival order. As docs/protocol.md §8.5 asks of subscribers, an event whose seq is below the
// next expected one is a duplicate (a replay overlapping the live stream) and dropped; gaps are
// kept, for the test to see. A duplicate is only a duplicate if it is the same event: a seq that
// arrives again with other content (two versions of one seq on the stream socket) is kept as a
// problem naming the job, the seq and both versions, as is a malformed stream message.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
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

// An event in one line, every field that two versions of one seq could differ in.
inline std::string describe_event(const protocol::Event& event) {
  std::string out = "{token_ids [";
  for (size_t i = 0; i < event.token_ids.size(); ++i) out += (i ? "," : "") + std::to_string(event.token_ids[i]);
  out += "], text \"" + event.text + "\"";
  if (event.final_result) {
    const protocol::FinalResult& f = *event.final_result;
    out += ", final {" + std::string(protocol::finish_reason_name(f.finish_reason)) + ", usage " +
           std::to_string(f.usage.prompt_tokens) + "+" + std::to_string(f.usage.completion_tokens) + ", spec " +
           std::to_string(f.spec_stats.draft_steps) + "/" + std::to_string(f.spec_stats.accepted_tokens) + "/" +
           std::to_string(f.spec_stats.tau) + ", timings " + std::to_string(f.timings.queue_ms) + "/" +
           std::to_string(f.timings.ttft_ms) + "/" + std::to_string(f.timings.total_ms) + " ms";
    if (f.error) out += ", error \"" + *f.error + "\"";
    out += "}";
  }
  return out + "}";
}

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

  // Success when no problem was seen; otherwise a failure listing every problem.
  ::testing::AssertionResult has_no_problems() const {
    const std::vector<std::string> seen = problems();
    if (seen.empty()) return ::testing::AssertionSuccess();
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << seen.size() << " problem(s) on the stream socket:";
    for (const std::string& problem : seen) failure << "\n  " << problem;
    return failure;
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
          keep(protocol::from_stream_frames(frames));
        } catch (const Error& e) {
          problems_.push_back(e.what());
        }
        parts.clear();
        changed_.notify_all();
      }
    }
  }

  // Called with mutex_ held.
  void keep(protocol::Event event) {
    std::vector<protocol::Event>& kept = events_[event.id];
    if (kept.empty() || event.seq > kept.back().seq) {
      kept.push_back(std::move(event));
      return;
    }
    auto same_seq = std::find_if(kept.begin(), kept.end(), [&](const protocol::Event& e) { return e.seq == event.seq; });
    // An unseen seq below the last one fills no gap here: the gap stays for the test to see.
    if (same_seq == kept.end() || *same_seq == event) return;
    problems_.push_back("job " + event.id + ": seq " + std::to_string(event.seq) +
                        " arrived twice with different content: first " + describe_event(*same_seq) + ", then " +
                        describe_event(event));
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
