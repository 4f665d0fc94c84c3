#include "tools/flashq_bench/streaming_worker.h"

#include <deque>
#include <vector>

#include "shared/protocol/messages.h"
#include "tools/flashq_bench/bench_peers.h"

namespace flashq::bench {
namespace {

using namespace std::chrono_literals;

struct RunningJob {
  std::string id;
  std::int64_t attempt = 1;
  std::int64_t seq = 0;
  Clock::time_point due;  // per-job pacing: its next TOKENS
  bool ended = false;
};

constexpr auto kHeartbeatInterval = 300ms;  // the broker counts a worker lost after 3 missed beats of 1 s
constexpr int kBurst = 256;                 // TOKENS sent between two looks at the socket

}  // namespace

StreamingWorker::StreamingWorker(zmq::context_t& context, const std::string& backend, StreamingWorkerOptions options)
    : options_(std::move(options)) {
  zmq::socket_t socket = make_socket(context, zmq::socket_type::dealer, backend);
  send_message(socket, protocol::Ready{.worker_id = "synthetic-streaming-worker", .model = options_.model,
                                       .slots = options_.slots, .backend = "none"});
  thread_ = std::thread([this, s = std::move(socket)]() mutable { run(std::move(s)); });
}

StreamingWorker::~StreamingWorker() {
  finishing_ = true;
  stop_ = true;
  thread_.join();
}

void StreamingWorker::run(zmq::socket_t socket) {
  std::vector<RunningJob> jobs;  // ended ones are swept out now and then
  std::deque<std::size_t> due_order;  // per-job pacing: jobs by due time (one interval for all)
  std::size_t next_job = 0;           // round robin
  auto next_send = Clock::now();      // total pacing
  auto next_beat = Clock::now();
  const auto interval_total = options_.total_rate > 0
                                  ? std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / options_.total_rate))
                                  : 0ns;
  auto send_tokens = [&](RunningJob& job) {
    std::string text = options_.total_rate > 0 ? std::to_string(now_ns()) : options_.text;
    send_message(socket, protocol::Tokens{.id = job.id, .attempt = job.attempt, .seq = job.seq++, .token_ids = {1},
                                          .text = std::move(text)});
    ++sent_;
  };
  auto end_job = [&](RunningJob& job, protocol::FinishReason reason) {
    if (job.ended) return;
    job.ended = true;
    protocol::FinalResult result;
    result.finish_reason = reason;
    result.usage.prompt_tokens = 1;
    result.usage.completion_tokens = job.seq;
    send_message(socket, protocol::Final{.id = job.id, .attempt = job.attempt, .result = result});
  };
  auto live = [&]() {
    std::size_t n = 0;
    for (const RunningJob& job : jobs) n += job.ended ? 0 : 1;
    return n;
  };
  while (!stop_) {
    const auto now = Clock::now();
    if (now >= next_beat) {
      send_message(socket, protocol::WorkerHeartbeat{.load = static_cast<std::int64_t>(live())});
      next_beat = now + kHeartbeatInterval;
    }
    // How long there is to wait for the next send: poll the socket that long at most.
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - now);
    if (!jobs.empty()) {
      if (options_.job_interval > 0ns && !due_order.empty()) {
        wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(jobs[due_order.front()].due - now));
      } else if (options_.total_rate > 0 || options_.window > 0) {
        wait = 0ms;
      }
    }
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::max(wait, 0ms));
    while (true) {
      auto message = receive(socket, 0ms);
      if (!message) break;
      if (message->type == protocol::MessageType::kAssign) {
        const auto assign = protocol::from_wire<protocol::Assign>(*message);
        jobs.push_back({.id = assign.job.id, .attempt = assign.attempt, .seq = 0, .due = Clock::now()});
        if (options_.job_interval > 0ns) due_order.push_back(jobs.size() - 1);
        ++assigned_;
      } else if (message->type == protocol::MessageType::kCancel) {
        const auto cancel = protocol::from_wire<protocol::Cancel>(*message);
        for (RunningJob& job : jobs) {
          if (job.id == cancel.id) end_job(job, protocol::FinishReason::kCancelled);
        }
      }
    }
    if (finishing_) {
      for (RunningJob& job : jobs) {
        if (job.seq == 0) send_tokens(job);  // each stream shows at least one token
        end_job(job, protocol::FinishReason::kStop);
      }
      jobs.clear();
      due_order.clear();
      continue;
    }
    if (jobs.empty()) continue;
    if (options_.job_interval > 0ns) {
      const auto t = Clock::now();
      while (!due_order.empty() && jobs[due_order.front()].due <= t) {
        const std::size_t j = due_order.front();
        due_order.pop_front();
        if (jobs[j].ended) continue;
        send_tokens(jobs[j]);
        jobs[j].due += options_.job_interval;
        due_order.push_back(j);
      }
      continue;
    }
    for (int burst = 0; burst < kBurst; ++burst) {
      if (options_.total_rate > 0) {
        // Behind by more than a little (no jobs for a while): start afresh rather than burst.
        if (Clock::now() - next_send > 10ms) next_send = Clock::now();
        if (Clock::now() < next_send) {
          std::this_thread::sleep_until(std::min(next_send, next_beat));
          if (Clock::now() < next_send) break;
        }
        next_send += interval_total;
      } else if (options_.window > 0 && sent_ - options_.delivered() >= options_.window) {
        break;
      }
      RunningJob* job = nullptr;
      for (std::size_t tries = 0; tries < jobs.size() && !job; ++tries) {
        RunningJob& candidate = jobs[next_job++ % jobs.size()];
        if (!candidate.ended) job = &candidate;
      }
      if (!job) break;
      send_tokens(*job);
    }
  }
  for (RunningJob& job : jobs) end_job(job, protocol::FinishReason::kStop);
}

}  // namespace flashq::bench
