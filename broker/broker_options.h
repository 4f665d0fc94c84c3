// Every endpoint and limit of the broker, with the defaults of DESIGN.md §1 and §4.
#pragma once

#include <cstdint>
#include <string>

#include "broker/job_queue.h"

namespace flashq {

struct BrokerOptions {
  std::string frontend = "tcp://127.0.0.1:5555";  // producers (ROUTER)
  std::string backend = "tcp://127.0.0.1:5556";   // workers (ROUTER)
  std::string stream = "tcp://127.0.0.1:5557";    // subscribers (XPUB)
  std::string http = "127.0.0.1:9464";            // /metrics, /healthz, /readyz; empty: none
  QueueLimits queue;
  int64_t heartbeat_ms = 1000;        // both ways
  int64_t liveness = 3;               // missed beats before a worker is dead
  int64_t max_attempts = 3;           // a job whose worker died this often fails with `error`
  int64_t default_deadline_ms = 600000;
  int64_t max_deadline_ms = 86'400'000;
  int64_t finished_jobs_kept = 10000;  // for STATUS and idempotent resubmission
  int64_t replay_events_per_job = 4096;  // events kept per job for late subscribers (REPLAY)
  int64_t replay_bytes_total = 256 << 20;  // all replay buffers; the oldest finished jobs' go first
  int64_t drain_timeout_ms = 30000;    // on SIGTERM: how long running jobs may take to finish
  int64_t retry_after_ms = 1000;       // hint sent with REJECTED overloaded
  int send_high_water_mark = 100000;   // messages queued per peer before sends fail (never block)
};

}  // namespace flashq
