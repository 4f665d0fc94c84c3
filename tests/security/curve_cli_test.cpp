// The executables with CURVE: `flashq keygen`, the key flags of flashq-broker, `flashq submit` and
// `flashq status`, and flashq-worker, against a CURVE broker in this process.
#include <sys/stat.h>

#include <future>
#include <regex>

#include "client/flashq_client.h"
#include "tests/security/curve_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"
#include "tools/flashq_model/make_tiny.h"

namespace flashq::testing {
namespace {

mode_t file_mode(const std::filesystem::path& path) {
  struct stat info {};
  ::stat(path.c_str(), &info);
  return info.st_mode & 0777;
}

// A key on a shell command line: Z85 has no single quote.
std::string shell_quoted(const std::string& key) { return "'" + key + "'"; }

std::string first_line(const std::filesystem::path& path) {
  std::string text = read_text_file(path);
  return text.substr(0, text.find('\n'));
}

TEST(KeygenCommand, PrintsAConsistentPair) {
  CommandResult r = run_command(bin_path("flashq") + " keygen");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch match;
  ASSERT_TRUE(std::regex_match(r.output, match, std::regex("public: (\\S{40})\nsecret: (\\S{40})\n"))) << r.output;
  EXPECT_EQ(curve_public_key_of(match[2]), match[1]);
  EXPECT_NE(run_command(bin_path("flashq") + " keygen").output, r.output) << "two runs, one pair";
}

TEST(KeygenCommand, OutWritesThePairWithThePrivateKeyOwnerOnly) {
  TempDir dir;
  const std::filesystem::path prefix = dir / "broker";
  CommandResult r = run_command("umask 000 && " + bin_path("flashq") + " keygen --out " + prefix.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string secret_key = first_line(dir / "broker.key"), public_key = first_line(dir / "broker.pub");
  EXPECT_EQ(file_mode(dir / "broker.key"), 0600u);
  EXPECT_EQ(file_mode(dir / "broker.pub"), 0644u);
  EXPECT_EQ(curve_public_key_of(secret_key), public_key);
  EXPECT_EQ(r.output, "public: " + public_key + "\nsecret_file: " + prefix.string() +
                          ".key\npublic_file: " + prefix.string() + ".pub\n");
  EXPECT_EQ(r.output.find(secret_key), std::string::npos) << "the secret is not printed when written";
  // The files are what the key flags take.
  EXPECT_EQ(load_curve_key((dir / "broker.key").string(), "--curve-secret-key"), secret_key);
}

TEST(KeygenCommand, OutNeverOverwritesAKey) {
  TempDir dir;
  const std::string prefix = (dir / "w").string();
  ASSERT_EQ(run_command(bin_path("flashq") + " keygen --out " + prefix).exit_code, 0);
  const std::string before = read_text_file(dir / "w.key");
  CommandResult again = run_command(bin_path("flashq") + " keygen --out " + prefix);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("exists"), std::string::npos) << again.output;
  EXPECT_EQ(read_text_file(dir / "w.key"), before);
}

class CurveCli : public CurveBrokerFixture {
 protected:
  void SetUp() override {
    CurveBrokerFixture::SetUp();
    if (IsSkipped()) return;
    write_text_file(dir_ / "broker.pub", broker_keys_.public_key + "\n");
    write_text_file(dir_ / "producer.key", producer_keys_.secret_key + "\n");
    write_text_file(dir_ / "worker.key", worker_keys_.secret_key + "\n");
    start_broker();
  }
  std::string endpoints() const {
    return " --broker " + broker_->frontend_endpoint() + " --stream-endpoint " + broker_->stream_endpoint();
  }
  std::string producer_keys() const {
    return " --curve-server-key " + (dir_ / "broker.pub").string() + " --curve-secret-key " +
           (dir_ / "producer.key").string();
  }
};

TEST_F(CurveCli, BrokerWithASecretKeyButNoAllowListExitsTwo) {
  CommandResult r = run_command("timeout 20 " + bin_path("flashq-broker") + " --http '' --curve-secret-key " +
                                shell_quoted(broker_keys_.secret_key) +
                                " --frontend tcp://127.0.0.1:0 --backend tcp://127.0.0.1:0"
                                " --stream tcp://127.0.0.1:0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--curve-allowed-keys"), std::string::npos) << r.output;
}

TEST_F(CurveCli, JobCommandsWithKeysWork) {
  zmq::socket_t w = worker("w1", keys_for(worker_keys_));
  auto submit = std::async(std::launch::async, [&] {
    return run_command(bin_path("flashq") + " submit --id c1 --prompt hi --wait-timeout-ms 10000" + endpoints() +
                       producer_keys());
  });
  EXPECT_TRUE(serve_one_job(w)) << "no ASSIGN";
  CommandResult r = submit.get();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "ok\n");
  CommandResult status = run_command(bin_path("flashq") + " status c1" + endpoints() + producer_keys());
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("\"finished\""), std::string::npos) << status.output;
  CommandResult stream = run_command(bin_path("flashq") + " stream c1" + endpoints() + producer_keys());
  EXPECT_EQ(stream.exit_code, 0) << stream.output;
  EXPECT_EQ(stream.output, "ok\n");
  CommandResult cancel = run_command(bin_path("flashq") + " cancel c1" + endpoints() + producer_keys());
  EXPECT_EQ(cancel.exit_code, 0) << cancel.output;
}

