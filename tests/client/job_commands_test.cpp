// `flashq submit | stream | cancel | status` end to end: the binary (FLASHQ_BIN) against a
// scripted broker over real ZeroMQ on loopback, checking output and exit codes (0 done, 1 the
// job failed, 2 bad input or a refusal or no answer, 3 stream events missed).
#include <algorithm>
#include <chrono>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/client/fake_broker.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

using protocol::Event;
using protocol::JobState;

std::vector<Event> hello_events() {
  return {text_event("", 0, "Hel", {101}), text_event("", 1, "lo, ", {102, 103}),
          final_event("", 2, "world", {104}, stop_result())};
}

protocol::StatusReply status_in(JobState state, std::int64_t seq) {
  protocol::StatusReply status;
  status.state = state;
  status.attempt = state == JobState::kQueued ? 0 : 1;
  status.seq = seq;
  if (state == JobState::kFinished) status.final_result = stop_result();
  return status;
}

CommandResult flashq(const FakeBroker& broker, const std::string& args) {
  return run_command(bin_path("flashq") + " " + args + broker.cli_endpoints());
}

std::size_t line_count(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

TEST(SubmitCommand, StreamsTheTextInOrder) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt hi --stream");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Hello, world\n");
}

// Not a terminal here: the text comes plain (no figures redrawn), then the summary line, whose
// figures are the final result's (5 tokens, 30 ms in all, the first at 9 ms, tau 2.5).
TEST(SubmitCommand, LiveStreamsTheTextThenASummaryLine) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt hi --live");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Hello, world\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\033'), std::string::npos) << "terminal codes in a pipe: " << r.output;
  EXPECT_NE(r.output.find("5 tokens in 0.03 s (first after 9 ms): 190.5 tok/s decoding, tau 2.50"), std::string::npos)
      << r.output;
  EXPECT_EQ(flashq(broker, "submit --prompt hi --live --json").exit_code, 2);
}

TEST(SubmitCommand, WithoutStreamPrintsTheWholeTextAtTheEnd) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt hi");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Hello, world\n");
}

TEST(SubmitCommand, JsonPrintsTheFinalResultAsOneObject) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --id j7 --prompt hi --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(line_count(r.output), 1u) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out.at("id"), "j7");
  EXPECT_EQ(out.at("text"), "Hello, world");
  EXPECT_EQ(out.at("tokens"), (std::vector<int>{101, 102, 103, 104}));
  EXPECT_EQ(out.at("finish_reason"), "stop");
  EXPECT_EQ(out.at("usage"), (nlohmann::json{{"prompt_tokens", 7}, {"completion_tokens", 5}}));
  EXPECT_EQ(out.at("spec_stats"), (nlohmann::json{{"draft_steps", 2}, {"accepted_tokens", 3}, {"tau", 2.5}}));
  EXPECT_EQ(out.at("timings"), (nlohmann::json{{"queue_ms", 4}, {"ttft_ms", 9}, {"total_ms", 30}}));
  EXPECT_FALSE(out.contains("error"));
}

TEST(SubmitCommand, StreamJsonPrintsOneLinePerEventThenTheResult) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt hi --stream --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::vector<nlohmann::json> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 4u) << r.output;
  EXPECT_EQ(objects[1].at("seq"), 1);
  EXPECT_EQ(objects[1].at("text"), "lo, ");
  EXPECT_EQ(objects[3].at("text"), "Hello, world");
}

