#include "tools/flashq_bench/broker_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq_addon.hpp>

#include "broker/broker.h"
#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_url.h"
#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"
#include "tools/flashq_bench/bench_peers.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using namespace flashq::bench;

struct BrokerBenchOptions {
  int64_t jobs = 20000;
  int64_t events = 200000;
  int64_t latency_rate = 10000;  // events/s while measuring latency
  int64_t latency_events = 20000;
  int64_t window = 1000;  // submissions in flight per producer
  std::string redis;      // also measure with this Redis behind the broker
  int64_t wait_replicas = 0;  // > 0: also intake with --redis-wait-replicas, beside intake without
  int64_t wait_timeout_ms = 1000;
  int64_t one_at_a_time = 2000;  // submissions sent one after another's ACCEPTED (latency alone)
  bool json = false;
};

// Submissions/s: one producer keeps `window` SUBMITs in flight until every job is accepted.
// Job ids unique to this run, so runs against one Redis never meet.
std::string run_prefix() { return "bench-" + std::to_string(now_ns()) + "-"; }

// With Redis, the broker is ready once it is connected: until then it refuses jobs.
void wait_ready(zmq::context_t& context, RunningBroker& running, const RedisOptions& redis) {
  if (redis.url.empty()) return;
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, running.broker->frontend_endpoint());
  protocol::Job job;
  job.prompt = std::string("probe");
  for (int i = 0; i < 100; ++i) {
    job.id = run_prefix() + "probe";
    send_message(producer, protocol::Submit{job});
    auto reply = receive(producer, 2000ms);
    if (reply && reply->type == protocol::MessageType::kAccepted) return;
    std::this_thread::sleep_for(50ms);
  }
  throw Error(ErrorCode::kIo, "the broker did not connect to redis " + redis.url);
}

struct IntakeFigures {
  double per_s = 0;
  std::vector<double> accepted_us;  // SUBMIT to ACCEPTED, per job
  int64_t rejected = 0;
};

// Submissions/s, and each job's time from SUBMIT to ACCEPTED, with `window` SUBMITs in flight
// until `jobs` are answered.
IntakeFigures measure_intake(zmq::context_t& context, int64_t jobs, int64_t window, const RedisOptions& redis) {
  RunningBroker running(context, jobs + 1, redis);
  wait_ready(context, running, redis);
  const std::string prefix = run_prefix();
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, running.broker->frontend_endpoint());
  protocol::Job job;
  job.prompt = std::string("synthetic job");
  std::vector<int64_t> sent_ns(static_cast<size_t>(jobs));
  IntakeFigures figures;
  int64_t sent = 0, answered = 0;
  const auto start = Clock::now();
  while (answered < jobs) {
    while (sent < jobs && sent - answered < window) {
      job.id = prefix + std::to_string(sent);
      sent_ns[static_cast<size_t>(sent++)] = now_ns();
      send_message(producer, protocol::Submit{job});
    }
    auto reply = receive(producer, 5000ms);
    if (!reply) break;
    if (reply->type == protocol::MessageType::kAccepted) {
      const std::string id = protocol::from_wire<protocol::Accepted>(*reply).id;
      const int64_t index = std::stoll(id.substr(prefix.size()));
      figures.accepted_us.push_back(static_cast<double>(now_ns() - sent_ns[static_cast<size_t>(index)]) / 1000.0);
      ++answered;
    } else if (reply->type == protocol::MessageType::kRejected) {
      ++figures.rejected;
      ++answered;
    }
  }
  figures.per_s = static_cast<double>(figures.accepted_us.size()) /
                  std::chrono::duration<double>(Clock::now() - start).count();
  return figures;
}

double measure_submissions(zmq::context_t& context, const BrokerBenchOptions& o, const RedisOptions& redis) {
  return measure_intake(context, o.jobs, o.window, redis).per_s;
}

