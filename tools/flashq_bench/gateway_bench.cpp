#include "tools/flashq_bench/gateway_bench.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <zmq_addon.hpp>

#include "shared/http/http_server.h"
#include "gateway/server/gateway.h"
#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "shared/protocol/stream.h"
#include "tools/flashq_bench/bench_peers.h"
#include "tools/flashq_bench/sse_clients.h"
#include "tools/flashq_bench/streaming_worker.h"

namespace flashq {
namespace {

// How long streams may take to open or end before a figure fails: generous, so that a loaded
// machine (or a sanitizer build, several times slower) measures late rather than not at all.
constexpr auto kStreamsWait = std::chrono::milliseconds(60000);

using namespace std::chrono_literals;
using namespace flashq::bench;
using Json = nlohmann::ordered_json;

constexpr const char* kModel = "synthetic";

struct GatewayBenchOptions {
  std::int64_t streams = 2000;  // held open at once
  double hold_s = 2;            // held this long before memory is read
  std::int64_t throughput_streams = 64;
  double throughput_s = 3;
  std::int64_t window = 4096;  // events sent and not yet received, all streams together
  std::int64_t latency_streams = 100;
  double latency_rate = 10000;  // token events/s in total
  double latency_s = 3;
  bool quick = false;
  bool json = false;
};

// The process's resident memory, in bytes (VmRSS).
std::int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// Thousands of sockets: the soft limit on open files raised to the hard one.
void raise_open_files_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &limit);
  }
}

std::int64_t open_files_limit() {
  rlimit limit{};
  return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? static_cast<std::int64_t>(limit.rlim_cur) : 0;
}

// Runs `measure` in a child process and returns its report: each figure starts from a fresh
// heap, so one measurement's freed memory never lowers the next one's resident size. Called
// before any thread exists.
Json in_child(const std::function<Json()>& measure) {
  int fds[2];
  if (pipe(fds) != 0) throw Error(ErrorCode::kIo, "pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, "fork failed");
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    int code = 0;
    try {
      out = measure().dump();
    } catch (const std::exception& e) {
      out = Json{{"error", e.what()}}.dump();
      code = 1;
    }
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    close(fds[1]);
    _exit(code);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Json report = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) throw Error(ErrorCode::kInternal, "a measurement's process ended without a report");
  if (report.contains("error")) throw Error(ErrorCode::kIo, report["error"].get<std::string>());
  return report;
}

// Polls `done` every 10 ms until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// The gateway as `flashq-gateway` runs it (its default HTTP options), on one broker, serving
// from construction to destruction; ready once it knows the synthetic model.
struct RunningGateway {
  std::unique_ptr<gateway::Gateway> gateway;
  std::unique_ptr<HttpServer> server;
  std::thread thread;

  explicit RunningGateway(const RunningBroker& broker) {
    gateway::GatewayOptions options;
    options.brokers.push_back({.frontend = broker.broker->frontend_endpoint(),
                               .stream = broker.broker->stream_endpoint(),
                               .curve = std::nullopt});
    gateway = std::make_unique<gateway::Gateway>(std::move(options));
    HttpServerOptions http;
    http.port = 0;
    server = std::make_unique<HttpServer>(
        http, [g = gateway.get()](const HttpRequest& request, std::shared_ptr<Responder> responder) {
          g->handle(request, std::move(responder));
        });
    gateway->set_server(server.get());
    thread = std::thread([s = server.get()] { s->run(); });
    const bool known = wait_until(
        [&] {
          gateway->wait_for_models(1000ms);
          return gateway->models().directory()->count(kModel) > 0;
        },
        10000ms);
    if (!known) {
      stop();
      throw Error(ErrorCode::kIo, "the gateway did not learn the synthetic worker's model");
    }
  }
  ~RunningGateway() {
    if (thread.joinable()) stop();
  }
  void stop() {
    server->stop();
    thread.join();
    gateway->shutdown();
    server.reset();
    gateway.reset();
  }
  int port() const { return server->port(); }
};

SseClientsOptions completion_requests(int port) {
  SseClientsOptions options;
  options.port = port;
  options.body = Json{{"model", kModel}, {"prompt", "hello"}, {"stream", true}, {"max_tokens", 100000}}.dump();
  return options;
}

