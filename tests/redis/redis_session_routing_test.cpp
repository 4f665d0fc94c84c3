// Routing by session across brokers (docs/redis.md, "Sessions across brokers"): two real brokers
// on one real Redis, each with real workers. The status hash names the broker that ran a job,
// and that broker's flashq_routing_decisions_total{reason="session"} says it went to the worker
// of the session's previous job. A session's turns run where its first one did whichever broker
// they are submitted to; a turn handed to a broker that then dies runs exactly once on the
// other; a session whose broker died moves to the live one; a handed job's latencies count from
// its original entry; jobs without a session are never handed over.
//
// A turn is made to be taken by the broker that does not own its session (so that it must be
// handed over, not merely may be) by stopping the owner (SIGSTOP) while the other takes it: a
// stopped broker is still alive to the others until its flashq:broker:<name> key expires, one
// claim timeout after its last refresh.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "tests/redis/redis_cluster_fixture.h"

namespace flashq::testing {
namespace {

class RedisSessionRoutingTest : public RedisClusterTest {
 protected:
  void start_two_brokers(int64_t claim_idle_ms, int workers_each = 1) {
    auto flags = [&](const std::string& name) {
      // Beats every 300 ms: a broker stopped for a moment counts its workers lost only after 900 ms
      // of silence from them (and they count it lost after 1 s).
      return std::vector<std::string>{"--redis",
                                      redis_->url(),
                                      "--redis-consumer",
                                      name,
                                      "--redis-claim-idle-ms",
                                      std::to_string(claim_idle_ms),
                                      "--heartbeat-ms",
                                      "300"};
    };
    ASSERT_TRUE(start_broker(flags("a")));
    std::filesystem::create_directories(scratch_.path() / "b");  // its logs apart from a's
    other_ = std::make_unique<Cluster>(scratch_.path() / "b");
    ASSERT_TRUE(other_->start_broker(flags("b")));
    for (int i = 0; i < workers_each; ++i) {
      start_worker("wa" + std::to_string(i), 2);
      other_->start_worker("wb" + std::to_string(i), target_dir(), drafter_dir(), 2);
    }
    ASSERT_TRUE(cluster_->wait_for_workers(workers_each));
    ASSERT_TRUE(other_->wait_for_workers(workers_each));
    client_a_ = connect_client();
    client_b_ = std::make_unique<Client>();
    client_b_->connect(other_->frontend(), other_->stream());
    redis_client_ = std::make_unique<RedisClient>(redis_->port());
    // Both brokers are alive to each other before any turn is taken.
    ASSERT_TRUE(eventually([&] { return field({"EXISTS", "flashq:broker:a"}) == "1"; }, milliseconds(10000)));
    ASSERT_TRUE(eventually([&] { return field({"EXISTS", "flashq:broker:b"}) == "1"; }, milliseconds(10000)));
  }

  void TearDown() override {
    if (HasFailure() && other_) std::cerr << other_->logs();
    RedisClusterTest::TearDown();
  }

  Cluster& broker(const std::string& name) { return name == "a" ? *cluster_ : *other_; }
  Client& client(const std::string& name) { return name == "a" ? *client_a_ : *client_b_; }
  static std::string other(const std::string& name) { return name == "a" ? "b" : "a"; }

  std::string field(const std::vector<std::string>& command) {
    const std::vector<std::string> reply = redis_client_->command(command);
    return reply.empty() ? "" : reply[0];
  }
  // The broker that ran the job (the status hash's owner).
  std::string ran_on(const std::string& id) { return field({"HGET", "flashq:job:{" + id + "}", "owner"}); }

  static protocol::Job turn(const std::string& id, const std::string& session, int index) {
    protocol::Job job = make_job(id, prompt_of(index), kTokens);
    job.session = session;
    return job;
  }
  static std::string prompt_of(int index) { return "turn " + std::to_string(index) + ": the queue hums"; }

  // Submits `job` to broker `to` and waits for its final there; checks it against the reference.
  void run_turn(const std::string& to, const protocol::Job& job) {
    const JobRun run = run_job(client(to), job, 60000);
    expect_matches(run, reference(std::get<std::string>(job.prompt), kTokens));
  }

  // Submits `job` to broker `to` while the other one, `owner`, is stopped: `to` takes it and must
  // hand it over. Returns once it is handed (the owner still stopped); false when it was not.
  bool submit_while_stopped(const std::string& owner, const std::string& to, const protocol::Job& job) {
    return while_stopped(owner, job.id, [&] { client(to).submit(job, 20000); });
  }
  // Runs `submit` (which writes job `id` somewhere) while `owner` is stopped; true once the job is
  // handed to `owner`, which is left stopped.
  template <typename Submit>
  bool while_stopped(const std::string& owner, const std::string& id, Submit submit) {
    broker(owner).broker().signal(SIGSTOP);
    try {
      submit();
    } catch (const Error& e) {
      ADD_FAILURE() << "submit " << id << ": " << e.what();
      return false;
    }
    // Polled closely: the owner's workers count it lost after 1 s of silence.
    const auto until = Clock::now() + milliseconds(5000);
    while (field({"HGET", "flashq:job:{" + id + "}", "stream"}) != "flashq:jobs:" + owner) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(milliseconds(2));
    }
    return true;
  }