// Intake with --redis-wait-replicas (a WAIT closing each loop turn's writes) against intake
// without, on the same Redis in one run: at full load (`window` in flight) and one submission at
// a time.
nlohmann::json measure_wait_replicas(zmq::context_t& context, const BrokerBenchOptions& o, RedisConnection& redis) {
  nlohmann::json out = {{"wait_replicas", o.wait_replicas}, {"wait_timeout_ms", o.wait_timeout_ms}};
  for (const bool wait : {false, true}) {
    RedisOptions options{.url = o.redis};
    if (wait) {
      options.wait_replicas = o.wait_replicas;
      options.wait_timeout_ms = o.wait_timeout_ms;
    }
    const IntakeFigures loaded = measure_intake(context, o.jobs, o.window, options);
    (void)redis.command({"FLUSHDB"});
    const IntakeFigures alone = measure_intake(context, o.one_at_a_time, 1, options);
    (void)redis.command({"FLUSHDB"});
    out[wait ? "with_wait" : "without_wait"] = {
        {"submissions_per_s", loaded.per_s},
        {"accepted_p50_us", percentile(loaded.accepted_us, 0.5)},
        {"accepted_p99_us", percentile(loaded.accepted_us, 0.99)},
        {"rejected", loaded.rejected + alone.rejected},
        {"one_at_a_time_per_s", alone.per_s},
        {"one_at_a_time_accepted_p50_us", percentile(alone.accepted_us, 0.5)},
        {"one_at_a_time_accepted_p99_us", percentile(alone.accepted_us, 0.99)}};
  }
  return out;
}

// Events/s: synthetic workers stream TOKENS for their jobs as fast as they can; one subscriber
// receives every event through the broker's XPUB.
double measure_fanout(zmq::context_t& context, const BrokerBenchOptions& o, const RedisOptions& redis) {
  RunningBroker running(context, 1000, redis);
  wait_ready(context, running, redis);
  const std::string prefix = run_prefix();
  zmq::socket_t subscriber = make_socket(context, zmq::socket_type::sub, running.broker->stream_endpoint());
  subscriber.set(zmq::sockopt::subscribe, std::string(protocol::kStreamTopicPrefix));
  zmq::socket_t worker = make_socket(context, zmq::socket_type::dealer, running.broker->backend_endpoint());
  send_message(worker, protocol::Ready{.worker_id = "synthetic-worker", .model = "none", .slots = 64, .backend = "none"});
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, running.broker->frontend_endpoint());
  std::this_thread::sleep_for(200ms);
  const int64_t jobs = 16;
  protocol::Job job;
  job.prompt = std::string("synthetic job");
  for (int64_t j = 0; j < jobs; ++j) {
    job.id = prefix + "fan-" + std::to_string(j);
    send_message(producer, protocol::Submit{job});
  }
  std::vector<protocol::Assign> assigned;
  while (static_cast<int64_t>(assigned.size()) < jobs) {
    auto message = receive(worker, 5000ms);
    if (!message) return 0;
    if (message->type == protocol::MessageType::kAssign) assigned.push_back(protocol::from_wire<protocol::Assign>(*message));
  }
  std::atomic<int64_t> received{0};
  subscriber.set(zmq::sockopt::rcvtimeo, 2000);  // a blocking receive, not a poll per event
  std::thread reader([&] {
    while (received < o.events) {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(subscriber, std::back_inserter(parts))) return;
      ++received;
    }
  });
  const auto start = Clock::now();
  std::vector<int64_t> seq(jobs, 0);
  for (int64_t e = 0; e < o.events; ++e) {
    const int64_t j = e % jobs;
    send_message(worker, protocol::Tokens{.id = assigned[j].job.id, .attempt = 1, .seq = seq[j]++,
                                          .token_ids = {static_cast<int32_t>(e & 0xffff)}, .text = "tok"});
  }
  reader.join();
  return static_cast<double>(received) / std::chrono::duration<double>(Clock::now() - start).count();
}

