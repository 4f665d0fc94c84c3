// The broker's /metrics after a known run: a worker played at the wire level sends TOKENS with
// known speculation and known gaps, and every counter and histogram is read back exactly
// (docs/operations.md, Metrics). Also the recording rules of BrokerMetrics on their own.
#include <atomic>
#include <cmath>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <zmq_addon.hpp>

#include "broker/broker.h"
#include "broker/metrics.h"
#include "shared/protocol/stream.h"
#include "tests/support/http_get.h"
#include "tests/broker/wire_peer.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;
using protocol::StepSpeculation;

// The value of the sample named exactly `sample` (labels included), or NaN when absent.
double sample_value(const std::string& metrics, const std::string& sample) {
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > sample.size() && line.compare(0, sample.size(), sample) == 0 && line[sample.size()] == ' ') {
      return std::stod(line.substr(sample.size() + 1));
    }
  }
  return std::nan("");
}

TEST(BrokerMetrics, AnEventOfKTokensIsKInterTokenObservations) {
  BrokerMetrics metrics;
  metrics.token_event(3, true, 0.5);     // time to first token; its other 2 tokens are no gap
  metrics.token_event(4, false, 0.012);  // 4 observations of 0.003
  metrics.token_event(1, false, 0.2);
  const std::string text = metrics.render();
  EXPECT_EQ(sample_value(text, "flashq_generation_tokens_total"), 8);
  EXPECT_EQ(sample_value(text, "flashq_time_to_first_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(sample_value(text, "flashq_time_to_first_token_seconds_sum"), 0.5);
  EXPECT_EQ(sample_value(text, "flashq_inter_token_latency_seconds_count"), 5);
  EXPECT_NEAR(sample_value(text, "flashq_inter_token_latency_seconds_sum"), 0.212, 1e-9);
  EXPECT_EQ(sample_value(text, "flashq_inter_token_latency_seconds_bucket{le=\"0.001\"}"), 0);
  EXPECT_EQ(sample_value(text, "flashq_inter_token_latency_seconds_bucket{le=\"0.005\"}"), 4);
  EXPECT_EQ(sample_value(text, "flashq_inter_token_latency_seconds_bucket{le=\"0.15\"}"), 4);
  EXPECT_EQ(sample_value(text, "flashq_inter_token_latency_seconds_bucket{le=\"0.2\"}"), 5);
  EXPECT_EQ(sample_value(text, "flashq_inter_token_latency_seconds_bucket{le=\"+Inf\"}"), 5);
}

TEST(BrokerMetrics, SpeculationAddsUpPerPosition) {
  BrokerMetrics metrics;
  metrics.speculation(StepSpeculation{2, 8, 5, {2, 2, 1}});
  metrics.speculation(StepSpeculation{1, 4, 1, {1}});
  const std::string text = metrics.render();
  EXPECT_EQ(sample_value(text, "flashq_spec_decode_num_drafts_total"), 3);
  EXPECT_EQ(sample_value(text, "flashq_spec_decode_num_draft_tokens_total"), 12);
  EXPECT_EQ(sample_value(text, "flashq_spec_decode_num_accepted_tokens_total"), 6);
  EXPECT_EQ(sample_value(text, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), 3);
  EXPECT_EQ(sample_value(text, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"}"), 2);
  EXPECT_EQ(sample_value(text, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"}"), 1);
  EXPECT_TRUE(std::isnan(sample_value(text, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"3\"}")));
}

class BrokerMetricsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http = "127.0.0.1:0";
    options.drain_timeout_ms = 0;
    broker_ = std::make_unique<Broker>(context_, options);
    thread_ = std::thread([this] { broker_->run(stop_); });
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  zmq::socket_t connect(const std::string& endpoint) { return testing::connect_dealer(context_, endpoint); }
  template <typename Message>
  static void send(zmq::socket_t& socket, const Message& message) { testing::send_message(socket, message); }
  template <typename Message>
  static Message expect(zmq::socket_t& socket) {
    std::optional<protocol::WireMessage> message = testing::receive_message(socket, 3s);
    if (!message) throw std::runtime_error("no message arrived");
    return protocol::from_wire<Message>(*message);
  }

  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(BrokerMetricsRun, AKnownRunReadsBackExactly) {
  zmq::socket_t p = connect(broker_->frontend_endpoint());
  protocol::Job job;
  job.id = "m";
  job.prompt = std::string("hello");
  job.stream = true;
  send(p, protocol::Submit{job});
  expect<protocol::Accepted>(p);
  std::this_thread::sleep_for(100ms);  // queued with no worker: at least 0.1 s of queue time
  zmq::socket_t w = connect(broker_->backend_endpoint());
  send(w, protocol::Ready{.worker_id = "w1", .model = "tiny", .slots = 1, .block_size = 4, .backend = "cpu"});
  expect<protocol::Assign>(w);

  // Step 1: a draft of 4, 2 accepted (3 tokens); step 2: a draft of 4, 1 accepted (2 tokens);
  // step 3: a draft of 4, none accepted, and its bonus token was eos (no tokens); step 4: no draft.
  // Each event is awaited at the producer before the next gap starts, so the broker took the
  // step before it (what its clock measures from) before the gap began, however late it ran.
  send(w, protocol::Tokens{.id = "m", .attempt = 1, .seq = 0, .token_ids = {1, 2, 3}, .text = "abc",
                           .spec = StepSpeculation{1, 4, 2, {1, 1}}});
  const protocol::Event e0 = expect<protocol::Event>(p);
  std::this_thread::sleep_for(60ms);
  send(w, protocol::Tokens{.id = "m", .attempt = 1, .seq = 1, .token_ids = {4, 5}, .text = "de",
                           .spec = StepSpeculation{1, 4, 1, {1}}});
  send(w, protocol::Tokens{.id = "m", .attempt = 1, .seq = 2, .spec = StepSpeculation{1, 4, 0, {}}});
  const protocol::Event e1 = expect<protocol::Event>(p);
  std::this_thread::sleep_for(60ms);
  send(w, protocol::Tokens{.id = "m", .attempt = 1, .seq = 3, .token_ids = {6}, .text = "f"});
  send(w, protocol::Final{.id = "m", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kStop}});

  // The step that produced nothing is counted, not streamed: the stream stays gapless.
  const protocol::Event e2 = expect<protocol::Event>(p), e3 = expect<protocol::Event>(p);
  EXPECT_EQ(e0.text + e1.text + e2.text, "abcdef");
  EXPECT_EQ(e2.seq, 2);
  EXPECT_EQ(e3.seq, 3);
  ASSERT_TRUE(e3.final_result);
  EXPECT_EQ(e3.final_result->usage.completion_tokens, 6);

  const std::string m = testing::http_get(broker_->http_port(), "/metrics").body;
  EXPECT_EQ(sample_value(m, "flashq_generation_tokens_total"), 6) << m;
  EXPECT_EQ(sample_value(m, "flashq_spec_decode_num_drafts_total"), 3);
  EXPECT_EQ(sample_value(m, "flashq_spec_decode_num_draft_tokens_total"), 12);
  EXPECT_EQ(sample_value(m, "flashq_spec_decode_num_accepted_tokens_total"), 3);
  EXPECT_EQ(sample_value(m, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), 2);
  EXPECT_EQ(sample_value(m, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"}"), 1);
  EXPECT_EQ(sample_value(m, "flashq_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(sample_value(m, "flashq_time_to_first_token_seconds_sum"), 0.1);
  // Tokens after the first event: 2 + 1, over gaps of at least 60 ms each.
  EXPECT_EQ(sample_value(m, "flashq_inter_token_latency_seconds_count"), 3);
  EXPECT_GE(sample_value(m, "flashq_inter_token_latency_seconds_sum"), 0.12);
  EXPECT_EQ(sample_value(m, "flashq_request_queue_time_seconds_count"), 1);
  EXPECT_GE(sample_value(m, "flashq_request_queue_time_seconds_sum"), 0.1);
  EXPECT_EQ(sample_value(m, "flashq_request_queue_time_seconds_bucket{le=\"0.05\"}"), 0);
  EXPECT_EQ(sample_value(m, "flashq_e2e_request_latency_seconds_count"), 1);
  EXPECT_GE(sample_value(m, "flashq_e2e_request_latency_seconds_sum"), 0.22);
  EXPECT_EQ(sample_value(m, "flashq_jobs_finished_total{finish_reason=\"stop\"}"), 1);
}

}  // namespace
}  // namespace flashq