// Throws unless `ok`, saying how far the streams came and what the gateway's metrics counted.
void check_clients(const SseClients& clients, RunningGateway& gateway, bool ok, const std::string& what) {
  if (ok) return;
  std::string counted;
  std::istringstream metrics(gateway.gateway->metrics().render(gateway.server->open_connections()));
  for (std::string line; std::getline(metrics, line);) {
    if (line.rfind("flashq_gateway_requests", 0) == 0 || line.rfind("flashq_gateway_open", 0) == 0)
      counted += "; " + line;
  }
  throw Error(ErrorCode::kIo, what + " (open " + std::to_string(clients.streams_open()) + ", flowing " +
                                  std::to_string(clients.streams_flowing()) + ", failed " +
                                  std::to_string(clients.failures()) + ": " + clients.first_failure() + counted + ")");
}

// Figure 1, one run: N slow streams (one token event per second each) held open at once; the
// resident size before they open and with all N open. With the gateway, HTTP clients open them;
// without (the baseline), one ZeroMQ producer submits the same N jobs with stream=true and reads
// their events, so the broker's and the worker's share is the same in both runs.
Json measure_open_streams(const GatewayBenchOptions& o, bool through_gateway) {
  zmq::context_t context;
  RunningBroker broker(context, o.streams + 1000);
  // As many workers as the streams need slots.
  std::vector<std::unique_ptr<StreamingWorker>> workers;
  for (std::int64_t slots = 0; slots < o.streams; slots += kWorkerSlots) {
    workers.push_back(std::make_unique<StreamingWorker>(context, broker.broker->backend_endpoint(),
                                                        StreamingWorkerOptions{.job_interval = 1s}));
  }
  const auto finish_all = [&] {
    for (auto& worker : workers) worker->finish_all();
  };
  std::this_thread::sleep_for(100ms);
  Json report;
  const auto hold = std::chrono::milliseconds(static_cast<std::int64_t>(o.hold_s * 1000));
  const auto open_timeout = kStreamsWait + std::chrono::milliseconds(o.streams * 10);
  if (through_gateway) {
    RunningGateway gateway(broker);
    SseClients clients(completion_requests(gateway.port()));
    const std::int64_t before = resident_bytes();
    clients.open(static_cast<int>(o.streams));
    check_clients(
        clients, gateway,
        wait_until([&] { return clients.streams_flowing() == o.streams || clients.failures() > 0; }, open_timeout) &&
            clients.failures() == 0,
        "the streams did not all open");
    std::this_thread::sleep_for(hold);
    const std::int64_t open = resident_bytes();
    report = {{"rss_before_bytes", before},
              {"rss_open_bytes", open},
              {"client_bytes", clients.held_bytes()},
              {"connections", gateway.server->open_connections()}};
    finish_all();
    check_clients(clients, gateway, wait_until([&] { return clients.streams_done() == o.streams; }, kStreamsWait),
                  "the streams did not all end");
    return report;
  }
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, broker.broker->frontend_endpoint());
  const std::int64_t before = resident_bytes();
  protocol::Job job;
  job.model = kModel;
  job.prompt = std::string("hello");
  job.max_tokens = 100000;
  job.stream = true;
  const std::string prefix = "open-" + std::to_string(now_ns()) + "-";
  for (std::int64_t i = 0; i < o.streams; ++i) {
    job.id = prefix + std::to_string(i);
    send_message(producer, protocol::Submit{job});
  }
  std::unordered_map<std::string, bool> flowing;
  std::int64_t finals = 0;
  auto drain = [&](std::chrono::milliseconds for_how_long) {
    const auto end = Clock::now() + for_how_long;
    while (Clock::now() < end) {
      auto message = receive(producer, 10ms);
      if (!message || message->type != protocol::MessageType::kEvent) continue;
      const auto event = protocol::from_wire<protocol::Event>(*message);
      flowing[event.id] = true;
      if (event.final_result) ++finals;
    }
  };
  const auto end = Clock::now() + open_timeout;
  while (static_cast<std::int64_t>(flowing.size()) < o.streams && Clock::now() < end) drain(100ms);
  if (static_cast<std::int64_t>(flowing.size()) < o.streams)
    throw Error(ErrorCode::kIo, "baseline jobs did not all stream");
  drain(hold);
  report = {{"rss_before_bytes", before}, {"rss_open_bytes", resident_bytes()}};
  finish_all();
  while (finals < o.streams && Clock::now() < end + kStreamsWait) drain(100ms);
  return report;
}

