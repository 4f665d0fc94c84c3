#include "tools/flashq_bench/failover_bench.h"

#include <stdlib.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_url.h"
#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "tools/flashq_bench/bench_cluster.h"
#include "tools/flashq_bench/bench_peers.h"
#include "tools/flashq_bench/streaming_worker.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using namespace flashq::bench;

constexpr const char* kMasterName = "flashq";
constexpr int64_t kResendNs = 50'000'000;  // a job refused `unavailable` is submitted again after this

struct FailoverBenchOptions {
  double rate = 500;             // submissions/s
  int64_t kill_after_ms = 2000;  // the primary's SIGKILL, this long into the run
  int64_t submit_for_ms = 8000;  // new submissions go on this long after the kill
  int64_t down_after_ms = 500;   // Sentinel's down-after-milliseconds
  int64_t failover_timeout_ms = 3000;
  int64_t wait_replicas = 0;  // the broker's --redis-wait-replicas
  std::string redis_server = "/usr/bin/redis-server";
  std::string redis_sentinel = "/usr/bin/redis-sentinel";
  bool json = false;
};

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "flashq-failover-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw Error(ErrorCode::kIo, "cannot make a scratch directory in " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A connection to the Redis or Sentinel on `port` once it answers PING; kIo when it does not
// within `timeout`.
std::unique_ptr<RedisConnection> connect_local(int port, std::chrono::milliseconds timeout) {
  auto connection = std::make_unique<RedisConnection>(parse_redis_url("redis://127.0.0.1:" + std::to_string(port)),
                                                      std::chrono::milliseconds(200));
  const auto until = Clock::now() + timeout;
  while (!connection->ensure_connected()) {
    if (Clock::now() > until) {
      throw Error(ErrorCode::kIo, "nothing answers on port " + std::to_string(port) + ": " + connection->last_error());
    }
    std::this_thread::sleep_for(20ms);
  }
  return connection;
}

// A primary, its replica (in sync) and three Sentinels that know them and each other from the
// start (each is given the others' ids), so they can fail over at once.
class SentinelGroup {
 public:
  SentinelGroup(const FailoverBenchOptions& o, const std::filesystem::path& dir)
      : primary_port_(free_port()), replica_port_(free_port()) {
    primary_ = start_redis(o, dir / "primary", primary_port_, {});
    replica_ =
        start_redis(o, dir / "replica", replica_port_, {"--replicaof", "127.0.0.1", std::to_string(primary_port_)});
    auto primary = connect_local(primary_port_, 10s);
    connect_local(replica_port_, 10s);
    const RedisReply synced = primary->command({"WAIT", "1", "10000"});
    if (synced.integer != 1) throw Error(ErrorCode::kIo, "the replica did not sync with the primary");
    for (int i = 0; i < 3; ++i) sentinel_ports_.push_back(free_port());
    for (size_t i = 0; i < sentinel_ports_.size(); ++i) {
      const std::filesystem::path own = dir / ("sentinel-" + std::to_string(i));
      std::filesystem::create_directories(own);
      std::ofstream config(own / "sentinel.conf");
      config << "port " << sentinel_ports_[i] << "\nbind 127.0.0.1\nprotected-mode no\ndir " << own.string() << "\n"
             << "sentinel monitor " << kMasterName << " 127.0.0.1 " << primary_port_ << " 2\n"
             << "sentinel down-after-milliseconds " << kMasterName << " " << o.down_after_ms << "\n"
             << "sentinel failover-timeout " << kMasterName << " " << o.failover_timeout_ms << "\n"
             << "sentinel myid " << sentinel_id(sentinel_ports_[i]) << "\n"
             << "sentinel known-replica " << kMasterName << " 127.0.0.1 " << replica_port_ << "\n";
      for (int other : sentinel_ports_) {
        if (other == sentinel_ports_[i]) continue;
        config << "sentinel known-sentinel " << kMasterName << " 127.0.0.1 " << other << " " << sentinel_id(other)
               << "\n";
      }
      config.close();
      sentinels_.push_back(std::make_unique<ChildProgram>(
          o.redis_sentinel, std::vector<std::string>{(own / "sentinel.conf").string()}, own / "sentinel.log"));
    }
    watcher_ = connect_local(sentinel_ports_[0], 10s);
    if (named_primary() != primary_port_) throw Error(ErrorCode::kIo, "the Sentinels do not name the primary");
  }

