// Redis that fails over (docs/redis.md, "Sentinel and failover"): redis+sentinel:// URLs, the
// primary found through real redis-sentinel processes and followed when they promote its replica
// after the primary's SIGKILL, a broker that loses no job across that, --redis-wait-replicas, and
// passwords that stay out of the process list. Every Redis, replica and Sentinel is a real process.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_pipeline.h"
#include "broker/redis/redis_url.h"
#include "shared/error.h"
#include "tests/redis/redis_cluster_fixture.h"
#include "tests/support/redis_sentinel.h"

namespace flashq::testing {
namespace {

// ---- URLs ----

std::string config_error(const std::string& url) {
  try {
    parse_redis_url(url);
  } catch (const Error& e) {
    return e.code() == ErrorCode::kBadConfig ? e.what() : std::string("not kBadConfig: ") + e.what();
  }
  return "(accepted)";
}

TEST(RedisSentinelUrl, NamesSentinelsMasterDatabaseAndPasswords) {
  const RedisUrl url = parse_redis_url("redis+sentinel://app:s3cret@10.0.0.1:26380,sentinel-b,[::1]:26381/queue/4");
  ASSERT_EQ(url.sentinels.size(), 3u);
  EXPECT_EQ(url.sentinels[0], (RedisAddress{"10.0.0.1", 26380}));
  EXPECT_EQ(url.sentinels[1], (RedisAddress{"sentinel-b", 26379})) << "26379 unless given";
  EXPECT_EQ(url.sentinels[2], (RedisAddress{"::1", 26381}));
  EXPECT_EQ(url.master_name, "queue");
  EXPECT_EQ(url.database, 4);
  EXPECT_EQ(url.username, "app");
  EXPECT_EQ(url.password, "s3cret") << "the data nodes' password";
  EXPECT_TRUE(url.sentinel_password.empty());
  EXPECT_TRUE(url.uses_sentinels());

  const RedisUrl minimal = parse_redis_url("redis+sentinel://127.0.0.1:5000/flashq");
  EXPECT_EQ(minimal.master_name, "flashq");
  EXPECT_EQ(minimal.database, 0);
  EXPECT_TRUE(minimal.password.empty());

  const RedisUrl guarded = parse_redis_url("redis+sentinel://:p%40ss@h:1/m/?sentinel_password=s%2Fp");
  EXPECT_EQ(guarded.password, "p@ss") << "percent-encoded, as in any URL";
  EXPECT_EQ(guarded.sentinel_password, "s/p");
  EXPECT_EQ(guarded.describe().find("p@ss"), std::string::npos) << "passwords never reach logs";
  EXPECT_EQ(guarded.describe().find("s/p"), std::string::npos);
  EXPECT_FALSE(parse_redis_url("redis://127.0.0.1:6379").uses_sentinels());
}

TEST(RedisSentinelUrl, BadFormsAreConfigErrorsNamingThePart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"redis+sentinel://h:1", "no master name"},
      {"redis+sentinel://h:1/", "no master name"},
      {"redis+sentinel://h:1//2", "no master name"},
      {"redis+sentinel:///m", "no Sentinel"},
      {"redis+sentinel://h:1,,h:2/m", "empty Sentinel address"},
      {"redis+sentinel://h:x/m", "port 'x'"},
      {"redis+sentinel://h:0/m", "port 0"},
      {"redis+sentinel://h:1/m/db", "database 'db'"},
      {"redis+sentinel://user:@h:1/m", "empty password"},
      {"redis+sentinel://h:1/m?password=x", "parameter 'password=x'"},
      {"redis+sentinel://h:1/m?sentinel_password=", "empty sentinel_password"},
      {"redis+sentinel://:p%4@h:1/m", "password has a '%'"},
      {"redis+sentinel://[::1/m", "never closes"},
      {"sentinel://h:1/m", "expected redis://"},
  };
  for (const auto& [url, part] : cases) {
    const std::string error = config_error(url);
    EXPECT_NE(error.find(part), std::string::npos) << url << " gave: " << error;
  }
}

