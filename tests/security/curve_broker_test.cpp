// CurveZMQ on every broker socket (docs/security.md): peers with an allowed key and the broker's
// public key get everything through; a peer without CURVE, with a key not on the allow-list, or
// with the wrong server key gets nothing through, on any of the three sockets.

#include "client/flashq_client.h"
#include "tests/security/curve_fixture.h"
#include "tests/support/http_get.h"

namespace flashq::testing {
namespace {

// How long a refused peer is given to get something through; a handshake on loopback takes ~1 ms.
constexpr int kRefusedTimeoutMs = 1000;

class CurveBroker : public CurveBrokerFixture {
 protected:
  void SetUp() override {
    CurveBrokerFixture::SetUp();
    if (!IsSkipped()) start_broker();
  }

  // What a producer with these keys gets for a SUBMIT: the accepted id, or the error it ended with.
  std::string submit_as(const std::optional<CurveClientKeys>& keys, const std::string& id) {
    Client client;
    client.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys);
    try {
      return "accepted " + client.submit(job(id), kRefusedTimeoutMs);
    } catch (const Error& e) {
      return std::string(error_code_name(e.code())) + ": " + e.what();
    }
  }

  void expect_refused(const std::optional<CurveClientKeys>& keys) {
    const std::string outcome = submit_as(keys, "j1");
    // Either the SUBMIT went out and nothing came back, or (the handshake failed before the
    // socket would queue it) it never went out: an io error either way, never an answer.
    const bool no_answer = outcome.rfind("io: no answer to SUBMIT j1", 0) == 0;
    const bool not_sent = outcome.rfind("io: cannot send to ", 0) == 0;
    EXPECT_TRUE(no_answer || not_sent) << outcome;
    EXPECT_TRUE(has_metric(broker_->metrics().render(), "flashq_jobs_admitted_total", "0"));
    // The producer's own view is no proof; ask the broker, as an allowed producer.
    Client allowed;
    allowed.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys_for(producer_keys_));
    EXPECT_EQ(allowed.status("j1").state, protocol::JobState::kUnknown);
  }
};

TEST_F(CurveBroker, AllowedPeersSubmitRunAndStreamAJob) {
  zmq::socket_t w = worker("w1", keys_for(worker_keys_));
  zmq::socket_t sub = subscriber("a", keys_for(producer_keys_));
  std::this_thread::sleep_for(300ms);  // the subscription reaches the broker

  Client client;
  client.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys_for(producer_keys_));
  EXPECT_EQ(client.submit(job("a")), "a");
  std::optional<protocol::Assign> assign = serve_one_job(w);
  ASSERT_TRUE(assign) << "the allowed worker got no ASSIGN";
  EXPECT_EQ(assign->job.id, "a");

  std::string text;
  const protocol::FinalResult result = client.wait(
      "a", [&](const protocol::Event& e) { text += e.text; }, 5000);
  EXPECT_EQ(result.finish_reason, protocol::FinishReason::kLength);
  EXPECT_EQ(text, "ok");

  std::vector<std::vector<std::string>> published = drain(sub, 500ms);
  ASSERT_EQ(published.size(), 2u) << "the allowed subscriber sees both events";
  EXPECT_EQ(published[0][0], protocol::stream_topic("a"));
  EXPECT_TRUE(has_metric(broker_->metrics().render(), "flashq_jobs_admitted_total", "1"));
}

TEST_F(CurveBroker, ClientWithoutCurveGetsNothingThrough) { expect_refused(std::nullopt); }

TEST_F(CurveBroker, ClientWithAKeyNotOnTheAllowListGetsNothingThrough) { expect_refused(keys_for(stranger_keys_)); }

TEST_F(CurveBroker, ClientWithTheWrongServerKeyGetsNothingThrough) {
  expect_refused(CurveClientKeys{stranger_keys_.public_key, producer_keys_});
}

