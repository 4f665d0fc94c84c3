#include "tools/flashq_bench/arrival_bench.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "shared/protocol/messages.h"
#include "worker/serving/serving_model.h"
#include "worker/process/job_preparer.h"
#include "worker/process/job_runner.h"
#include "worker/process/output_thread.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

struct ArrivalBenchOptions {
  std::string model_dir = "models/demo/target";
  std::string drafter_dir = "models/demo/drafter";
  int64_t running = 8;            // sequences decoding when the long prompt arrives
  int64_t arrival_words = 30000;  // words of the arriving chat message (about a token each)
  double window_s = 2.0;          // measured before and after the arrival
  int repeats = 3;
  bool json = false;
};

// Where the arriving job's text work runs.
enum class Arrival { kNone, kEngineThread, kPrepareThread };

const char* arrival_name(Arrival arrival) {
  switch (arrival) {
    case Arrival::kNone:
      return "no arrival";
    case Arrival::kEngineThread:
      return "arrival, text work on the engine thread";
    case Arrival::kPrepareThread:
      return "arrival, text work on the prepare thread";
  }
  return "";
}

protocol::Assign decoding_job(int64_t i) {
  protocol::Assign assign;
  assign.job.id = "decode-" + std::to_string(i);
  assign.job.prompt = std::vector<protocol::ChatMessage>{
      {.role = "user", .content = "Tell me about the broker, request " + std::to_string(i) + "."}};
  assign.job.max_tokens = 100000;  // runs to the context's end, past the window
  return assign;
}

protocol::Assign arriving_job(int64_t words) {
  std::string text;
  for (int64_t i = 0; i < words; ++i) text += i % 7 == 0 ? "queue " : "token ";
  protocol::Assign assign;
  assign.job.id = "arrival";
  assign.job.prompt = std::vector<protocol::ChatMessage>{{.role = "user", .content = std::move(text)}};
  assign.job.max_tokens = 16;
  return assign;
}

struct Gaps {
  std::vector<double> ms;  // between one sequence's TOKENS, every running sequence
  double arrival_final_after_ms = -1;
};

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

// One run: `running` sequences decode (one that reaches the end of the context is replaced);
// after a warm-up the long prompt arrives (unless kNone) through the prepare thread or straight to
// the engine thread; gaps between each running sequence's TOKENS are collected over the window.
Gaps run_once(ServingModel& serving, const ArrivalBenchOptions& o, Arrival arrival) {
  WorkInbox link_inbox, engine_inbox;
  OutputInbox output_inbox;
  MessageOutbox outbox;
  const WorkerModel served{"target", serving.drafter != nullptr, serving.chat_template.chat_template.get()};
  JobRunner runner(*serving.model, *serving.tokenizer, serving.proposer.get(), served, o.running + 1, {}, engine_inbox,
                   output_inbox);
  JobPreparer preparer(*serving.tokenizer, served, link_inbox, engine_inbox);
  OutputThread output(output_inbox, engine_inbox, outbox);
  std::thread engine([&runner] { runner.run(); });
  std::thread prepare([&preparer] { preparer.run(); });
  std::thread writer([&output] { output.run(); });
  int64_t decoding_jobs = 0;
  for (; decoding_jobs < o.running; ++decoding_jobs) {
    link_inbox.push(AssignWork{decoding_job(decoding_jobs), Clock::now(), 0});
  }

  Gaps gaps;
  std::map<std::string, Clock::time_point> last_tokens;
  const auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.window_s));
  std::optional<Clock::time_point> arrived, measuring_from;
  const auto started = Clock::now();
  constexpr auto kWarmUp = std::chrono::milliseconds(500);
  while (!measuring_from || Clock::now() < *measuring_from + window) {
    pollfd wake{outbox.wakeup_fd(), POLLIN, 0};
    ::poll(&wake, 1, 10);
    const auto now = Clock::now();
    for (OutgoingMessage& out : outbox.take()) {
      if (out.message.type == protocol::MessageType::kFinal) {
        const auto final_message = protocol::from_wire<protocol::Final>(out.message);
        if (final_message.id == "arrival" && arrived) {
          gaps.arrival_final_after_ms = std::chrono::duration<double, std::milli>(now - *arrived).count();
        } else if (final_message.id != "arrival") {
          // A sequence reached the end of the context: another takes its place, so that
          // `running` decode throughout.
          last_tokens.erase(final_message.id);
          link_inbox.push(AssignWork{decoding_job(decoding_jobs++), now, 0});
        }
        continue;
      }
      const auto tokens = protocol::from_wire<protocol::Tokens>(out.message);
      if (tokens.id == "arrival") continue;
      auto last = last_tokens.find(tokens.id);
      if (last != last_tokens.end() && measuring_from && now >= *measuring_from) {
        gaps.ms.push_back(std::chrono::duration<double, std::milli>(now - last->second).count());
      }
      last_tokens[tokens.id] = now;
    }
    // Every sequence decoding for a window: then the arrival, and the measured window.
    if (!measuring_from && static_cast<int64_t>(last_tokens.size()) == o.running && now - started > kWarmUp) {
      measuring_from = now;
      arrived = now;
      if (arrival == Arrival::kPrepareThread) link_inbox.push(AssignWork{arriving_job(o.arrival_words), now, 0});
      if (arrival == Arrival::kEngineThread) engine_inbox.push(AssignWork{arriving_job(o.arrival_words), now, 0});
    }
  }
  link_inbox.push(StopEngine{});
  prepare.join();
  engine.join();
  writer.join();
  return gaps;
}