TEST(RedisSentinelUrl, ToStringGivesTheSameUrlBackWithAnyPassword) {
  for (const char* text : {"redis://127.0.0.1:6379/0", "redis+sentinel://a:1,b:2/m/3", "unix:///run/redis.sock?db=2"}) {
    RedisUrl url = parse_redis_url(text);
    url.username = "app";
    url.password = "p@ss/w:rd?%&=, x";
    if (url.uses_sentinels()) url.sentinel_password = "s@/?&=%";
    const RedisUrl back = parse_redis_url(url.to_string());
    EXPECT_EQ(back.password, url.password) << text;
    EXPECT_EQ(back.username, "app") << text;
    EXPECT_EQ(back.sentinel_password, url.sentinel_password) << text;
    EXPECT_EQ(back.describe(), url.describe()) << text;
  }
}

// ---- A primary, its replica and three Sentinels ----

// A hiredis client that authenticates first when the servers want a password.
std::unique_ptr<RedisClient> client_of(int port, const std::string& password) {
  auto client = std::make_unique<RedisClient>(port);
  if (!password.empty()) client->command({"AUTH", password});
  return client;
}

class SentinelGroup {
 public:
  // `primary` is started already; the replica and the Sentinels live in `dir`.
  SentinelGroup(const std::filesystem::path& dir, RedisServer& primary, SentinelSettings settings)
      : primary_(primary), replica_(dir / "replica"), settings_(std::move(settings)) {
    for (int i = 0; i < 3; ++i) {
      sentinels_.push_back(std::make_unique<SentinelProcess>(dir / ("sentinel-" + std::to_string(i))));
    }
  }

  // The replica (in sync), then the Sentinels, once each knows the replica and the two others:
  // only then can they agree that the primary is down and elect one of them to fail it over.
  ::testing::AssertionResult start() {
    // A replica's first sync would otherwise wait 5 s for others to share the primary's snapshot.
    client_of(primary_.port(), settings_.data_password)->command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
    if (!replica_.start(replica_flags())) return ::testing::AssertionFailure() << "the replica did not start";
    if (!replicated(std::chrono::milliseconds(10000))) {
      return ::testing::AssertionFailure() << "the replica never synced";
    }
    for (auto& sentinel : sentinels_) {
      std::vector<const SentinelProcess*> others;
      for (const auto& other : sentinels_) {
        if (other != sentinel) others.push_back(other.get());
      }
      if (!sentinel->start(primary_.port(), settings_, others, {replica_.port()})) {
        return ::testing::AssertionFailure() << "a Sentinel did not start";
      }
    }
    const bool aware = eventually(
        [&] {
          for (auto& sentinel : sentinels_) {
            if (sentinel->master_field("num-other-sentinels") != 2 || sentinel->master_field("num-slaves") != 1) {
              return false;
            }
          }
          return true;
        },
        std::chrono::milliseconds(15000));
    if (!aware) return ::testing::AssertionFailure() << "the Sentinels never learned of each other and the replica";
    return ::testing::AssertionSuccess();
  }

  // Whether the replica is in sync with the primary within `timeout`. (WAIT on a connection that
  // wrote nothing counts the replicas online; a write's own replication needs WAIT on its connection.)
  bool replicated(std::chrono::milliseconds timeout) {
    auto client = client_of(primary_.port(), settings_.data_password);
    return client->command({"WAIT", "1", std::to_string(timeout.count())}) == std::vector<std::string>{"1"};
  }

