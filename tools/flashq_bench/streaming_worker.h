// A synthetic worker for the gateway benchmark: a test program on its own thread that speaks the
// worker side of the wire protocol (READY naming a model, heartbeats, ASSIGN answered by TOKENS
// then FINAL, CANCEL answered by FINAL cancelled); no model runs. Every job it is assigned streams
// until finish_all(), each TOKENS carrying one token and a small text piece, paced one of three ways:
//   - per job: each job one TOKENS every `job_interval` (many slow streams held open);
//   - in total: `total_rate` TOKENS/s round robin over the jobs, each text the send time in ns
//     on the steady clock (latency);
//   - as fast as credit allows: round robin while fewer than `window` sent events are not yet
//     counted by `delivered()` (throughput; the credit keeps every queue on the way bounded).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace flashq::bench {

// The most jobs a broker lets one worker run at once (READY slots).
inline constexpr std::int64_t kWorkerSlots = 4096;

struct StreamingWorkerOptions {
  std::string model = "synthetic";
  std::int64_t slots = kWorkerSlots;
  std::chrono::nanoseconds job_interval{0};  // > 0: per-job pacing
  double total_rate = 0;                      // > 0: total pacing, send times as text
  std::int64_t window = 0;                    // > 0: credit pacing against delivered()
  std::function<std::int64_t()> delivered;
  std::string text = " tok";                  // the piece each TOKENS carries (not in total pacing)
};

class StreamingWorker {
 public:
  StreamingWorker(zmq::context_t& context, const std::string& backend, StreamingWorkerOptions options);
  ~StreamingWorker();  // finishes its jobs and stops
  StreamingWorker(const StreamingWorker&) = delete;
  StreamingWorker& operator=(const StreamingWorker&) = delete;

  // Ends every job it holds with FINAL stop, and every job assigned from now on after its first TOKENS.
  void finish_all() { finishing_ = true; }
  std::int64_t jobs_assigned() const { return assigned_; }
  std::int64_t events_sent() const { return sent_; }

 private:
  void run(zmq::socket_t socket);

  StreamingWorkerOptions options_;
  std::atomic<bool> stop_{false}, finishing_{false};
  std::atomic<std::int64_t> assigned_{0}, sent_{0};
  std::thread thread_;
};

}  // namespace flashq::bench