TEST(SubmitCommand, SendsEveryJobOption) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker,
                           "submit --id j9 --prompt 'hi there' --chat --max-tokens 12 --temperature 0.5 --top-p 0.9 "
                           "--top-k 40 --seed 7 --stop END --stop '###' --stop-token-id 5 --stop-token-id 6 "
                           "--priority -2 --deadline-ms 1500 --spec off --block-size 8 --model tiny");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const protocol::Job job = protocol::from_wire<protocol::Submit>(broker.requests().at(0)).job;
  EXPECT_EQ(job.id, "j9");
  EXPECT_EQ(job.prompt, protocol::Prompt(std::vector<protocol::ChatMessage>{{"user", "hi there"}}));
  EXPECT_EQ(job.max_tokens, 12);
  EXPECT_EQ(job.temperature, 0.5);
  EXPECT_EQ(job.top_p, 0.9);
  EXPECT_EQ(job.top_k, 40);
  EXPECT_EQ(job.seed, 7u);
  EXPECT_EQ(job.stop, (std::vector<std::string>{"END", "###"}));
  EXPECT_EQ(job.stop_token_ids, (protocol::TokenIds{5, 6}));
  EXPECT_EQ(job.priority, -2);
  EXPECT_EQ(job.deadline_ms, 1500);
  EXPECT_EQ(job.spec, protocol::SpecMode::kOff);
  EXPECT_EQ(job.block_size, 8);
  EXPECT_EQ(job.model, "tiny");
  EXPECT_TRUE(job.stream);
}

TEST(SubmitCommand, SendsPromptTokensFromACommaList) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt-tokens 3,1,4,1,5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const protocol::Job job = protocol::from_wire<protocol::Submit>(broker.requests().at(0)).job;
  EXPECT_EQ(job.prompt, protocol::Prompt(protocol::TokenIds{3, 1, 4, 1, 5}));
}

TEST(SubmitCommand, RejectedExitsTwoNamingTheReason) {
  FakeBroker broker([](const protocol::WireMessage&) {
    return std::vector{protocol::to_wire(protocol::Rejected{"j1", "overloaded", 250})};
  });
  CommandResult r = flashq(broker, "submit --id j1 --prompt hi");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "error: job j1 rejected: overloaded (retry after 250 ms)\n");
}

TEST(SubmitCommand, BrokerErrorExitsTwoWithItsMessage) {
  FakeBroker broker([](const protocol::WireMessage&) {
    return std::vector{protocol::to_wire(protocol::ErrorReply{"invalid_argument", "prompt too long", std::nullopt})};
  });
  CommandResult r = flashq(broker, "submit --prompt hi");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find("invalid_argument: prompt too long"), std::string::npos) << r.output;
}

TEST(SubmitCommand, NoAnswerTimesOutWithExitTwo) {
  FakeBroker broker([](const protocol::WireMessage&) { return std::vector<protocol::WireMessage>{}; });
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = flashq(broker, "submit --prompt hi --timeout-ms 300");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no answer to SUBMIT from broker " + broker.frontend_endpoint() + " within 300 ms"),
            std::string::npos)
      << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(SubmitCommand, JobThatEndsInErrorExitsOneAndPrintsTheError) {
  protocol::FinalResult failed = stop_result();
  failed.finish_reason = protocol::FinishReason::kError;
  failed.error = "worker lost 3 times";
  FakeBroker broker(broker_like({text_event("", 0, "par", {1}), final_event("", 1, "", {}, failed)}));
  CommandResult r = flashq(broker, "submit --id j1 --prompt hi --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: job j1 failed: error: worker lost 3 times"), std::string::npos) << r.output;
}

TEST(SubmitCommand, MissingPromptExitsTwo) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --max-tokens 3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "error: one of --prompt, --prompt-tokens is required\n");
  EXPECT_TRUE(broker.requests().empty());
}

TEST(SubmitCommand, OutOfRangeOptionExitsTwoNamingTheField) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt hi --top-p 1.5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find("top_p: must be in (0, 1]"), std::string::npos) << r.output;
}

TEST(SubmitCommand, UnknownSpecModeExitsTwo) {
  FakeBroker broker(broker_like(hello_events()));
  CommandResult r = flashq(broker, "submit --prompt hi --spec fast");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--spec fast: must be auto, off or dflash"), std::string::npos) << r.output;
}