  // Holds every write on the primary (CLIENT PAUSE WRITE) until the replica has everything the
  // primary acknowledged, so that a SIGKILL after this loses nothing to replication lag.
  bool hold_writes_until_replicated(std::chrono::milliseconds timeout) {
    auto client = client_of(primary_.port(), settings_.data_password);
    client->command({"CLIENT", "PAUSE", "30000", "WRITE"});
    auto number_after = [](const std::string& text, const std::string& key) -> int64_t {
      const size_t at = text.find(key);
      return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size());
    };
    return eventually(
        [&] {
          const std::vector<std::string> info = client->command({"INFO", "replication"});
          if (info.empty()) return false;
          const int64_t written = number_after(info[0], "master_repl_offset:");
          const size_t replica = info[0].find("slave0:");
          return written >= 0 && replica != std::string::npos &&
                 number_after(info[0].substr(replica), "offset=") == written;
        },
        timeout);
  }

  std::vector<std::string> replica_flags() const {
    std::vector<std::string> flags = {"--replicaof", "127.0.0.1", std::to_string(primary_.port())};
    if (!settings_.data_password.empty()) {
      flags.insert(flags.end(), {"--requirepass", settings_.data_password, "--masterauth", settings_.data_password});
    }
    return flags;
  }

  // redis+sentinel://[credentials@]s0,s1,s2/<master>; `first` goes before them when given.
  std::string url(const std::string& credentials = "", const std::string& first = "") const {
    std::string out = "redis+sentinel://" + (credentials.empty() ? "" : credentials + "@") + first;
    for (size_t i = 0; i < sentinels_.size(); ++i) out += (i || !first.empty() ? "," : "") + sentinels_[i]->address();
    return out + "/" + settings_.master_name;
  }

  // The primary's port as a majority of the Sentinels names it (0 while they disagree).
  int primary_port_now() const {
    std::map<int, int> votes;
    for (const auto& sentinel : sentinels_) {
      if (std::optional<int> port = sentinel->primary_port_now()) ++votes[*port];
    }
    for (const auto& [port, count] : votes) {
      if (count >= 2) return port;
    }
    return 0;
  }

  RedisServer& replica() { return replica_; }

  std::string logs() const {
    std::string out;
    for (const auto& sentinel : sentinels_) out += "---- sentinel " + sentinel->address() + " ----\n" + sentinel->log();
    return out;
  }

 private:
  RedisServer& primary_;
  RedisServer replica_;
  SentinelSettings settings_;
  std::vector<std::unique_ptr<SentinelProcess>> sentinels_;
};

// ---- RedisConnection and RedisPipeline through the Sentinels ----

class SentinelConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(primary_.start()); }
  void TearDown() override {
    if (HasFailure() && group_) std::cerr << group_->logs();
  }

  void start_group(const SentinelSettings& settings = {}) {
    group_ = std::make_unique<SentinelGroup>(dir_.path(), primary_, settings);
    ASSERT_TRUE(group_->start());
  }

  // Connected within `timeout` (a reconnect waits out its backoff).
  static bool connect(RedisConnection& connection, std::chrono::milliseconds timeout) {
    return eventually([&] { return connection.ensure_connected(); }, timeout);
  }

  TempDir dir_;
  RedisServer primary_{dir_.path() / "primary"};
  std::unique_ptr<SentinelGroup> group_;
};

TEST_F(SentinelConnectionTest, FindsThePrimaryByAskingTheSentinelsInTurn) {
  start_group();
  // The first Sentinel named is not there: the next one answers.
  const std::string nobody = "127.0.0.1:" + std::to_string(free_port());
  RedisConnection connection(parse_redis_url(group_->url("", nobody)), std::chrono::milliseconds(500));
  ASSERT_TRUE(connect(connection, std::chrono::milliseconds(5000))) << connection.last_error();
  EXPECT_EQ(connection.node().port, primary_.port());
  EXPECT_EQ(connection.command({"SET", "found", "yes"}).text, "OK");
  EXPECT_EQ(RedisClient(primary_.port()).command({"GET", "found"}), std::vector<std::string>{"yes"});
}

TEST_F(SentinelConnectionTest, SentinelsThatDoNotKnowTheMasterNameAreNoPrimary) {
  start_group();
  const std::string url = group_->url();
  RedisConnection connection(parse_redis_url(url.substr(0, url.rfind('/')) + "/other-name"),
                             std::chrono::milliseconds(500));
  EXPECT_FALSE(connection.ensure_connected());
  EXPECT_NE(connection.last_error().find("no Sentinel names the primary 'other-name'"), std::string::npos)
      << connection.last_error();
}

// A node that answers READONLY (here a replica; in a failover, a demoted primary) is a lost
// connection, not an answer: so the pipeline keeps its writes for the next primary.
TEST_F(SentinelConnectionTest, AReadOnlyReplyCountsAsALostConnection) {
  start_group();
  RedisConnection connection(parse_redis_url(group_->replica().url()), std::chrono::milliseconds(500));
  ASSERT_TRUE(connect(connection, std::chrono::milliseconds(5000)));
  RedisPipeline pipeline;
  int answered = 0;
  pipeline.add({"SET", "kept", "1"}, [&](const RedisReply&) { ++answered; }, RedisPipeline::OnFailure::kRetry);
  EXPECT_FALSE(pipeline.flush(connection));
  EXPECT_FALSE(connection.connected());
  EXPECT_NE(connection.last_error().find("READONLY"), std::string::npos) << connection.last_error();
  EXPECT_EQ(answered, 0) << "the write's handler saw no error: it is kept";
  EXPECT_EQ(pipeline.retained(), 1u);
}