  std::string url() const {
    std::string out = "redis+sentinel://";
    for (size_t i = 0; i < sentinel_ports_.size(); ++i) {
      out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinel_ports_[i]);
    }
    return out + "/" + kMasterName;
  }
  void kill_primary() { primary_.reset(); }
  int replica_port() const { return replica_port_; }

  // The primary's port as the first Sentinel names it now (0 when it does not answer).
  int named_primary() {
    try {
      const RedisReply reply = watcher_->command({"SENTINEL", "get-master-addr-by-name", kMasterName});
      if (reply.elements.size() == 2) return std::stoi(reply.elements[1].text);
    } catch (const Error&) {
      watcher_->ensure_connected();
    }
    return 0;
  }

 private:
  static std::string sentinel_id(int port) {
    const std::string digits = std::to_string(port);
    return std::string(40 - digits.size(), '0') + digits;
  }

  static std::unique_ptr<ChildProgram> start_redis(const FailoverBenchOptions& o, const std::filesystem::path& dir,
                                                   int port, const std::vector<std::string>& extra) {
    std::filesystem::create_directories(dir);
    // Durable as docker/compose.yaml runs it: every write fsynced before Redis answers.
    std::vector<std::string> args = {"--port",       std::to_string(port), "--bind",         "127.0.0.1",
                                     "--dir",        dir.string(),         "--save",         "",
                                     "--appendonly", "yes",                "--appendfsync",  "always",
                                     "--repl-diskless-sync-delay", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProgram>(o.redis_server, args, dir / "redis.log");
  }

  int primary_port_, replica_port_;
  std::vector<int> sentinel_ports_;
  std::unique_ptr<ChildProgram> primary_, replica_;
  std::vector<std::unique_ptr<ChildProgram>> sentinels_;
  std::unique_ptr<RedisConnection> watcher_;
};

struct Submission {
  int64_t sent_ns = 0;       // first sent
  int64_t accepted_ns = -1;  // first ACCEPTED
  int64_t final_ns = -1;     // first final
  int finals = 0;
  int64_t resend_ns = -1;  // refused: submitted again at this time
};

double ms_since(int64_t from_ns, int64_t to_ns) { return to_ns < 0 ? -1 : static_cast<double>(to_ns - from_ns) / 1e6; }

// The broker refuses jobs until it has found the primary: a probe job is submitted until accepted.
void await_intake(zmq::socket_t& producer, const std::string& prefix) {
  protocol::Job job;
  job.prompt = std::string("synthetic job");
  job.id = prefix + "probe";
  for (int tries = 0;; ++tries) {
    if (tries == 200) throw Error(ErrorCode::kIo, "the broker never found the primary through the Sentinels");
    send_message(producer, protocol::Submit{job});
    auto reply = receive(producer, 2000ms);
    if (reply && reply->type == protocol::MessageType::kAccepted) return;
    std::this_thread::sleep_for(50ms);
  }
}

struct Refusals {
  int64_t unavailable = 0;  // submitted again after kResendNs
  int64_t other = 0;
  int64_t last_ns = -1;  // the last `unavailable`
};