// One event path's latency at a fixed rate: `send` emits an event carrying its send time in
// `text`; the subscriber measures arrival minus send time.
std::vector<double> measure_latency(zmq::socket_t& subscriber, const std::function<void(int64_t)>& send,
                                    const BrokerBenchOptions& o) {
  std::vector<double> latencies_us;
  std::thread reader([&] {
    while (true) {
      zmq::pollitem_t item{subscriber.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, 500ms) <= 0) return;
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(subscriber, std::back_inserter(parts));
      std::vector<std::string_view> frames;
      for (auto& p : parts) frames.push_back(p.to_string_view());
      protocol::Event event = protocol::from_stream_frames(frames);
      latencies_us.push_back(static_cast<double>(now_ns() - std::stoll(event.text)) / 1000.0);
      if (static_cast<int64_t>(latencies_us.size()) >= o.latency_events) return;
    }
  });
  const auto interval = std::chrono::nanoseconds(1'000'000'000 / o.latency_rate);
  auto next = Clock::now();
  for (int64_t e = 0; e < o.latency_events; ++e) {
    std::this_thread::sleep_until(next);
    next += interval;
    send(e);
  }
  reader.join();
  return latencies_us;
}

nlohmann::json measure_added_latency(zmq::context_t& context, const BrokerBenchOptions& o) {
  // Through the broker.
  std::vector<double> through_broker;
  {
    RunningBroker running(context, 1000);
    zmq::socket_t subscriber = make_socket(context, zmq::socket_type::sub, running.broker->stream_endpoint());
    subscriber.set(zmq::sockopt::subscribe, std::string(protocol::kStreamTopicPrefix));
    zmq::socket_t worker = make_socket(context, zmq::socket_type::dealer, running.broker->backend_endpoint());
    send_message(worker, protocol::Ready{.worker_id = "synthetic-worker", .model = "none", .slots = 1, .backend = "none"});
    zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, running.broker->frontend_endpoint());
    std::this_thread::sleep_for(200ms);
    protocol::Job job;
    job.id = "latency";
    job.prompt = std::string("synthetic job");
    send_message(producer, protocol::Submit{job});
    while (auto message = receive(worker, 5000ms)) {
      if (message->type == protocol::MessageType::kAssign) break;
    }
    through_broker = measure_latency(subscriber, [&](int64_t e) {
      send_message(worker, protocol::Tokens{.id = "latency", .attempt = 1, .seq = e, .token_ids = {1},
                                            .text = std::to_string(now_ns())});
    }, o);
  }
  // A bare forwarder: ROUTER in, XPUB out, the same frames, no protocol work.
  std::vector<double> bare;
  {
    zmq::socket_t in(context, zmq::socket_type::router), out(context, zmq::socket_type::xpub);
    in.bind("tcp://127.0.0.1:*");
    out.bind("tcp://127.0.0.1:*");
    std::atomic<bool> stop{false};
    std::thread forwarder([&] {
      while (!stop) {
        zmq::pollitem_t items[] = {{in.handle(), 0, ZMQ_POLLIN, 0}, {out.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 2, 50ms);
        if (items[1].revents & ZMQ_POLLIN) {
          zmq::message_t subscription;
          (void)out.recv(subscription);
        }
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> parts;
        (void)zmq::recv_multipart(in, std::back_inserter(parts));
        parts.erase(parts.begin());  // the identity; the rest is already [topic, tag, type, body]
        (void)zmq::send_multipart(out, parts, zmq::send_flags::dontwait);
      }
    });
    zmq::socket_t subscriber = make_socket(context, zmq::socket_type::sub, out.get(zmq::sockopt::last_endpoint));
    subscriber.set(zmq::sockopt::subscribe, std::string(protocol::kStreamTopicPrefix));
    zmq::socket_t sender = make_socket(context, zmq::socket_type::dealer, in.get(zmq::sockopt::last_endpoint));
    std::this_thread::sleep_for(200ms);
    bare = measure_latency(subscriber, [&](int64_t e) {
      send_frames(sender, protocol::to_stream_frames(protocol::Event{.id = "latency", .seq = e, .token_ids = {1},
                                                                      .text = std::to_string(now_ns())}));
    }, o);
    stop = true;
    forwarder.join();
  }
  const double broker_p50 = percentile(through_broker, 0.5), broker_p99 = percentile(through_broker, 0.99);
  const double bare_p50 = percentile(bare, 0.5), bare_p99 = percentile(bare, 0.99);
  return {{"rate_events_per_s", o.latency_rate},
          {"events", through_broker.size()},
          {"broker_p50_us", broker_p50},
          {"broker_p99_us", broker_p99},
          {"bare_forwarder_p50_us", bare_p50},
          {"bare_forwarder_p99_us", bare_p99},
          {"added_p50_us", broker_p50 - bare_p50},
          {"added_p99_us", broker_p99 - bare_p99}};
}

