// flashq-broker: the queue, scheduler, worker registry and stream fan-out (docs/architecture.md).
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "broker/redis/redis_url.h"
#include "shared/cli.h"
#include "shared/error.h"

namespace {

std::atomic<bool> stop_requested{false};
void request_stop(int) { stop_requested.store(true); }

// A password from `file` (its first line), else from the environment variable `env_name`; nothing
// when neither gives one.
std::optional<std::string> read_secret(const std::string& file, const char* env_name) {
  if (!file.empty()) {
    std::ifstream in(file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      throw flashq::Error(flashq::ErrorCode::kBadConfig, file + ": cannot read a password");
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      throw flashq::Error(flashq::ErrorCode::kBadConfig, file + ": the first line (the password) is empty");
    }
    return line;
  }
  const char* value = std::getenv(env_name);
  if (value && *value) return std::string(value);
  return std::nullopt;
}

// The passwords that do not come in the URL go into it here, in memory only: a file first, then
// the environment, then the URL's own (docs/redis.md, "Passwords").
void resolve_redis_passwords(flashq::RedisOptions& redis) {
  if (redis.url.empty()) return;
  flashq::RedisUrl url = flashq::parse_redis_url(redis.url);
  if (std::optional<std::string> password = read_secret(redis.password_file, "FLASHQ_REDIS_PASSWORD")) {
    url.password = *password;
  }
  if (std::optional<std::string> password =
          read_secret(redis.sentinel_password_file, "FLASHQ_REDIS_SENTINEL_PASSWORD")) {
    if (!url.uses_sentinels()) {
      throw flashq::Error(flashq::ErrorCode::kBadConfig,
                          "a Sentinel password (--redis-sentinel-password-file or FLASHQ_REDIS_SENTINEL_PASSWORD), "
                          "but --redis names no Sentinels");
    }
    url.sentinel_password = *password;
  }
  redis.url = url.to_string();
}

// The durable queue's flags (docs/redis.md).
void add_redis_options(CLI::App& app, flashq::RedisOptions& redis) {
  app.add_option("--redis", redis.url,
                 "durable queue: redis://[[user]:password@]host[:port][/db] or "
                 "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master-name[/db] (none: in memory)");
  app.add_option("--redis-password-file", redis.password_file,
                 "FILE: Redis's password on its first line (wins over FLASHQ_REDIS_PASSWORD, then the URL's)");
  app.add_option("--redis-sentinel-password-file", redis.sentinel_password_file,
                 "FILE: the Sentinels' own password (wins over FLASHQ_REDIS_SENTINEL_PASSWORD, "
                 "then the URL's ?sentinel_password=)");
  app.add_option("--redis-wait-replicas", redis.wait_replicas,
                 "tell nobody anything (ACCEPTED, an event, a final) before this many replicas have it (WAIT; 0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_option("--redis-wait-timeout-ms", redis.wait_timeout_ms,
                 "how long WAIT waits for the replicas (it holds the broker's Redis connection meanwhile)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{60000}));
  app.add_option("--redis-consumer", redis.consumer, "this broker's consumer name (default: host/frontend)");
  app.add_option("--redis-claim-idle-ms", redis.claim_idle_ms, "claim jobs of a broker silent this long")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{86'400'000}));
  app.add_option("--redis-max-deliveries", redis.max_deliveries, "deliveries before flashq:dead")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--redis-retention-s", redis.retention_s, "results kept after the final")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--redis-session-ttl-s", redis.session_ttl_s,
                 "a session's turns go to the broker that ran its last turn this long after it")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashq-broker: assigns generation jobs to workers and streams their tokens"};
  flashq::BrokerOptions o;
  app.add_option("--frontend", o.frontend, "producers' endpoint (ROUTER)")->capture_default_str();
  app.add_option("--backend", o.backend, "workers' endpoint (ROUTER)")->capture_default_str();
  app.add_option("--stream", o.stream, "subscribers' endpoint (XPUB)")->capture_default_str();
  app.add_option("--http", o.http, "host:port of /metrics, /healthz, /readyz (empty: none)")->capture_default_str();
  app.add_option("--max-queued-jobs", o.queue.max_jobs)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-queued-prompt-tokens", o.queue.max_prompt_tokens)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-ms", o.heartbeat_ms)->capture_default_str()->check(CLI::Range(10, 60000));
  app.add_option("--max-attempts", o.max_attempts, "attempts per job before it fails")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--default-deadline-ms", o.default_deadline_ms)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--finished-jobs-kept", o.finished_jobs_kept)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--replay-events-per-job", o.replay_events_per_job, "events kept per job for late subscribers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--replay-bytes-total", o.replay_bytes_total, "bytes kept in all replay buffers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--unknown-model-grace-ms", o.unknown_model_grace_ms,
                 "reject jobs naming a model no worker (of any broker, with --redis) has served for this long (0: they wait)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  std::string routing = "cache-aware";
  app.add_option("--routing", routing, "which worker a job goes to: cache-aware (its session's, or its prompt prefix's) "
                                       "or least-loaded")
      ->capture_default_str()
      ->check(CLI::IsMember({"cache-aware", "least-loaded"}));
  app.add_option("--routing-load-gap", o.routing.max_load_gap,
                 "share of its slots by which a session's or prefix's worker may be busier than the least-loaded one")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--routing-sessions", o.routing.max_sessions, "sessions remembered (least recently used forgotten)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--routing-prefix-blocks", o.routing.max_prefix_blocks,
                 "256-byte prompt prefix blocks remembered (least recently used forgotten)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--drain-timeout-ms", o.drain_timeout_ms)->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--send-hwm", o.send_high_water_mark, "messages queued per peer")->capture_default_str()->check(CLI::PositiveNumber);
  add_redis_options(app, o.redis);
  app.add_option("--curve-secret-key", o.curve_secret_key,
                 "KEY|FILE: the broker's CURVE secret key; all three sockets then require CURVE (docs/security.md)");
  app.add_option("--curve-allowed-keys", o.curve_allowed_keys,
                 "FILE: client public keys allowed in, one Z85 key per line (required with --curve-secret-key)");
  return flashq::run_cli(app, argc, argv, [&] {
    o.routing.cache_aware = routing == "cache-aware";
    resolve_redis_passwords(o.redis);
    std::signal(SIGTERM, request_stop);
    std::signal(SIGINT, request_stop);
    zmq::context_t context;
    flashq::Broker broker(context, o);
    spdlog::info("broker: frontend {}, backend {}, stream {}", broker.frontend_endpoint(), broker.backend_endpoint(),
                 broker.stream_endpoint());
    broker.run(stop_requested);
  });
}