  double handovers(const std::string& name) {
    return broker(name).metric("flashq_routing_handovers_total").value_or(-1);
  }
  // Assignments of jobs to workers by broker `name`, all of them or those for one reason.
  double routed(const std::string& name, const std::string& reason = "") {
    const std::string sample =
        reason.empty() ? "flashq_routing_decisions_total" : "flashq_routing_decisions_total{reason=\"" + reason + "\"}";
    return broker(name).metric(sample).value_or(-1);
  }

  static constexpr int64_t kTokens = 8;
  std::unique_ptr<Cluster> other_;
  std::unique_ptr<Client> client_a_, client_b_;
  std::unique_ptr<RedisClient> redis_client_;
};

TEST_F(RedisSessionRoutingTest, TurnsSubmittedToEitherBrokerRunWhereTheSessionsFirstTurnRan) {
  ASSERT_NO_FATAL_FAILURE(start_two_brokers(6000, 2));  // a stopped owner stays alive to the other for at least 4 s
  run_turn("a", turn("conv-0", "conv", 0));
  const std::string owner = ran_on("conv-0");
  ASSERT_TRUE(owner == "a" || owner == "b") << owner;
  EXPECT_EQ(field({"GET", "flashq:session:conv"}), owner);
  int forced = 0;
  for (int i = 1; i < 6; ++i) {
    const std::string id = "conv-" + std::to_string(i);
    const std::string to = i % 2 ? "b" : "a";  // alternately to both brokers
    if (to == owner) {
      run_turn(to, turn(id, "conv", i));  // either broker may take it: it runs on the owner
    } else {
      const bool handed = submit_while_stopped(owner, to, turn(id, "conv", i));
      broker(owner).broker().signal(SIGCONT);
      ASSERT_TRUE(handed) << id << " was not handed to " << owner;
      ++forced;
      const JobRun run = wait_job(client(to), id, 60000);  // relayed by `to` from Redis
      expect_matches(run, reference(prompt_of(i), kTokens));
    }
    EXPECT_EQ(ran_on(id), owner) << id << " submitted to " << to;
    EXPECT_EQ(field({"HGET", "flashq:job:{" + id + "}", "deliveries"}), "1") << id << " ran once";
  }
  EXPECT_GE(forced, 2) << "turns 1 to 5 alternate between the brokers: 2 or 3 go to the one not owning the session";
  EXPECT_GE(handovers(other(owner)), forced);
  EXPECT_EQ(handovers(owner), 0) << "the owner never hands its own session away";
  // Inside the owner, every later turn went to the worker of the turn before: one worker.
  EXPECT_EQ(routed(owner, "session"), 5);
  EXPECT_EQ(routed(owner), 6);
  EXPECT_EQ(routed(other(owner)), 0) << "the other broker assigned none of them";
  EXPECT_EQ(field({"XLEN", "flashq:jobs:" + owner}), "0") << "handed entries are deleted once finished";
  EXPECT_EQ(field({"XPENDING", "flashq:jobs:" + owner, "flashq"}), "0");
}

TEST_F(RedisSessionRoutingTest, ATurnHandedToABrokerThatThenDiesRunsOnceOnTheOther) {
  ASSERT_NO_FATAL_FAILURE(start_two_brokers(3000));
  run_turn("a", turn("died-0", "died", 0));
  const std::string owner = ran_on("died-0");
  const std::string live = other(owner);
  const bool handed = submit_while_stopped(owner, live, turn("died-1", "died", 1));
  broker(owner).broker().kill_now();  // stopped, then killed: it never read the handed entry
  ASSERT_TRUE(handed);
  // The live broker claims it from the dead one's stream once it idles past the claim timeout.
  const JobRun run = wait_job(client(live), "died-1", 60000);
  expect_matches(run, reference(prompt_of(1), kTokens));
  EXPECT_EQ(ran_on("died-1"), live);
  EXPECT_EQ(field({"HGET", "flashq:job:{died-1}", "deliveries"}), "1") << "run exactly once";
  EXPECT_EQ(read_run(*redis_client_, "died-1").finals, 1);
  EXPECT_EQ(field({"XPENDING", "flashq:jobs:" + owner, "flashq"}), "0") << "acknowledged in the dead one's stream";
  EXPECT_EQ(field({"GET", "flashq:session:died"}), live) << "the session moved with it";
  EXPECT_EQ(handovers(live), 1);
}

TEST_F(RedisSessionRoutingTest, ASessionWhoseBrokerDiedMovesToTheLiveOne) {
  ASSERT_NO_FATAL_FAILURE(start_two_brokers(1500));
  run_turn("a", turn("moved-0", "moved", 0));
  const std::string owner = ran_on("moved-0");
  const std::string live = other(owner);
  broker(owner).broker().kill_now();
  ASSERT_TRUE(eventually(
      [&] {
        return field({"EXISTS", "flashq:broker:" + owner}) == "0";
      },
      milliseconds(10000)))
      << "a dead broker stops being alive one claim timeout after its last refresh";
  for (int i = 1; i < 3; ++i) {
    const std::string id = "moved-" + std::to_string(i);
    run_turn(live, turn(id, "moved", i));
    EXPECT_EQ(ran_on(id), live) << id;
  }
  EXPECT_EQ(field({"GET", "flashq:session:moved"}), live);
  EXPECT_EQ(handovers(live), 0) << "nothing is handed to a broker that is not alive";
}

// docs/redis.md: a job's latencies count from its entry's time in flashq:jobs, handed or not.
TEST_F(RedisSessionRoutingTest, AHandedJobsLatenciesCountFromItsOriginalEntry) {
  ASSERT_NO_FATAL_FAILURE(start_two_brokers(6000));
  // a ran the session's last turn (written here, so that the first entry of flashq:jobs may be
  // backdated: a stream's ids only grow).
  redis_client_->command({"SET", "flashq:session:aged", "a", "PX", "60000"});
  const std::string histogram = "flashq_request_queue_time_seconds";
  const double count_before = cluster_->metric(histogram + "_count").value_or(0);
  const double sum_before = cluster_->metric(histogram + "_sum").value_or(0);
  const int64_t now_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string backdated = std::to_string(now_ms - 3000) + "-0";
  const bool handed = while_stopped("a", "aged-1", [&] {
    EXPECT_EQ(redis_client_->command({"XADD", "flashq:jobs", backdated, "id", "aged-1", "prompt", prompt_of(1),
                                      "max_tokens", std::to_string(kTokens), "session", "aged"}),
              std::vector<std::string>{backdated});
  });
  broker("a").broker().signal(SIGCONT);
  ASSERT_TRUE(handed) << "broker b did not hand the job to a";
  ASSERT_TRUE(wait_finals({"aged-1"}, milliseconds(20000)));
  EXPECT_EQ(ran_on("aged-1"), "a");
  EXPECT_TRUE(matches(read_run(*redis_client_, "aged-1"), reference(prompt_of(1), kTokens)));
  ASSERT_TRUE(eventually([&] { return cluster_->metric(histogram + "_count").value_or(0) > count_before; },
                         milliseconds(5000)));
  const double seconds = cluster_->metric(histogram + "_sum").value_or(0) - sum_before;
  EXPECT_GE(seconds, 3.0) << "counted from the original entry's time, not the handover's";
  EXPECT_LT(seconds, 30.0);
}

// Alive is said when it changes, not only with the claims' refresh (every 10 s here): sessions
// are handed to a broker from its first worker on, and no longer once its last one is gone.
TEST_F(RedisSessionRoutingTest, ABrokerIsAliveFromItsFirstWorkerToItsLastOne) {
  ASSERT_TRUE(start_broker({"--redis", redis_->url(), "--redis-consumer", "a", "--redis-claim-idle-ms", "30000"}));
  RedisClient redis(redis_->port());
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(redis.command({"EXISTS", "flashq:broker:a"}), std::vector<std::string>{"0"}) << "no worker yet";
  start_worker("wa", 1);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  EXPECT_TRUE(eventually(
      [&] {
        return redis.command({"EXISTS", "flashq:broker:a"}) == std::vector<std::string>{"1"};
      },
      milliseconds(3000)));
  const std::vector<std::string> ttl = redis.command({"PTTL", "flashq:broker:a"});
  ASSERT_EQ(ttl.size(), 1u);
  EXPECT_GT(std::stoll(ttl[0]), 20000) << "it lives one claim timeout";
  cluster_->worker("wa").kill_now();
  EXPECT_TRUE(eventually(
      [&] {
        return redis.command({"EXISTS", "flashq:broker:a"}) == std::vector<std::string>{"0"};
      },
      milliseconds(5000)))
      << "deleted once the broker counts its last worker lost";
}

TEST_F(RedisSessionRoutingTest, JobsWithoutASessionAreNeverHandedOver) {
  ASSERT_NO_FATAL_FAILURE(start_two_brokers(1500));
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    ids.push_back("plain-" + std::to_string(i));
    ASSERT_NO_THROW(client(i % 2 ? "b" : "a").submit(make_job(ids.back(), prompt_of(i), kTokens), 20000));
  }
  for (int i = 0; i < 12; ++i) {
    const JobRun run = wait_job(client(i % 2 ? "b" : "a"), ids[i], 60000);
    expect_matches(run, reference(prompt_of(i), kTokens));
    EXPECT_EQ(field({"HGET", "flashq:job:{" + ids[i] + "}", "stream"}), "flashq:jobs") << ids[i];
  }
  EXPECT_EQ(handovers("a"), 0);
  EXPECT_EQ(handovers("b"), 0);
  EXPECT_EQ(redis_client_->command({"KEYS", "flashq:session:*"}), std::vector<std::string>{});
}

}  // namespace
}  // namespace flashq::testing