// The benchmark leaves its jobs in Redis (taken by a broker that is gone, or never taken), and a
// later broker would take them up: so it runs only on an empty database, and empties it after
// each measurement (it checked that nothing else was there).
void check_scratch(RedisConnection& redis, const std::string& url) {
  if (!redis.ensure_connected()) throw Error(ErrorCode::kIo, "redis " + url + ": " + redis.last_error());
  const RedisReply size = redis.command({"DBSIZE"});
  if (size.is_error() || size.integer != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--redis " + url + ": the benchmark needs an empty database (it empties it after each run); "
                "use a scratch redis-server or another database number, e.g. redis://127.0.0.1:6379/15");
  }
}

void run_broker_bench(const BrokerBenchOptions& o) {
  zmq::context_t context;
  nlohmann::json report = {{"synthetic", "producers and workers are test programs; no model runs"}};
  report["submissions_per_s"] = measure_submissions(context, o, {});
  report["token_events_per_s"] = measure_fanout(context, o, {});
  if (!o.redis.empty()) {
    // Side by side: every accepted job stored in flashq:jobs first, every event in flashq:out.
    RedisConnection redis(parse_redis_url(o.redis));
    check_scratch(redis, o.redis);
    const double jobs = measure_submissions(context, o, {.url = o.redis});
    (void)redis.command({"FLUSHDB"});
    const double events = measure_fanout(context, o, {.url = o.redis});
    (void)redis.command({"FLUSHDB"});
    report["redis"] = {{"submissions_per_s", jobs},
                       {"token_events_per_s", events},
                       {"submissions_ratio", jobs / report["submissions_per_s"].get<double>()},
                       {"token_events_ratio", events / report["token_events_per_s"].get<double>()}};
    if (o.wait_replicas > 0) report["redis"]["intake_by_wait"] = measure_wait_replicas(context, o, redis);
  }
  report["latency"] = measure_added_latency(context, o);
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
}

}  // namespace

std::function<void()> add_broker_bench(CLI::App& app) {
  auto o = std::make_shared<BrokerBenchOptions>();
  CLI::App* cmd = app.add_subcommand("broker", "broker throughput and added latency with synthetic peers");
  cmd->add_option("--jobs", o->jobs, "submissions to time")->capture_default_str();
  cmd->add_option("--events", o->events, "token events to time")->capture_default_str();
  cmd->add_option("--latency-rate", o->latency_rate, "events/s while measuring latency")->capture_default_str();
  cmd->add_option("--latency-events", o->latency_events)->capture_default_str();
  cmd->add_option("--redis", o->redis,
                  "also measure with this Redis (redis://host:port[/db]): an empty database, emptied after each run")
      ->capture_default_str();
  cmd->add_option("--redis-wait-replicas", o->wait_replicas,
                  "with --redis: also intake with WAIT for this many replicas, beside intake without (its "
                  "primary needs them)")
      ->capture_default_str();
  cmd->add_option("--redis-wait-timeout-ms", o->wait_timeout_ms)->capture_default_str();
  cmd->add_option("--one-at-a-time", o->one_at_a_time, "submissions timed one after another's ACCEPTED")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_broker_bench(*o);
  };
}

}  // namespace flashq