TEST_F(SentinelConnectionTest, FollowsTheFailoverToThePromotedReplicaWithTheWritesKept) {
  start_group();
  RedisConnection connection(parse_redis_url(group_->url()), std::chrono::milliseconds(300));
  ASSERT_TRUE(connect(connection, std::chrono::milliseconds(5000))) << connection.last_error();
  RedisPipeline pipeline;
  pipeline.add({"SET", "before", "1"}, nullptr, RedisPipeline::OnFailure::kRetry);
  ASSERT_TRUE(pipeline.flush(connection));
  ASSERT_TRUE(eventually([&] { return connection.command({"WAIT", "1", "100"}).integer == 1; },
                         std::chrono::milliseconds(5000)))
      << "the replica never had the write";

  primary_.kill();
  const auto killed = Clock::now();
  std::set<std::string> stored;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "kept-" + std::to_string(i);
    pipeline.add(
        {"SET", key, "1"},
        [&stored, key](const RedisReply& reply) {
          if (!reply.is_error()) stored.insert(key);
        },
        RedisPipeline::OnFailure::kRetry);
  }
  EXPECT_FALSE(pipeline.flush(connection)) << "the primary is dead";
  EXPECT_EQ(pipeline.retained(), 20u);
  ASSERT_TRUE(eventually([&] { return connection.ensure_connected() && pipeline.flush(connection); },
                         std::chrono::milliseconds(20000)))
      << connection.last_error();
  const auto reconnected = Clock::now();
  EXPECT_EQ(connection.node().port, group_->replica().port()) << "connected to the promoted replica";
  EXPECT_EQ(stored.size(), 20u) << "every kept write was stored there";
  EXPECT_EQ(connection.command({"GET", "before"}).text, "1") << "what was replicated before is there";
  EXPECT_EQ(connection.command({"GET", "kept-19"}).text, "1");
  std::cout << "reconnected to the promoted replica "
            << std::chrono::duration_cast<std::chrono::milliseconds>(reconnected - killed).count()
            << " ms after the primary's SIGKILL (down-after 1000 ms)\n";
}

// ---- Brokers ----

class SentinelBrokerTest : public RedisClusterTest {
 protected:
  void TearDown() override {
    if (HasFailure() && group_) std::cerr << group_->logs();
    RedisClusterTest::TearDown();
  }

  // redis_ (RedisClusterTest's) is the primary; it is restarted with `data_password` if given.
  void start_group(const SentinelSettings& settings = {}) {
    if (!settings.data_password.empty()) {
      redis_->kill();
      ASSERT_TRUE(redis_->start({"--requirepass", settings.data_password, "--masterauth", settings.data_password}));
    }
    group_ = std::make_unique<SentinelGroup>(scratch_.path() / "group", *redis_, settings);
    ASSERT_TRUE(group_->start());
  }

  std::vector<std::string> broker_flags(const std::string& url) const {
    return {"--redis", url, "--redis-consumer", "a", "--redis-claim-idle-ms", "1500"};
  }

  std::filesystem::path write_file(const std::string& name, const std::string& text) {
    const std::filesystem::path path = scratch_.path() / name;
    std::ofstream(path) << text;
    return path;
  }

