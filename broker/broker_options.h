// Every endpoint and limit of the broker, with its default (docs/operations.md).
#pragma once

#include <cstdint>
#include <string>

#include "broker/job_queue.h"
#include "broker/routing_options.h"

namespace flashq {

// Durability on Redis (docs/redis.md); off when `url` is empty.
struct RedisOptions {
  // redis://[[user]:password@]host[:port][/db], redis+sentinel://host:port[,...]/master-name[/db]
  // or unix:///path (broker/redis/redis_url.h)
  std::string url;
  // The data nodes' password, read from this file (its first line) rather than the URL, which the
  // process list shows; FLASHQ_REDIS_PASSWORD in the environment comes next, the URL's last.
  std::string password_file;
  // The same for the Sentinels' own password (FLASHQ_REDIS_SENTINEL_PASSWORD, ?sentinel_password=).
  std::string sentinel_password_file;
  std::string consumer;            // this broker's name in group `flashq`; stable across restarts
  int64_t claim_idle_ms = 30000;   // a broker silent this long about a job loses it to another
  int64_t max_deliveries = 5;      // deliveries of one entry (broker deaths) before flashq:dead
  int64_t retention_s = 3600;      // result streams and status hashes expire after the final
  int64_t max_events_per_job = 100000;  // a result stream is trimmed beyond this
  int64_t dead_letters_kept = 10000;
  int64_t control_kept = 10000;    // flashq:control (cancel requests) is trimmed beyond this
  int64_t prefetch = 16;           // jobs taken beyond the free worker slots
  // A session's turns go to the broker that last ran one for this long after it (docs/redis.md).
  int64_t session_ttl_s = 3600;
  // A SUBMIT is ACCEPTED only once this many replicas acknowledged its entry (WAIT), else it is
  // REJECTED unavailable; 0: once the primary has it (docs/redis.md, "Sentinel and failover").
  int64_t wait_replicas = 0;
  int64_t wait_timeout_ms = 1000;  // how long WAIT waits for them, holding the broker's connection
};

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
  // A job naming a model no worker has served for this long is rejected `unknown_model`
  // (model_catalog.h); counted from the broker's start too. 0: such jobs wait for their deadline.
  // Without Redis only (docs/redis.md: other brokers' workers may serve the model).
  int64_t unknown_model_grace_ms = 5000;
  int send_high_water_mark = 100000;   // messages queued per peer before sends fail (never block)
  RoutingOptions routing;              // which worker a job goes to (routing_options.h)
  RedisOptions redis;
  // CurveZMQ (docs/security.md). With a secret key (Z85 or a file holding it) all three sockets
  // are CURVE servers and only the public keys in the allow-list file get in; empty: plain TCP.
  std::string curve_secret_key;
  std::string curve_allowed_keys;
};

}  // namespace flashq