Json figure_open_streams(const GatewayBenchOptions& o) {
  const Json baseline = in_child([&] { return measure_open_streams(o, false); });
  const Json gateway = in_child([&] { return measure_open_streams(o, true); });
  const auto delta = [](const Json& run) {
    return run["rss_open_bytes"].get<std::int64_t>() - run["rss_before_bytes"].get<std::int64_t>();
  };
  const std::int64_t whole = delta(gateway), base = delta(baseline);
  const std::int64_t clients = gateway["client_bytes"].get<std::int64_t>();
  const double n = static_cast<double>(o.streams);
  return {{"streams", o.streams},
          {"token_events_per_s_per_stream", 1},
          {"held_s", o.hold_s},
          {"open_files_limit", open_files_limit()},
          {"rss_before_bytes", gateway["rss_before_bytes"]},
          {"rss_open_bytes", gateway["rss_open_bytes"]},
          {"rss_growth_bytes", whole},
          {"baseline_rss_growth_bytes", base},
          {"client_bytes", clients},
          {"gateway_bytes", whole - base - clients},
          {"gateway_bytes_per_stream", static_cast<double>(whole - base - clients) / n},
          {"process_bytes_per_stream", static_cast<double>(whole) / n}};
}

// Figure 2: events/s delivered as SSE, the worker sending as fast as `window` allows.
Json figure_throughput(const GatewayBenchOptions& o) {
  zmq::context_t context;
  RunningBroker broker(context, 1000);
  // The worker's thread counts what the clients received; it holds them while it looks, so that
  // clients going away (the figure failing, say) never leave it a dangling pointer.
  std::atomic<std::shared_ptr<const SseClients>> receivers;
  StreamingWorker worker(context, broker.broker->backend_endpoint(), {.window = o.window, .delivered = [&receivers] {
                                                                        const std::shared_ptr<const SseClients> c =
                                                                            receivers.load();
                                                                        return c ? c->events() : std::int64_t{0};
                                                                      }});
  std::this_thread::sleep_for(100ms);
  RunningGateway gateway(broker);
  const auto shared_clients = std::make_shared<SseClients>(completion_requests(gateway.port()));
  SseClients& clients = *shared_clients;
  receivers = shared_clients;
  clients.open(static_cast<int>(o.throughput_streams));
  check_clients(clients, gateway,
                wait_until([&] { return clients.streams_flowing() == o.throughput_streams || clients.failures() > 0; },
                           kStreamsWait) &&
                    clients.failures() == 0,
                "the streams did not all open");
  std::this_thread::sleep_for(300ms);  // warm
  const std::int64_t first = clients.events();
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<std::int64_t>(o.throughput_s * 1000)));
  const std::int64_t received = clients.events() - first;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  worker.finish_all();
  check_clients(clients, gateway,
                wait_until([&] { return clients.streams_done() == o.throughput_streams; }, kStreamsWait) &&
                    clients.failures() == 0,
                "the streams did not all end");
  receivers.store(nullptr);
  return {{"streams", o.throughput_streams},
          {"window_events", o.window},
          {"seconds", seconds},
          {"token_events", received},
          {"token_events_per_s", static_cast<double>(received) / seconds}};
}