TEST_F(CurveCli, SubmitWithoutKeysGetsNoAnswer) {
  CommandResult r = run_command(bin_path("flashq") + " submit --id c2 --prompt hi --timeout-ms 800" + endpoints());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no answer to SUBMIT c2"), std::string::npos) << r.output;
  EXPECT_TRUE(has_metric(broker_->metrics().render(), "flashq_jobs_admitted_total", "0"));
}

TEST_F(CurveCli, OneKeyFlagWithoutTheOtherExitsTwo) {
  CommandResult r = run_command(bin_path("flashq") + " status c3 --curve-server-key " +
                                shell_quoted(broker_keys_.public_key) + endpoints());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--curve-secret-key"), std::string::npos) << r.output;
}

// The real flashq-worker on a tiny random model: registers and runs a job with its key, and is
// never heard of without one or with a key not on the allow-list (which it reports).
TEST_F(CurveCli, WorkerRegistersOnlyWithItsKey) {
  write_tiny_model(TinyModelSpec{.seed = 5}, dir_ / "tiny");
  const std::vector<std::string> common = {
      "--broker", broker_->backend_endpoint(), "--model", (dir_ / "tiny").string(), "--heartbeat-ms", "200"};
  std::vector<std::string> plain_args = common;
  plain_args.insert(plain_args.end(), {"--id", "plain"});
  ChildProcess plain("flashq-worker", plain_args, dir_ / "plain.log");
  write_text_file(dir_ / "stranger.key", stranger_keys_.secret_key);
  std::vector<std::string> stranger_args = common;
  stranger_args.insert(stranger_args.end(), {"--id", "stranger", "--curve-server-key", broker_keys_.public_key,
                                             "--curve-secret-key", (dir_ / "stranger.key").string()});
  ChildProcess stranger("flashq-worker", stranger_args, dir_ / "stranger.log");
  std::vector<std::string> keyed_args = common;
  keyed_args.insert(keyed_args.end(), {"--id", "keyed", "--curve-server-key", broker_keys_.public_key,
                                       "--curve-secret-key", (dir_ / "worker.key").string()});

  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(plain.running()) << plain.log();
  EXPECT_TRUE(stranger.running()) << stranger.log();
  EXPECT_EQ(broker_->metrics().workers(), 0) << "a worker without an allowed key registered";
  EXPECT_NE(stranger.log().find("the broker refused our CURVE key"), std::string::npos) << stranger.log();

  ChildProcess keyed("flashq-worker", keyed_args, dir_ / "keyed.log");
  Client client;
  client.connect(broker_->frontend_endpoint(), broker_->stream_endpoint(), keys_for(producer_keys_));
  EXPECT_EQ(client.submit(job("w")), "w");
  const protocol::FinalResult result = client.wait(
      "w", [](const protocol::Event&) {}, 20000);
  // A random model may well end with its end-of-sequence token before max_tokens.
  EXPECT_TRUE(result.finish_reason == protocol::FinishReason::kLength ||
              result.finish_reason == protocol::FinishReason::kStop)
      << protocol::finish_reason_name(result.finish_reason) << "\n"
      << keyed.log();
  // The gauge follows on the broker's next timer tick.
  for (int i = 0; i < 100 && broker_->metrics().workers() != 1; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(broker_->metrics().workers(), 1);
}

}  // namespace
}  // namespace flashq::testing
