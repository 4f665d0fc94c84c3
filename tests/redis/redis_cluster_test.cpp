// Durability on Redis with real processes: flashq-broker(s) with --redis, flashq-workers and a
// redis-server, on free loopback ports. Results are read back from Redis the way a producer with
// only a Redis client would, and checked against the engine run in this process (greedy).
#include <gtest/gtest.h>

#include <random>

#include "tests/e2e/raw_dealer.h"
#include "tests/redis/redis_cluster_fixture.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

TEST_F(RedisClusterTest, ProducerWithOnlyARedisClientGetsEveryResult) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 4);
  start_worker("w2", 4);
  ASSERT_TRUE(cluster_->wait_for_workers(2));
  const std::vector<std::string> texts = prompts(100);
  const std::vector<Reference> want = references(texts, 8);
  RedisClient redis(redis_->port());
  std::vector<std::string> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    ids.push_back("r-" + std::to_string(i));
    xadd_job(redis, ids.back(), texts[i], 8);
  }
  ASSERT_TRUE(wait_finals(ids, milliseconds(120000)));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_TRUE(matches(read_run(redis, ids[i]), want[i])) << ids[i];
  EXPECT_EQ(redis.command({"XLEN", "flashq:jobs"}), std::vector<std::string>{"0"}) << "finished entries are deleted";
  EXPECT_EQ(redis.command({"XPENDING", "flashq:jobs", "flashq"})[0], "0") << "and acknowledged";
  EXPECT_EQ(redis.command({"TTL", "flashq:out:{r-0}"})[0] > "0", true) << "results expire";
}

TEST_F(RedisClusterTest, RedisCliProducerScript) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  // Tests run in the repository root.
  const CommandResult result = run_command("/bin/bash tests/redis/redis_cli_producer.sh " + std::to_string(redis_->port()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST_F(RedisClusterTest, MalformedEntriesAreDeadLettersWithARejectedResult) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  RedisClient redis(redis_->port());
  xadd_job(redis, "bad-1", "x", 0);
  ASSERT_EQ(redis.command({"XADD", "flashq:jobs", "*", "id", "bad-2", "prompt_tokens", "[1,"}).size(), 1u);
  xadd_job(redis, "good-1", "hello world", 4);
  ASSERT_TRUE(wait_finals({"bad-1", "bad-2", "good-1"}, milliseconds(30000)));
  EXPECT_EQ(read_run(redis, "bad-1").finish_reason, "rejected");
  EXPECT_NE(read_run(redis, "bad-2").error.find("prompt_tokens"), std::string::npos);
  EXPECT_TRUE(matches(read_run(redis, "good-1"), reference("hello world", 4)));
  const std::vector<std::string> dead = redis.command({"XRANGE", "flashq:dead", "-", "+"});
  EXPECT_NE(std::find(dead.begin(), dead.end(), "bad-1"), dead.end());
  EXPECT_NE(std::find(dead.begin(), dead.end(), "bad-2"), dead.end());
}

TEST_F(RedisClusterTest, ZeroMqSubmissionsGoThroughRedisAndIdsStayIdempotent) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  const JobRun run = run_job(*client, make_job("z-1", "hello world", 6));
  expect_matches(run, reference("hello world", 6));
  RedisClient redis(redis_->port());
  EXPECT_TRUE(matches(read_run(redis, "z-1"), reference("hello world", 6)));
  // The same id again: accepted, not run again; its final comes back.
  const JobRun again = run_job(*client, make_job("z-1", "hello world", 6));
  ASSERT_TRUE(again.final_result) << again;
  EXPECT_EQ(read_run(redis, "z-1").finals, 1);
  // A restarted broker holds nothing in memory: STATUS and REPLAY are answered from Redis.
  cluster_->broker().kill_now();
  ASSERT_TRUE(start_broker(redis_flags("a")));
  auto fresh = connect_client();
  EXPECT_EQ(fresh->status("z-1", 20000).state, protocol::JobState::kFinished);
  std::vector<protocol::Event> replayed;
  fresh->replay("z-1", 2, [&](const protocol::Event& e) { replayed.push_back(e); }, 20000);
  ASSERT_EQ(replayed.size() + 2, run.events.size());
  for (size_t i = 0; i < replayed.size(); ++i) EXPECT_EQ(replayed[i], run.events[i + 2]) << "seq " << i + 2;
}

TEST_F(RedisClusterTest, RedisRestartMidRunLosesNoJob) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  const std::vector<std::string> texts = prompts(40);
  const std::vector<Reference> want = references(texts, 12);
  std::vector<std::string> ids;
  {
    RedisClient redis(redis_->port());
    for (size_t i = 0; i < texts.size(); ++i) {
      ids.push_back("rr-" + std::to_string(i));
      xadd_job(redis, ids.back(), texts[i], 12);
    }
  }
  std::this_thread::sleep_for(milliseconds(300));  // some run, some finish, most wait in Redis
  redis_->kill();
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_TRUE(redis_->start());
  ASSERT_TRUE(wait_finals(ids, milliseconds(120000)));
  RedisClient redis(redis_->port());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_TRUE(matches(read_run(redis, ids[i]), want[i])) << ids[i];
}