// Figure 3: at a fixed total rate, each event's latency from the worker's send to the SSE
// client's receipt and to a direct ZeroMQ subscriber's, and per event the difference.
Json figure_latency(const GatewayBenchOptions& o) {
  zmq::context_t context;
  RunningBroker broker(context, 1000);
  StreamingWorker worker(context, broker.broker->backend_endpoint(), {.total_rate = o.latency_rate});
  zmq::socket_t subscriber = make_socket(context, zmq::socket_type::sub, broker.broker->stream_endpoint());
  subscriber.set(zmq::sockopt::subscribe, std::string(protocol::kStreamTopicPrefix));
  std::mutex direct_mutex;
  std::vector<EventTiming> direct;
  // Joined when the figure returns or throws.
  std::jthread reader([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      zmq::pollitem_t item{subscriber.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, 100ms) <= 0) continue;
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(subscriber, std::back_inserter(parts));
      const std::int64_t received = now_ns();
      std::vector<std::string_view> frames;
      for (auto& p : parts) frames.push_back(p.to_string_view());
      const protocol::Event event = protocol::from_stream_frames(frames);
      if (event.text.empty()) continue;
      std::lock_guard lock(direct_mutex);
      direct.push_back({std::stoll(event.text), received});
    }
  });
  std::this_thread::sleep_for(100ms);
  RunningGateway gateway(broker);
  SseClientsOptions requests = completion_requests(gateway.port());
  requests.record_send_times = true;
  SseClients clients(requests);
  clients.open(static_cast<int>(o.latency_streams));
  check_clients(clients, gateway,
                wait_until([&] { return clients.streams_flowing() == o.latency_streams || clients.failures() > 0; },
                           kStreamsWait) &&
                    clients.failures() == 0,
                "the streams did not all open");
  std::this_thread::sleep_for(500ms);  // warm
  const std::int64_t from_ns = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<std::int64_t>(o.latency_s * 1000)));
  const std::int64_t to_ns = now_ns();
  std::this_thread::sleep_for(200ms);  // the last events in the window arrive
  worker.finish_all();
  std::vector<EventTiming> through_gateway = clients.take_timings();
  check_clients(
      clients, gateway,
      wait_until([&] { return clients.streams_done() == o.latency_streams; }, kStreamsWait) && clients.failures() == 0,
      "the streams did not all end");
  reader.request_stop();
  reader.join();
  std::unordered_map<std::int64_t, std::int64_t> direct_at;  // send time -> receipt
  std::vector<double> direct_us, gateway_us, added_us;
  for (const EventTiming& t : direct) {
    if (t.sent_ns < from_ns || t.sent_ns >= to_ns) continue;
    direct_at[t.sent_ns] = t.received_ns;
    direct_us.push_back(static_cast<double>(t.received_ns - t.sent_ns) / 1000.0);
  }
  for (const EventTiming& t : through_gateway) {
    if (t.sent_ns < from_ns || t.sent_ns >= to_ns) continue;
    gateway_us.push_back(static_cast<double>(t.received_ns - t.sent_ns) / 1000.0);
    if (auto it = direct_at.find(t.sent_ns); it != direct_at.end()) {
      added_us.push_back(static_cast<double>(t.received_ns - it->second) / 1000.0);
    }
  }
  const double sent = static_cast<double>(to_ns - from_ns) / 1e9 * o.latency_rate;
  return {{"streams", o.latency_streams},
          {"rate_events_per_s", o.latency_rate},
          {"seconds", static_cast<double>(to_ns - from_ns) / 1e9},
          {"events_sse", gateway_us.size()},
          {"events_direct", direct_us.size()},
          {"events_expected", static_cast<std::int64_t>(sent)},
          {"sse_p50_us", percentile(gateway_us, 0.5)},
          {"sse_p99_us", percentile(gateway_us, 0.99)},
          {"direct_p50_us", percentile(direct_us, 0.5)},
          {"direct_p99_us", percentile(direct_us, 0.99)},
          {"added_p50_us", percentile(added_us, 0.5)},
          {"added_p99_us", percentile(added_us, 0.99)},
          {"p99_difference_us", percentile(gateway_us, 0.99) - percentile(direct_us, 0.99)}};
}