void run_arrival_bench(const ArrivalBenchOptions& o) {
  ServingModel serving = ServingModel::load(o.model_dir, o.drafter_dir, "cpu");
  const Arrival arrivals[] = {Arrival::kNone, Arrival::kEngineThread, Arrival::kPrepareThread};
  std::map<Arrival, std::vector<Gaps>> runs;
  for (int r = 0; r < o.repeats; ++r) {  // side by side: A B C, A B C, ...
    for (Arrival arrival : arrivals) runs[arrival].push_back(run_once(serving, o, arrival));
  }
  nlohmann::json report = {{"bench", "arrival"},     {"model", o.model_dir},
                           {"running", o.running},   {"arrival_words", o.arrival_words},
                           {"window_s", o.window_s}, {"cases", nlohmann::json::array()}};
  for (Arrival arrival : arrivals) {
    std::vector<double> p50, p99, worst, final_after;
    for (const Gaps& gaps : runs[arrival]) {
      p50.push_back(percentile(gaps.ms, 0.5));
      p99.push_back(percentile(gaps.ms, 0.99));
      worst.push_back(percentile(gaps.ms, 1.0));
      final_after.push_back(gaps.arrival_final_after_ms);
    }
    // The median run of each figure.
    report["cases"].push_back({{"case", arrival_name(arrival)},
                               {"inter_token_p50_ms", percentile(p50, 0.5)},
                               {"inter_token_p99_ms", percentile(p99, 0.5)},
                               {"inter_token_max_ms", percentile(worst, 0.5)},
                               {"arrival_final_after_ms", percentile(final_after, 0.5)}});
  }
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
}

}  // namespace

std::function<void()> add_arrival_bench(CLI::App& app) {
  auto o = std::make_shared<ArrivalBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "arrival", "running sequences' inter-token gaps while a long chat prompt arrives at the worker");
  cmd->add_option("--model", o->model_dir, "target model directory")->capture_default_str();
  cmd->add_option("--drafter", o->drafter_dir, "DFlash drafter directory (empty: none)")->capture_default_str();
  cmd->add_option("--running", o->running, "sequences decoding")->capture_default_str();
  cmd->add_option("--arrival-words", o->arrival_words, "words of the arriving chat message")->capture_default_str();
  cmd->add_option("--window-s", o->window_s, "seconds measured after the arrival")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "runs per case, side by side; the median is reported")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_arrival_bench(*o);
  };
}

}  // namespace flashq