TEST_F(RedisClusterTest, BrokerStartsWhileRedisIsDownAndServesOnceItIsUp) {
  redis_->kill();
  cluster_->wait_for_redis_on_start = false;
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  EXPECT_EQ(cluster_->metric("flashq_redis_connected"), std::optional<double>(0));
  EXPECT_EQ(http_get(cluster_->http_port(), "/readyz").status, 503) << "ready with a worker but no Redis";
  auto client = connect_client();
  try {
    client->submit(make_job("down-1", "hello world", 4), 20000);
    ADD_FAILURE() << "accepted a job it could not store";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unavailable"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(redis_->start());
  EXPECT_TRUE(eventually(
      [&] {
        try {
          client->submit(make_job("down-2", "hello world", 4), 2000);
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      milliseconds(20000)));
  EXPECT_EQ(cluster_->metric("flashq_redis_connected"), std::optional<double>(1));
  EXPECT_EQ(http_get(cluster_->http_port(), "/readyz").status, 200);
  ASSERT_TRUE(wait_finals({"down-2"}, milliseconds(30000)));
}

// The crashing worker is played by hand (a raw DEALER serving model "crashy"): it takes the job
// and dies without a word, as a worker whose kernel faults would; then another one registers.
TEST_F(RedisClusterTest, JobThatAlwaysCrashesItsWorkerEndsInDeadLetters) {
  ASSERT_TRUE(start_broker([&] {
    auto flags = redis_flags("a");
    flags.insert(flags.end(), {"--max-attempts", "3"});
    return flags;
  }()));
  start_worker("steady", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  RedisClient redis(redis_->port());
  xadd_job(redis, "poison", "hello world", 8, {"model", "crashy"});
  const std::vector<std::string> texts = prompts(10);
  const std::vector<Reference> want = references(texts, 8);
  std::vector<std::string> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    ids.push_back("ok-" + std::to_string(i));
    xadd_job(redis, ids.back(), texts[i], 8, {"model", "tiny-target"});
  }
  zmq::context_t context;
  int crashes = 0;
  for (int round = 0; round < 5; ++round) {
    if (redis.command({"HGET", "flashq:job:{poison}", "state"}) == std::vector<std::string>{"finished"}) break;
    RawDealer crashy(context, cluster_->backend());
    crashy.keep_alive(true);
    crashy.send_message(protocol::Ready{.worker_id = "crashy-" + std::to_string(round), .model = "crashy", .slots = 1,
                                        .block_size = 0, .backend = "cpu"});
    const std::optional<protocol::WireMessage> assign = crashy.next(milliseconds(5000));
    if (assign && assign->type == protocol::MessageType::kAssign) ++crashes;
  }  // each one dies here: no FINAL, no more heartbeats
  ASSERT_TRUE(wait_finals({"poison"}, milliseconds(30000)));
  EXPECT_EQ(crashes, 3);
  const StoredRun poison = read_run(redis, "poison");
  EXPECT_EQ(poison.finals, 1);
  EXPECT_EQ(poison.finish_reason, "error");
  const std::vector<std::string> letters = redis.command({"XRANGE", "flashq:dead", "-", "+"});
  EXPECT_NE(std::find(letters.begin(), letters.end(), "poison"), letters.end());
  ASSERT_TRUE(wait_finals(ids, milliseconds(60000)));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_TRUE(matches(read_run(redis, ids[i]), want[i])) << ids[i];
}

// The delivery rules of docs/redis.md under fire: two brokers, three workers, jobs from ZeroMQ
// and Redis producers, some of them turns of sessions; workers SIGKILLed and restarted every
// second or so, one broker SIGKILLed once.
TEST_F(RedisClusterTest, ChaosEveryJobExactlyOnce) {
  Cluster other(scratch_.path());
  ASSERT_TRUE(start_broker(redis_flags("a")));
  ASSERT_TRUE(other.start_broker(redis_flags("b")));
  auto worker_on = [&](const std::string& name) -> ChildProcess& {
    Cluster& home = name == "w3" ? other : *cluster_;
    return home.start_worker(name, target_dir(), drafter_dir(), 1);
  };

  // Long outputs (the tiny model writes thousands of tokens a second), so the kills land mid-stream.
  constexpr int64_t kTokens = 300;
  const std::vector<std::string> texts = prompts(200);
  const std::vector<Reference> want = references(texts, kTokens);
  std::vector<std::string> ids;
  RedisClient redis(redis_->port());
  auto client_a = connect_client();
  Client client_b;
  client_b.connect(other.frontend(), other.stream());
  // Every third job belongs to one of 8 sessions, so jobs are also handed between the brokers
  // (docs/redis.md, "Sessions across brokers") while they die.
  auto session_of = [](size_t i) { return "conv-" + std::to_string(i % 8); };
  for (size_t i = 0; i < texts.size(); ++i) {
    ids.push_back("c-" + std::to_string(i));
    if (i % 2 == 0) {
      if (i % 3 == 0) {
        xadd_job(redis, ids.back(), texts[i], kTokens, {"session", session_of(i)});
      } else {
        xadd_job(redis, ids.back(), texts[i], kTokens);
      }
    } else {
      protocol::Job job = make_job(ids.back(), texts[i], kTokens);
      if (i % 3 == 0) job.session = session_of(i);
      job.stream = false;
      ASSERT_NO_THROW((i % 4 == 1 ? *client_a : client_b).submit(job, 20000)) << ids.back();
    }
  }
  // The workers come once every job is queued (a worker runs a 300-token job in some 15 ms, so
  // jobs would finish while the rest are being submitted), so the kills below land mid-run.
  for (const char* name : {"w1", "w2", "w3"}) worker_on(name);
  ASSERT_TRUE(cluster_->wait_for_workers(2));
  ASSERT_TRUE(other.wait_for_workers(1));
  std::mt19937 random(42);
  // Broker a dies with jobs in flight; b claims its entries once they idle past 1.5 s.
  std::this_thread::sleep_for(milliseconds(300));
  cluster_->broker().kill_now();
  const bool broker_killed = true;
  const auto restart_a = Clock::now() + milliseconds(2500);
  bool a_restarted = false;
  const auto until = Clock::now() + milliseconds(180000);
  size_t finished = 0;
  while (Clock::now() < until && finished < ids.size()) {
    std::this_thread::sleep_for(milliseconds(250));
    const std::string victim = "w" + std::to_string(1 + random() % 3);
    (victim == "w3" ? other : *cluster_).worker(victim).kill_now();
    worker_on(victim);
    if (!a_restarted && Clock::now() > restart_a) {
      a_restarted = true;
      ASSERT_TRUE(start_broker(redis_flags("a")));
    }
    finished = 0;
    for (const std::string& id : ids) {
      finished += redis.command({"HGET", "flashq:job:{" + id + "}", "state"}) == std::vector<std::string>{"finished"};
    }
  }
  EXPECT_TRUE(broker_killed);
  if (finished < ids.size()) {  // what Redis holds of each unfinished job, for the failure message
    auto joined = [](const std::vector<std::string>& words) {
      std::string out;
      for (const std::string& w : words) out += w + " ";
      return out;
    };
    for (const std::string& id : ids) {
      if (redis.command({"HGET", "flashq:job:{" + id + "}", "state"}) == std::vector<std::string>{"finished"}) continue;
      std::cerr << id << ": " << joined(redis.command({"HGETALL", "flashq:job:{" + id + "}"})) << "\n";
    }
    for (const char* stream : {"flashq:jobs", "flashq:jobs:a", "flashq:jobs:b"}) {
      std::cerr << stream << " pending: " << joined(redis.command({"XPENDING", stream, "flashq", "-", "+", "100"}))
                << "\n";
    }
    std::cerr << "brokers: " << joined(redis.command({"SMEMBERS", "flashq:brokers"})) << "\n";
    std::cerr << "alive: " << joined(redis.command({"KEYS", "flashq:broker:*"})) << "\n";
  }
  ASSERT_EQ(finished, ids.size());
  // The failures did land: some jobs were delivered again (a's, claimed by b or by a restarted)
  // and some ran more than one attempt (a worker died under them); and some turns of sessions
  // were handed to the other broker.
  int redelivered = 0, retried = 0, handed = 0;
  for (const std::string& id : ids) {
    const std::vector<std::string> fields =
        redis.command({"HMGET", "flashq:job:{" + id + "}", "deliveries", "attempt", "stream"});
    redelivered += fields.size() == 3 && fields[0] != "(nil)" && std::stoi(fields[0]) > 1;
    retried += fields.size() == 3 && fields[1] != "(nil)" && std::stoi(fields[1]) > 1;
    handed += fields.size() == 3 && fields[2].rfind("flashq:jobs:", 0) == 0;
  }
  EXPECT_GT(redelivered, 0);
  EXPECT_GT(retried, 0);
  EXPECT_GT(handed, 0);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_TRUE(matches(read_run(redis, ids[i]), want[i])) << ids[i];
  if (HasFailure()) std::cerr << other.logs();
}

}  // namespace
}  // namespace flashq::testing