void print_table(const Json& r) {
  const Json& m = r["open_streams"];
  const Json& t = r["throughput"];
  const Json& l = r["latency"];
  std::printf("\n%-44s %s\n", "figure", "value");
  std::printf("%-44s %lld\n", "open SSE streams held", static_cast<long long>(m["streams"].get<std::int64_t>()));
  std::printf("%-44s %.1f MiB\n", "  process RSS growth with them open",
              m["rss_growth_bytes"].get<double>() / 1048576.0);
  std::printf("%-44s %.1f MiB\n", "  of which broker+worker (baseline run)",
              m["baseline_rss_growth_bytes"].get<double>() / 1048576.0);
  std::printf("%-44s %.1f MiB\n", "  of which HTTP clients", m["client_bytes"].get<double>() / 1048576.0);
  std::printf("%-44s %.0f B\n", "  gateway bytes per open stream", m["gateway_bytes_per_stream"].get<double>());
  std::printf("%-44s %.0f /s (%lld streams)\n", "token events delivered as SSE", t["token_events_per_s"].get<double>(),
              static_cast<long long>(t["streams"].get<std::int64_t>()));
  std::printf("%-44s %.0f /s, %lld streams\n", "latency at", l["rate_events_per_s"].get<double>(),
              static_cast<long long>(l["streams"].get<std::int64_t>()));
  std::printf("%-44s p50 %.0f us, p99 %.0f us\n", "  worker -> SSE client", l["sse_p50_us"].get<double>(),
              l["sse_p99_us"].get<double>());
  std::printf("%-44s p50 %.0f us, p99 %.0f us\n", "  worker -> ZeroMQ subscriber", l["direct_p50_us"].get<double>(),
              l["direct_p99_us"].get<double>());
  std::printf("%-44s p50 %.0f us, p99 %.0f us\n", "  added by the gateway (per event)", l["added_p50_us"].get<double>(),
              l["added_p99_us"].get<double>());
}

void run_gateway_bench(GatewayBenchOptions o) {
  if (o.quick) {
    o.streams = 100;
    o.hold_s = 0.3;
    o.throughput_s = 0.5;
    o.latency_streams = 20;
    o.latency_rate = 2000;
    o.latency_s = 0.5;
  }
  if (o.streams < 1 || o.throughput_streams < 1 || o.latency_streams < 1 || o.latency_rate <= 0 || o.window < 1) {
    throw Error(ErrorCode::kInvalidArgument, "stream counts, --window and --latency-rate must be positive");
  }
  raise_open_files_limit();
  if (open_files_limit() < 2 * o.streams + 256) {
    throw Error(ErrorCode::kInvalidArgument, std::to_string(o.streams) + " streams need " +
                                                 std::to_string(2 * o.streams + 256) + " open files; the limit is " +
                                                 std::to_string(open_files_limit()));
  }
  Json report = {{"synthetic", "broker, workers and HTTP clients in this process; no model runs"}};
  report["open_streams"] = figure_open_streams(o);
  report["throughput"] = in_child([&] { return figure_throughput(o); });
  report["latency"] = in_child([&] { return figure_latency(o); });
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
  if (!o.json) print_table(report);
}

}  // namespace

std::function<void()> add_gateway_bench(CLI::App& app) {
  auto o = std::make_shared<GatewayBenchOptions>();
  CLI::App* cmd = app.add_subcommand("gateway", "the HTTP gateway: open streams' memory, SSE events/s, added latency");
  cmd->add_option("--streams", o->streams, "SSE streams held open at once")->capture_default_str();
  cmd->add_option("--hold-s", o->hold_s, "seconds they are held before memory is read")->capture_default_str();
  cmd->add_option("--throughput-streams", o->throughput_streams)->capture_default_str();
  cmd->add_option("--throughput-s", o->throughput_s, "seconds events are counted")->capture_default_str();
  cmd->add_option("--window", o->window, "events in flight (sent, not yet received) while measuring throughput")
      ->capture_default_str();
  cmd->add_option("--latency-streams", o->latency_streams)->capture_default_str();
  cmd->add_option("--latency-rate", o->latency_rate, "token events/s in total while measuring latency")
      ->capture_default_str();
  cmd->add_option("--latency-s", o->latency_s, "seconds latency is sampled")->capture_default_str();
  cmd->add_flag("--quick", o->quick, "a short run with few streams (a smoke test)");
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_gateway_bench(*o);
  };
}

}  // namespace flashq