TEST(StreamCommand, PrintsThePublishedEventsAndStopsAtTheFinal) {
  FakeBroker broker(broker_like({}, status_in(JobState::kRunning, 0)));
  std::vector<Event> events = hello_events();
  for (Event& event : events) event.id = "j1";
  events.push_back(text_event("j1", 3, "after the final", {9}));
  broker.publish_on_subscribe("j1", events);
  CommandResult r = flashq(broker, "stream j1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Hello, world\n");
}

TEST(StreamCommand, FromSeqSkipsEarlierEvents) {
  FakeBroker broker(broker_like({}, status_in(JobState::kRunning, 0)));
  std::vector<Event> events = hello_events();
  for (Event& event : events) event.id = "j1";
  broker.publish_on_subscribe("j1", events);
  CommandResult r = flashq(broker, "stream j1 --from 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::vector<std::int64_t> seqs;
  for (std::string line; std::getline(lines, line);) seqs.push_back(nlohmann::json::parse(line).at("seq"));
  EXPECT_EQ(seqs, (std::vector<std::int64_t>{1, 2}));
}

TEST(StreamCommand, JoinedLateGetsTheEarlierEventsFromTheBrokersReplay) {
  std::vector<Event> events = hello_events();
  for (Event& event : events) event.id = "j1";
  FakeBroker broker(broker_like({events[0], events[1]}, status_in(JobState::kRunning, 2)));
  broker.publish_on_subscribe("j1", {events[2]});  // seq 0 and 1 went out before we subscribed
  CommandResult r = flashq(broker, "stream j1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Hello, world\n");
}

TEST(StreamCommand, JoinedTooLateNamesTheMissedEventsAndExitsThree) {
  FakeBroker broker(broker_like({}, status_in(JobState::kRunning, 2)));
  std::vector<Event> events = hello_events();
  for (Event& event : events) event.id = "j1";
  broker.publish_on_subscribe("j1", {events[2]});  // seq 0 and 1 went out before we subscribed
  CommandResult r = flashq(broker, "stream j1");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("warning: job j1: events 0..1 are no longer kept by the broker"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("world\n"), std::string::npos) << r.output;
}

TEST(StreamCommand, JobFinishedBeforeJoiningReportsItsEndAndExitsThree) {
  FakeBroker broker(broker_like({}, status_in(JobState::kFinished, 3)));
  CommandResult r = flashq(broker, "stream j1 --json");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("events 0..2 are no longer kept"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(R"("finish_reason":"stop")"), std::string::npos) << r.output;
}

TEST(StreamCommand, UnknownJobExitsTwo) {
  FakeBroker broker(broker_like({}));
  CommandResult r = flashq(broker, "stream ghost");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("job ghost is not known to broker"), std::string::npos) << r.output;
}

TEST(CancelCommand, SendsCancelWithTheId) {
  FakeBroker broker(broker_like({}, status_in(JobState::kRunning, 4)));
  CommandResult r = flashq(broker, "cancel j1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "cancel requested for job j1 (state: running)\n");
  EXPECT_EQ(protocol::from_wire<protocol::Cancel>(broker.requests().at(0)).id, "j1");
}

TEST(CancelCommand, UnknownJobExitsTwoNamingNotFound) {
  FakeBroker broker(broker_like({}));
  CommandResult r = flashq(broker, "cancel ghost");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "error: broker: not_found (job ghost): no job ghost\n");
}

TEST(StatusCommand, PrintsTheStateAsJson) {
  FakeBroker broker(broker_like({}, status_in(JobState::kFinished, 3)));
  CommandResult r = flashq(broker, "status j1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out.at("id"), "j1");
  EXPECT_EQ(out.at("state"), "finished");
  EXPECT_EQ(out.at("attempt"), 1);
  EXPECT_EQ(out.at("seq"), 3);
  EXPECT_EQ(out.at("final").at("finish_reason"), "stop");
}

TEST(StatusCommand, InvalidIdExitsTwo) {
  FakeBroker broker(broker_like({}));
  CommandResult r = flashq(broker, "status 'two words'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("printable ASCII"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashq::testing