TEST_F(CurveBroker, WorkerWithoutAnAllowedKeyIsNeverDispatchedTo) {
  zmq::socket_t plain = worker("plain", std::nullopt);
  zmq::socket_t stranger = worker("stranger", keys_for(stranger_keys_));
  zmq::socket_t wrong_server = worker("wrong-server", CurveClientKeys{stranger_keys_.public_key, worker_keys_});
  Client client;
  client.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys_for(producer_keys_));
  EXPECT_EQ(client.submit(job("q")), "q");

  for (zmq::socket_t* refused : {&plain, &stranger, &wrong_server}) {
    EXPECT_TRUE(drain(*refused, std::chrono::milliseconds(kRefusedTimeoutMs / 2)).empty())
        << "a refused worker heard from the broker";
  }
  EXPECT_EQ(client.status("q").state, protocol::JobState::kQueued);
  EXPECT_EQ(broker_->metrics().workers(), 0);

  zmq::socket_t allowed = worker("allowed", keys_for(worker_keys_));
  std::optional<protocol::Assign> assign = serve_one_job(allowed);
  ASSERT_TRUE(assign) << "the allowed worker got no ASSIGN";
  EXPECT_EQ(assign->job.id, "q");
}

TEST_F(CurveBroker, SubscriberWithoutTheKeyReceivesNothing) {
  zmq::socket_t plain = subscriber("s", std::nullopt);
  zmq::socket_t stranger = subscriber("s", keys_for(stranger_keys_));
  zmq::socket_t allowed = subscriber("s", keys_for(producer_keys_));
  // The library's subscriber too.
  StreamSubscriber library_stranger(broker_->stream_endpoint(), "s", keys_for(stranger_keys_));
  StreamSubscriber library_allowed(broker_->stream_endpoint(), "s", keys_for(producer_keys_));
  zmq::socket_t w = worker("w1", keys_for(worker_keys_));
  std::this_thread::sleep_for(300ms);  // the subscriptions reach the broker

  Client client;
  client.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys_for(producer_keys_));
  client.submit(job("s"));
  ASSERT_TRUE(serve_one_job(w));
  EXPECT_EQ(drain(allowed, 500ms).size(), 2u) << "the allowed subscriber sees both events";
  std::optional<protocol::Event> first = library_allowed.next(1000);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->seq, 0);
  EXPECT_TRUE(drain(plain, 200ms).empty());
  EXPECT_TRUE(drain(stranger, 200ms).empty());
  EXPECT_FALSE(library_stranger.next(200));
}

TEST_F(CurveBroker, HttpMetricsNeedNoKey) {
  const HttpResponse metrics = http_get(broker_->http_port(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_TRUE(has_metric(metrics.body, "flashq_jobs_admitted_total", "0"));
}

TEST_F(CurveBroker, StoppedBrokerReleasesTheZapEndpoint) {
  stop_broker();
  start_broker();  // a second ZAP handler binds in the same context only if the first let go
  Client client;
  client.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys_for(producer_keys_));
  EXPECT_EQ(client.submit(job("again")), "again");
}

class CurveBrokerOptions : public CurveBrokerFixture {
 protected:
  // The error code constructing a broker with these options throws, if any.
  std::optional<ErrorCode> construct_error(const std::string& secret_key, const std::string& allowed_keys) {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http.clear();
    options.curve_secret_key = secret_key;
    options.curve_allowed_keys = allowed_keys;
    try {
      Broker broker(context_, options);
    } catch (const Error& e) {
      return e.code();
    }
    return std::nullopt;
  }
};

TEST_F(CurveBrokerOptions, SecretKeyWithoutAllowListIsRefused) {
  EXPECT_EQ(construct_error(broker_keys_.secret_key, ""), ErrorCode::kInvalidArgument);
}

TEST_F(CurveBrokerOptions, AllowListWithoutSecretKeyIsRefused) {
  EXPECT_EQ(construct_error("", allow_list_path().string()), ErrorCode::kInvalidArgument);
}

TEST_F(CurveBrokerOptions, BadKeysAndListsAreTypedErrors) {
  EXPECT_EQ(construct_error("not-a-key", allow_list_path().string()), ErrorCode::kNotFound);
  EXPECT_EQ(construct_error(broker_keys_.secret_key, (dir_ / "missing").string()), ErrorCode::kNotFound);
  write_text_file(dir_ / "bad_list", "not a key\n");
  EXPECT_EQ(construct_error(broker_keys_.secret_key, (dir_ / "bad_list").string()), ErrorCode::kBadConfig);
  // Refused before anything was bound: the ZAP endpoint is free for a good configuration.
  EXPECT_EQ(construct_error(broker_keys_.secret_key, allow_list_path().string()), std::nullopt);
}

}  // namespace
}  // namespace flashq::testing