  // Submits until ACCEPTED, while the broker answers REJECTED unavailable (no primary yet).
  static ::testing::AssertionResult submit_until_accepted(Client& client, const protocol::Job& job,
                                                          milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    std::string last;
    while (Clock::now() < until) {
      try {
        client.submit(job, 5000);
        return ::testing::AssertionSuccess();
      } catch (const JobRejected& e) {
        if (e.reason() != "unavailable") return ::testing::AssertionFailure() << job.id << ": " << e.what();
        last = e.what();
      } catch (const Error& e) {
        last = e.what();
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    return ::testing::AssertionFailure() << job.id << " never accepted: " << last;
  }

  std::unique_ptr<SentinelGroup> group_;
};

// Jobs running when the primary dies, jobs submitted while no primary answers (refused
// `unavailable`, so submitted again) and jobs after the failover: each ends once, with the text
// the model gives, in the broker's answers and in the promoted replica. The primary dies with
// its replica caught up (writes held, then SIGKILL): what a failover loses to asynchronous
// replication is docs/redis.md's limit, not the broker's to restore; here, the broker's writes
// held at the kill must all reach the promoted replica, none twice.
TEST_F(SentinelBrokerTest, JobsBeforeDuringAndAfterAFailoverFinishExactlyOnce) {
  start_group();
  ASSERT_TRUE(start_broker(broker_flags(group_->url())));
  start_worker("w1", 4);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  constexpr int64_t kTokens = 300;
  const std::vector<std::string> texts = prompts(18);
  const std::vector<Reference> want = references(texts, kTokens);
  auto client = connect_client();
  std::vector<std::string> ids;
  auto submit = [&](size_t i, const std::string& when) {
    ids.push_back(when + "-" + std::to_string(i));
    ASSERT_TRUE(submit_until_accepted(*client, make_job(ids.back(), texts[i], kTokens), milliseconds(20000)));
  };
  for (size_t i = 0; i < 6; ++i) submit(i, "before");
  std::this_thread::sleep_for(milliseconds(100));  // running (4 slots) and queued when the primary dies
  ASSERT_TRUE(group_->hold_writes_until_replicated(milliseconds(10000)));
  redis_->kill();
  const auto killed = Clock::now();
  for (size_t i = 6; i < 12; ++i) submit(i, "during");
  ASSERT_TRUE(eventually([&] { return group_->primary_port_now() == group_->replica().port(); }, milliseconds(20000)))
      << "the Sentinels never promoted the replica";
  for (size_t i = 12; i < 18; ++i) submit(i, "after");
  for (size_t i = 0; i < ids.size(); ++i) expect_matches(wait_job(*client, ids[i], 60000), want[i]);
  std::cout << "all " << ids.size() << " jobs finished "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - killed).count()
            << " ms after the primary's SIGKILL\n";
  RedisClient promoted(group_->replica().port());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_TRUE(matches(read_run(promoted, ids[i]), want[i])) << ids[i];
}

TEST_F(SentinelBrokerTest, WaitReplicasAcceptsWithAReplicaAndRefusesWithoutOne) {
  RedisClient primary(redis_->port());
  primary.command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});  // a replica syncs at once
  RedisServer replica(scratch_.path() / "replica");
  ASSERT_TRUE(replica.start({"--replicaof", "127.0.0.1", std::to_string(redis_->port())}));
  ASSERT_EQ(primary.command({"WAIT", "1", "5000"}), std::vector<std::string>{"1"}) << "the replica never synced";
  std::vector<std::string> flags = redis_flags("a");
  // Long enough for a replica on a loaded machine; the refusal below waits it out.
  flags.insert(flags.end(), {"--redis-wait-replicas", "1", "--redis-wait-timeout-ms", "2000"});
  ASSERT_TRUE(start_broker(flags));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  const Reference want = reference("job 1: the queue hums", 16);
  auto client = connect_client();
  expect_matches(run_job(*client, make_job("replicated", "job 1: the queue hums", 16)), want);

  replica.kill();
  try {
    client->submit(make_job("unreplicated", "job 1: the queue hums", 16), 20000);
    ADD_FAILURE() << "accepted a job no replica acknowledged";
  } catch (const JobRejected& e) {
    EXPECT_EQ(e.reason(), "unavailable") << e.what();
    EXPECT_GT(e.retry_after_ms(), 0) << "a retry hint";
  }
  // Stored on the primary all the same (docs/redis.md says so), but nothing of it is told to
  // anyone, nor run, while no replica has it: its taking waits for the replica too.
  std::this_thread::sleep_for(milliseconds(3000));
  EXPECT_EQ(primary.command({"XLEN", "flashq:out:{unreplicated}"}), std::vector<std::string>{"0"});
  // Once the replica is back it runs, once, and the replica holds it too; a retry with the same
  // id is answered with that one final.
  ASSERT_TRUE(replica.start({"--replicaof", "127.0.0.1", std::to_string(redis_->port())}));
  ASSERT_TRUE(wait_finals({"unreplicated"}, milliseconds(30000)));
  EXPECT_TRUE(matches(read_run(primary, "unreplicated"), want));
  ASSERT_EQ(primary.command({"WAIT", "1", "5000"}), std::vector<std::string>{"1"}) << "the replica never synced";
  RedisClient on_replica(replica.port());
  EXPECT_TRUE(matches(read_run(on_replica, "unreplicated"), want));
  EXPECT_EQ(primary.command({"HGET", "flashq:job:{unreplicated}", "deliveries"}), std::vector<std::string>{"1"})
      << "taken once: its entry was kept claimed while the replica was away";
  const JobRun retried = run_job(*client, make_job("unreplicated", "job 1: the queue hums", 16));
  ASSERT_TRUE(retried.final_result) << retried;
  EXPECT_EQ(retried.finish_reason(), want.finish_reason);
  EXPECT_EQ(read_run(primary, "unreplicated").finals, 1);
}