// One reply to the producer, at `now`, noted against the job it names (`index_of`: -1 for none of
// the timed jobs).
void note_reply(const protocol::WireMessage& reply, int64_t now, const std::function<int64_t(const std::string&)>& index_of,
                std::vector<Submission>& jobs, Refusals& refusals) {
  if (reply.type == protocol::MessageType::kAccepted) {
    const int64_t i = index_of(protocol::from_wire<protocol::Accepted>(reply).id);
    if (i >= 0 && jobs[static_cast<size_t>(i)].accepted_ns < 0) jobs[static_cast<size_t>(i)].accepted_ns = now;
  } else if (reply.type == protocol::MessageType::kRejected) {
    const auto rejected = protocol::from_wire<protocol::Rejected>(reply);
    const int64_t i = index_of(rejected.id);
    if (i < 0) return;
    if (rejected.reason != "unavailable") {
      ++refusals.other;
      return;
    }
    ++refusals.unavailable;
    refusals.last_ns = now;
    jobs[static_cast<size_t>(i)].resend_ns = now + kResendNs;
  } else if (reply.type == protocol::MessageType::kEvent) {
    const auto event = protocol::from_wire<protocol::Event>(reply);
    const int64_t i = index_of(event.id);
    if (i < 0 || !event.final_result) return;
    Submission& s = jobs[static_cast<size_t>(i)];
    if (++s.finals == 1) s.final_ns = now;
  }
}

// What became of the jobs, counted against the primary's kill.
struct Outcomes {
  int64_t accepted = 0, finished_once = 0, lost = 0, repeated = 0, never_accepted = 0, in_flight = 0,
          in_flight_done = 0;
  int64_t intake_back_ns = -1, flowing_ns = -1;  // first ACCEPTED, first final, of jobs sent after the kill
};

Outcomes outcomes_of(const std::vector<Submission>& jobs, int64_t kill_ns) {
  Outcomes out;
  for (const Submission& s : jobs) {
    if (s.accepted_ns < 0) {
      ++out.never_accepted;
      continue;
    }
    ++out.accepted;
    out.finished_once += s.finals == 1;
    out.lost += s.finals == 0;
    out.repeated += s.finals > 1;
    if (s.accepted_ns < kill_ns && (s.final_ns < 0 || s.final_ns > kill_ns)) {
      ++out.in_flight;
      out.in_flight_done += s.finals == 1;
    }
    if (s.sent_ns > kill_ns) {
      if (out.intake_back_ns < 0 || s.accepted_ns < out.intake_back_ns) out.intake_back_ns = s.accepted_ns;
      if (s.final_ns >= 0 && (out.flowing_ns < 0 || s.final_ns < out.flowing_ns)) out.flowing_ns = s.final_ns;
    }
  }
  return out;
}

nlohmann::json report_of(const FailoverBenchOptions& o, int64_t kill_ns, int64_t switch_ns, int64_t submitted,
                         const Outcomes& out, const Refusals& refusals) {
  return {
      {"synthetic", "redis-server and redis-sentinel processes, a broker in this process, a synthetic worker"},
      {"rate_per_s", o.rate},
      {"down_after_ms", o.down_after_ms},
      {"failover_timeout_ms", o.failover_timeout_ms},
      {"wait_replicas", o.wait_replicas},
      {"sentinels_named_the_replica_ms", ms_since(kill_ns, switch_ns)},
      {"first_accepted_after_kill_ms", ms_since(kill_ns, out.intake_back_ns)},
      {"first_final_after_kill_ms", ms_since(kill_ns, out.flowing_ns)},
      {"last_refusal_after_kill_ms", ms_since(kill_ns, refusals.last_ns)},
      {"submitted", submitted},
      {"accepted", out.accepted},
      {"finished_exactly_once", out.finished_once},
      {"accepted_without_final", out.lost},
      {"more_than_one_final", out.repeated},
      {"never_accepted", out.never_accepted},
      {"unavailable_refusals", refusals.unavailable},
      {"other_rejections", refusals.other},
      {"in_flight_at_kill", out.in_flight},
      {"in_flight_at_kill_finished_once", out.in_flight_done}};
}

