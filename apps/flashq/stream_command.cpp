#include "apps/flashq/stream_command.h"

#include <cstdio>
#include <memory>

#include "apps/flashq/broker_options.h"
#include "apps/flashq/job_report.h"
#include "client/flashq_client.h"
#include "shared/transport/frames.h"
#include "shared/error.h"

namespace flashq {
namespace {

// After this long without an event, ask the broker whether the job ended while our subscription
// was on its way (its final event then never reaches us).
constexpr int kStatusPollMs = 1000;
// Once the broker says the job is finished, events already published are at most this far away.
constexpr int kFinishedDrainMs = 200;

struct StreamOptions {
  std::string id;
  std::int64_t from_seq = 0;
  bool json = false;
  int wait_timeout_ms = 0;
  BrokerOptions broker;
};

// Prints the events with seq >= from_seq, once each, and remembers what it could not print.
class EventPrinter {
 public:
  explicit EventPrinter(const StreamOptions& options) : options_(options), next_seq_(options.from_seq) {}

  void show(const protocol::Event& event) {
    if (event.seq < next_seq_) return;  // before --from, or a repeat
    if (event.seq > next_seq_) note_missed(next_seq_, event.seq - 1);
    next_seq_ = event.seq + 1;
    if (options_.json) {
      print_json_line(event_json(event));
    } else {
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      std::fflush(stdout);
      printed_text_ = true;
    }
  }

  // The job finished before our subscription took effect: everything from next_seq_ up to its
  // last event is gone, and only the status reply tells how it ended.
  void show_finished_without_final(const protocol::StatusReply& status) {
    if (status.seq > next_seq_) note_missed(next_seq_, status.seq - 1);
    if (options_.json) print_json_line(status_json(status));
  }

  void end_text() {
    if (printed_text_) std::printf("\n");
    std::fflush(stdout);
  }

  bool missed() const { return missed_; }

 private:
  // Only when the broker's replay buffer no longer holds them: the missed part is named on stderr
  // and the exit code says the output is incomplete.
  void note_missed(std::int64_t first, std::int64_t last) {
    missed_ = true;
    std::fprintf(stderr,
                 "warning: job %s: events %lld..%lld are no longer kept by the broker and are not shown\n",
                 options_.id.c_str(), static_cast<long long>(first), static_cast<long long>(last));
  }

  const StreamOptions& options_;
  std::int64_t next_seq_;
  bool printed_text_ = false;
  bool missed_ = false;
};

int exit_code(const std::string& id, const protocol::FinalResult& result, const EventPrinter& printer) {
  const int job_exit = report_finish(id, result);
  if (job_exit != 0) return job_exit;
  return printer.missed() ? kExitStreamIncomplete : 0;
}

int run_stream(const StreamOptions& options) {
  Client client;
  connect_to_broker(client, options.broker);
  // Subscribe before asking the status, so that what the status reply calls published-so-far is
  // all that can be missing.
  StreamSubscriber subscriber = client.subscribe(options.id);
  EventPrinter printer(options);
  // What was published before the subscription comes from the broker's replay buffer; live events
  // then come from the subscription (the printer drops the ones it already showed).
  protocol::StatusReply status;
  std::optional<protocol::FinalResult> replayed_final;
  try {
    status = client.replay(options.id, options.from_seq, [&](const protocol::Event& event) {
      printer.show(event);
      if (event.final_result) replayed_final = event.final_result;
    }, options.broker.timeout_ms);
  } catch (const BrokerError& e) {
    if (e.wire_code() == "not_found") {
      throw Error(ErrorCode::kNotFound, "job " + options.id + " is not known to broker " +
                                            options.broker.frontend_endpoint);
    }
    if (e.wire_code() != "replay_unavailable") throw;
    status = client.status(options.id, options.broker.timeout_ms);
  }
  if (status.state == protocol::JobState::kUnknown) {
    throw Error(ErrorCode::kNotFound, "job " + options.id + " is not known to broker " +
                                          options.broker.frontend_endpoint);
  }
  if (replayed_final) {
    printer.end_text();
    return exit_code(options.id, *replayed_final, printer);
  }

  const std::int64_t deadline = deadline_after_ms(options.wait_timeout_ms);
  while (true) {
    if (deadline != kNoDeadline && steady_now_ms() >= deadline) {
      throw Error(ErrorCode::kIo, "job " + options.id + " did not finish within " +
                                      std::to_string(options.wait_timeout_ms) + " ms");
    }
    const bool finished = status.state == protocol::JobState::kFinished;
    if (std::optional<protocol::Event> event = subscriber.next(finished ? kFinishedDrainMs : kStatusPollMs)) {
      printer.show(*event);
      if (event->final_result) {
        printer.end_text();
        return exit_code(options.id, *event->final_result, printer);
      }
      continue;
    }
    if (finished) {
      printer.show_finished_without_final(status);
      printer.end_text();
      return exit_code(options.id, *status.final_result, printer);
    }
    status = client.status(options.id, options.broker.timeout_ms);
  }
}

}  // namespace

std::function<int()> add_stream_command(CLI::App& app) {
  auto options = std::make_shared<StreamOptions>();
  CLI::App* cmd = app.add_subcommand("stream", "print a job's events from the broker's stream until its final one");
  cmd->add_option("id", options->id, "job id")->required();
  cmd->add_option("--from", options->from_seq, "first event (seq) to print")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "print one JSON object per event (id, seq, text, token_ids, final)");
  cmd->add_option("--wait-timeout-ms", options->wait_timeout_ms, "give up waiting for the job after this (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_broker_options(*cmd, options->broker);
  return [cmd, options] { return *cmd ? run_stream(*options) : 0; };
}

}  // namespace flashq