// docs/redis.md, "Passwords": a file beats the environment, which beats the URL.
TEST_F(SentinelBrokerTest, PasswordFromAFileWinsOverTheEnvironmentAndTheUrl) {
  const std::string password = "p@ss/w:rd %";  // every character a URL would need escaped
  redis_->kill();
  ASSERT_TRUE(redis_->start({"--requirepass", password}));
  const std::string wrong_url = "redis://:wrong@127.0.0.1:" + std::to_string(redis_->port());
  ::setenv("FLASHQ_REDIS_PASSWORD", "also-wrong", 1);
  std::vector<std::string> flags = broker_flags(wrong_url);
  flags.insert(flags.end(), {"--redis-password-file", write_file("redis-password", password + "\n").string()});
  const bool started = start_broker(flags);  // waits until it is connected to Redis
  ::unsetenv("FLASHQ_REDIS_PASSWORD");
  ASSERT_TRUE(started);
  EXPECT_EQ(cluster_->broker().log().find(password), std::string::npos) << "the password is not logged";
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  expect_matches(run_job(*client, make_job("behind-a-password", "job 2: the queue hums", 8)),
                 reference("job 2: the queue hums", 8));
}

TEST_F(SentinelBrokerTest, PasswordFromTheEnvironmentWinsOverTheUrl) {
  redis_->kill();
  ASSERT_TRUE(redis_->start({"--requirepass", "from-env"}));
  ::setenv("FLASHQ_REDIS_PASSWORD", "from-env", 1);
  const bool started = start_broker(broker_flags("redis://:wrong@127.0.0.1:" + std::to_string(redis_->port())));
  ::unsetenv("FLASHQ_REDIS_PASSWORD");
  EXPECT_TRUE(started) << "not connected with the environment's password";
}

TEST_F(SentinelBrokerTest, AWrongPasswordIsNeverConnected) {
  redis_->kill();
  ASSERT_TRUE(redis_->start({"--requirepass", "right"}));
  cluster_->wait_for_redis_on_start = false;
  ASSERT_TRUE(start_broker(broker_flags("redis://127.0.0.1:" + std::to_string(redis_->port()))));
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(cluster_->metric("flashq_redis_connected"), std::optional<double>(0));
}

// Both passwords from files: the data nodes' and the Sentinels' own.
TEST_F(SentinelBrokerTest, FindsThePrimaryThroughSentinelsThatWantAPassword) {
  start_group({.data_password = "data-secret", .own_password = "sentinel-secret"});
  std::vector<std::string> flags = broker_flags(group_->url());
  flags.insert(flags.end(), {"--redis-password-file", write_file("data", "data-secret").string(),
                             "--redis-sentinel-password-file", write_file("sentinel", "sentinel-secret").string()});
  ASSERT_TRUE(start_broker(flags));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  expect_matches(run_job(*client, make_job("guarded", "job 3: the queue hums", 8)),
                 reference("job 3: the queue hums", 8));
  auto primary = client_of(redis_->port(), "data-secret");
  EXPECT_EQ(read_run(*primary, "guarded").finals, 1) << "stored on the primary the Sentinels named";
}

}  // namespace
}  // namespace flashq::testing