void run_failover_bench(const FailoverBenchOptions& o) {
  ScratchDir dir;
  SentinelGroup group(o, dir.path());
  zmq::context_t context;
  RunningBroker running(context, 1'000'000, RedisOptions{.url = group.url(), .wait_replicas = o.wait_replicas});
  StreamingWorker worker(context, running.broker->backend_endpoint(), {});
  worker.finish_all();  // every job ends after one token
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, running.broker->frontend_endpoint());
  const std::string prefix = "failover-" + std::to_string(now_ns()) + "-";
  protocol::Job job;
  job.prompt = std::string("synthetic job");
  std::vector<Submission> jobs;
  auto submit = [&](size_t index) {
    job.id = prefix + std::to_string(index);
    send_message(producer, protocol::Submit{job});
  };
  const std::function<int64_t(const std::string&)> index_of = [&](const std::string& id) -> int64_t {  // -1: not one of the timed jobs (the probe)
    int64_t index = -1;
    if (id.rfind(prefix, 0) != 0) return -1;
    const auto [end, error] = std::from_chars(id.data() + prefix.size(), id.data() + id.size(), index);
    return error == std::errc() && end == id.data() + id.size() ? index : -1;
  };
  await_intake(producer, prefix);

  const int64_t interval_ns = static_cast<int64_t>(1e9 / o.rate);
  const int64_t start_ns = now_ns();
  const int64_t kill_at = start_ns + o.kill_after_ms * 1'000'000;
  const int64_t stop_at = kill_at + o.submit_for_ms * 1'000'000;
  const int64_t give_up_at = stop_at + 30'000'000'000;
  int64_t next_submit = start_ns, kill_ns = -1, switch_ns = -1, next_look = 0;
  Refusals refusals;
  while (true) {
    int64_t now = now_ns();
    while (now < stop_at && next_submit <= now) {
      jobs.push_back({.sent_ns = now});
      submit(jobs.size() - 1);
      next_submit += interval_ns;
    }
    if (kill_ns < 0 && now >= kill_at) {
      group.kill_primary();
      kill_ns = now_ns();
    }
    if (kill_ns >= 0 && switch_ns < 0 && now >= next_look) {
      if (group.named_primary() == group.replica_port()) switch_ns = now_ns();
      next_look = now + 10'000'000;
    }
    bool waiting = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Submission& s = jobs[i];
      if (s.resend_ns >= 0 && s.resend_ns <= now) {
        s.resend_ns = -1;
        submit(i);
      }
      waiting = waiting || s.resend_ns >= 0 || (s.accepted_ns >= 0 && s.finals == 0);
    }
    if (now >= stop_at && (!waiting || now >= give_up_at)) break;
    while (auto reply = receive(producer, 1ms)) note_reply(*reply, now_ns(), index_of, jobs, refusals);
  }

  const nlohmann::json report =
      report_of(o, kill_ns, switch_ns, static_cast<int64_t>(jobs.size()), outcomes_of(jobs, kill_ns), refusals);
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
}

}  // namespace

std::function<void()> add_failover_bench(CLI::App& app) {
  auto o = std::make_shared<FailoverBenchOptions>();
  CLI::App* cmd = app.add_subcommand("failover", "jobs through a broker while Sentinel fails its Redis primary over");
  cmd->add_option("--rate", o->rate, "submissions/s")->capture_default_str()->check(CLI::Range(1.0, 100000.0));
  cmd->add_option("--kill-after-ms", o->kill_after_ms, "the primary's SIGKILL this long into the run")
      ->capture_default_str();
  cmd->add_option("--submit-for-ms", o->submit_for_ms, "new submissions this long after the kill")
      ->capture_default_str();
  cmd->add_option("--down-after-ms", o->down_after_ms, "Sentinel's down-after-milliseconds")->capture_default_str();
  cmd->add_option("--failover-timeout-ms", o->failover_timeout_ms, "Sentinel's failover-timeout")
      ->capture_default_str();
  cmd->add_option("--redis-wait-replicas", o->wait_replicas, "the broker's --redis-wait-replicas")
      ->capture_default_str();
  cmd->add_option("--redis-server", o->redis_server)->capture_default_str();
  cmd->add_option("--redis-sentinel", o->redis_sentinel)->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_failover_bench(*o);
  };
}

}  // namespace flashq
