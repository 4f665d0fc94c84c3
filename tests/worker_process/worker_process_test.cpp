// flashq-worker end to end: the test is the broker (a ROUTER on loopback) and runs the real
// executable on a random tiny model. Outputs are checked against the engine run in-process.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "tests/engine/demo_pair.h"
#include "tests/support/temp_dir.h"
#include "tests/worker_process/worker_harness.h"
#include "tools/flashq_model/make_tiny.h"
#include "worker/engine/dflash_proposer.h"
#include "worker/engine/engine.h"
#include "worker/model/dflash_drafter.h"
#include "worker/model/model_registry.h"
#include "worker/serving/generate.h"
#include "worker/text/chat_template.h"

namespace flashq::testing {
namespace {

constexpr int64_t kLongJobTokens = 4000;  // about a second: runs well past a cancel, a lost link or a drain timeout

struct Reference {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish_reason;
};

class WorkerProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    TinyModelSpec spec;
    spec.dtype = DType::kF32;
    spec.seed = 7;
    write_tiny_model(spec, target_dir());
    write_tiny_drafter({.layers = 1, .block_size = 8, .seed = 7}, target_dir(), drafter_dir());
    backend_ = make_cpu_backend().release();
    model_ = load_target_model(target_dir(), *backend_).release();
    tokenizer_ = load_tokenizer(target_dir()).release();
    drafter_ = DFlashDrafter::load(drafter_dir(), *model_, *backend_).release();
  }
  static void TearDownTestSuite() {
    delete drafter_;
    delete tokenizer_;
    delete model_;
    delete backend_;
    delete root_;
  }

  void TearDown() override {
    if (HasFailure() && worker_) std::cerr << "---- flashq-worker log ----\n" << worker_->log() << "----\n";
  }

  static std::filesystem::path target_dir() { return root_->path() / "tiny-target"; }
  static std::filesystem::path drafter_dir() { return root_->path() / "tiny-drafter"; }

  static std::vector<int32_t> some_tokens(size_t count, int32_t vocab, uint32_t seed) {
    std::vector<int32_t> tokens;
    uint64_t state = seed + 1;
    for (size_t i = 0; i < count; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      tokens.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab)));
    }
    return tokens;
  }

  // The engine in this process, target only, greedy: what the worker must stream.
  static Reference reference(const std::vector<int32_t>& prompt, int64_t max_tokens,
                             std::vector<std::string> stop = {}) {
    GenerationRequest request{.prompt_tokens = prompt, .max_tokens = max_tokens};
    request.stop = std::move(stop);
    GenerationResult done = generate(*model_, *tokenizer_, request);
    return {done.tokens, done.text, done.finish_reason};
  }

  // The same job with speculation (`spec: dflash`, the drafter's block size), run in this process:
  // the CPU's passes do not depend on the batch, so the worker must report these counts exactly.
  static SpecStats speculative_reference_stats(const std::vector<int32_t>& prompt, int64_t max_tokens) {
    DFlashProposer proposer(*drafter_);
    Engine engine(*model_, &proposer, {.max_slots = 1});
    SequenceRequest request{.spec = SpecMode::kDflash};
    request.generation.prompt_tokens = prompt;
    request.generation.max_tokens = max_tokens;
    engine.add(0, request);
    engine.run_until_idle();
    return engine.take_finished().at(0).spec_stats;
  }

  // Starts the worker and waits for its READY.
  std::optional<protocol::Ready> start_worker(bool with_drafter, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--broker", broker_.endpoint(), "--model", target_dir().string(), "--id",
                                     "wp-test",  "--device",         "cpu",     "--log-level",         "info"};
    if (std::find(extra.begin(), extra.end(), "--slots") == extra.end()) args.insert(args.end(), {"--slots", "2"});
    if (with_drafter) args.insert(args.end(), {"--drafter", drafter_dir().string()});
    args.insert(args.end(), extra.begin(), extra.end());
    worker_ = std::make_unique<WorkerProcess>(args, scratch_.path() / "worker.log");
    if (!worker_->started()) return std::nullopt;
    return broker_.expect_ready();
  }

  static protocol::Assign assign(const std::string& id, protocol::Prompt prompt, int64_t max_tokens) {
    protocol::Assign a;
    a.job.id = id;
    a.job.prompt = std::move(prompt);
    a.job.max_tokens = max_tokens;
    return a;
  }

  // No TOKENS or FINAL for `id` arrives within `window` (heartbeats and other jobs aside).
  ::testing::AssertionResult stays_quiet(const std::string& id, milliseconds window) {
    const auto until = Clock::now() + window;
    while (Clock::now() < until) {
      auto m = broker_.next_non_heartbeat(std::chrono::duration_cast<milliseconds>(until - Clock::now()));
      if (!m) break;
      if (m->wire.type == protocol::MessageType::kTokens && protocol::from_wire<protocol::Tokens>(m->wire).id == id) {
        return ::testing::AssertionFailure() << "TOKENS for " << id;
      }
      if (m->wire.type == protocol::MessageType::kFinal && protocol::from_wire<protocol::Final>(m->wire).id == id) {
        return ::testing::AssertionFailure() << "FINAL for " << id;
      }
    }
    return ::testing::AssertionSuccess();
  }

  // A prompt whose greedy output does not end early: long jobs for cancel, link and drain tests.
  static const std::vector<int32_t>& long_prompt() {
    static const std::vector<int32_t> prompt = [] {
      for (uint32_t seed = 0; seed < 50; ++seed) {
        std::vector<int32_t> p = some_tokens(6, 300, seed);
        if (reference(p, kLongJobTokens).finish_reason == FinishReason::kLength) return p;
      }
      return std::vector<int32_t>();
    }();
    return prompt;
  }

  static TempDir* root_;
  static Backend* backend_;
  static TargetModel* model_;
  static Tokenizer* tokenizer_;
  static DFlashDrafter* drafter_;

  TempDir scratch_;

  // Three jobs at once ("side-0".."side-2"; the second without speculation, the others auto, or
  // dflash for the third when `dflash_last`), each streamed gap-free and equal to the target alone.
  void expect_side_by_side_jobs_match_the_target(bool dflash_last) {
    const std::vector<std::vector<int32_t>> prompts = {some_tokens(5, 300, 21), some_tokens(9, 300, 22),
                                                       some_tokens(3, 300, 23)};
    std::map<std::string, AttemptOutput> outputs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      protocol::Assign job = assign("side-" + std::to_string(i), prompts[i], 20);
      job.job.spec = i == 1 ? protocol::SpecMode::kOff : protocol::SpecMode::kAuto;
      if (i == 2 && dflash_last) job.job.spec = protocol::SpecMode::kDflash;
      broker_.send(job);
      outputs[job.job.id];
    }
    size_t finals = 0;
    while (finals < prompts.size()) {
      auto m = broker_.next_non_heartbeat(milliseconds(10000));
      ASSERT_TRUE(m) << finals << " FINALs only";
      if (m->wire.type == protocol::MessageType::kTokens) {
        protocol::Tokens t = protocol::from_wire<protocol::Tokens>(m->wire);
        AttemptOutput& out = outputs.at(t.id);
        EXPECT_FALSE(out.final_message) << t.id << ": TOKENS after FINAL";
        EXPECT_EQ(t.seq, static_cast<int64_t>(out.tokens.size())) << t.id;
        out.tokens.push_back(std::move(t));
      } else if (m->wire.type == protocol::MessageType::kFinal) {
        protocol::Final f = protocol::from_wire<protocol::Final>(m->wire);
        EXPECT_FALSE(outputs.at(f.id).final_message) << f.id << ": a second FINAL";
        outputs.at(f.id).final_message = std::move(f);
        ++finals;
      }
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(outputs.at("side-" + std::to_string(i)).ids(), reference(prompts[i], 20).tokens) << "job " << i;
    }
  }

  FakeBroker broker_;
  std::unique_ptr<WorkerProcess> worker_;
};
TempDir* WorkerProcessTest::root_ = nullptr;
Backend* WorkerProcessTest::backend_ = nullptr;
TargetModel* WorkerProcessTest::model_ = nullptr;
Tokenizer* WorkerProcessTest::tokenizer_ = nullptr;
DFlashDrafter* WorkerProcessTest::drafter_ = nullptr;

TEST_F(WorkerProcessTest, RegistersWithReadyNamingModelSlotsBlockSizeAndBackend) {
  std::optional<protocol::Ready> ready = start_worker(true, {"--slots", "3"});
  ASSERT_TRUE(ready) << "no READY";
  EXPECT_EQ(ready->worker_id, "wp-test");
  EXPECT_EQ(ready->model, "tiny-target");
  EXPECT_EQ(ready->slots, 3);
  EXPECT_EQ(ready->block_size, 8);
  EXPECT_EQ(ready->backend, "cpu");
}

TEST_F(WorkerProcessTest, WithoutDrafterReadyAdvertisesBlockSizeZero) {
  std::optional<protocol::Ready> ready = start_worker(false);
  ASSERT_TRUE(ready) << "no READY";
  EXPECT_EQ(ready->block_size, 0);
  EXPECT_EQ(ready->slots, 2);
}

TEST_F(WorkerProcessTest, StreamsGapFreeTokensThenOneFinalEqualToTheEngine) {
  ASSERT_TRUE(start_worker(false));
  const std::string prompt = "the broker hands jobs to workers";
  const Reference want = reference(tokenizer_->encode(prompt), 16);
  broker_.send(assign("job-1", prompt, 16));
  AttemptOutput got = collect_attempt(broker_, "job-1");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.problems.empty()) << describe(got);
  EXPECT_EQ(got.ids(), want.tokens);
  EXPECT_EQ(got.text(), want.text);
  const protocol::FinalResult& r = got.final_message->result;
  EXPECT_EQ(protocol::finish_reason_name(r.finish_reason), finish_reason_name(want.finish_reason));
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.usage.prompt_tokens, static_cast<int64_t>(tokenizer_->encode(prompt).size()));
  EXPECT_EQ(r.usage.completion_tokens, static_cast<int64_t>(want.tokens.size()));
  // Without a drafter nothing is drafted or accepted, and every pass commits one token.
  EXPECT_EQ(r.spec_stats.draft_steps, 0);
  EXPECT_EQ(r.spec_stats.accepted_tokens, 0);
  EXPECT_EQ(r.spec_stats.tau, 1.0);
  // Received, then admitted, then the first token, then the FINAL: each time is at least the one before.
  EXPECT_GE(r.timings.queue_ms, 0);
  EXPECT_LE(r.timings.queue_ms, r.timings.ttft_ms);
  EXPECT_LE(r.timings.ttft_ms, r.timings.total_ms);
  for (const protocol::Tokens& t : got.tokens) EXPECT_FALSE(t.token_ids.empty()) << "seq " << t.seq;
  EXPECT_TRUE(stays_quiet("job-1", milliseconds(300)));
}

TEST_F(WorkerProcessTest, SpeculativeJobMatchesTheTargetAndReportsSpecStats) {
  ASSERT_TRUE(start_worker(true));
  const std::vector<int32_t> prompt = some_tokens(7, 300, 11);
  const Reference want = reference(prompt, 24);
  protocol::Assign job = assign("spec-1", prompt, 24);
  job.job.spec = protocol::SpecMode::kDflash;
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "spec-1");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.problems.empty()) << describe(got);
  EXPECT_EQ(got.ids(), want.tokens);
  const protocol::SpecStats& stats = got.final_message->result.spec_stats;
  const SpecStats want_stats = speculative_reference_stats(prompt, 24);
  EXPECT_GT(stats.draft_steps, 0);
  EXPECT_EQ(stats.draft_steps, want_stats.draft_steps);
  EXPECT_EQ(stats.accepted_tokens, want_stats.accepted_tokens);
  EXPECT_LE(stats.accepted_tokens, stats.draft_steps * (8 - 1)) << "at most block size - 1 per draft";
  EXPECT_GE(stats.tau, 1.0);
  EXPECT_DOUBLE_EQ(stats.tau, want_stats.tau());
  // A pass commits its accepted tokens and one of the target's own: tau exceeds 1 exactly when
  // some draft token was accepted.
  EXPECT_EQ(stats.tau > 1.0, stats.accepted_tokens > 0) << "tau " << stats.tau << ", " << stats.accepted_tokens
                                                        << " accepted";
}

// The demo pair's drafter is one the target accepts: the FINAL counts accepted tokens, as many as
// the same job accepts in this process.
TEST_F(WorkerProcessTest, DemoDrafterGetsTokensAcceptedAndTheFinalCountsThem) {
  const std::string target = std::filesystem::absolute("models/demo/target").string();
  const std::string drafter = std::filesystem::absolute("models/demo/drafter").string();
  worker_ = std::make_unique<WorkerProcess>(
      std::vector<std::string>{"--broker", broker_.endpoint(), "--model", target, "--drafter", drafter, "--id",
                               "wp-demo", "--device", "cpu", "--slots", "1", "--log-level", "info"},
      scratch_.path() / "worker.log");
  ASSERT_TRUE(worker_->started());
  ASSERT_TRUE(broker_.expect_ready()) << "no READY";
  const std::string prompt =
      "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n        ";
  constexpr int64_t kTokens = 48, kBlock = 4;

  DemoPair pair;
  Engine engine(*pair.target, pair.proposer.get(), {.max_slots = 1});
  SequenceRequest request{.spec = SpecMode::kDflash, .block_size = kBlock};
  request.generation = {.prompt_tokens = pair.tokenizer->encode(prompt), .max_tokens = kTokens};
  engine.add(0, request);
  engine.run_until_idle();
  const FinishedSequence want = engine.take_finished().at(0);

  protocol::Assign job = assign("demo", prompt, kTokens);
  job.job.spec = protocol::SpecMode::kDflash;
  job.job.block_size = kBlock;
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "demo");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.problems.empty()) << describe(got);
  EXPECT_EQ(got.ids(), want.tokens);
  const protocol::SpecStats& stats = got.final_message->result.spec_stats;
  EXPECT_GT(stats.accepted_tokens, 0) << "the demo drafter had no token accepted";
  EXPECT_EQ(stats.accepted_tokens, want.spec_stats.accepted_tokens);
  EXPECT_EQ(stats.draft_steps, want.spec_stats.draft_steps);
  EXPECT_LE(stats.accepted_tokens, stats.draft_steps * (kBlock - 1)) << "at most block size - 1 per draft";
  EXPECT_DOUBLE_EQ(stats.tau, want.spec_stats.tau());
  EXPECT_GT(stats.tau, 1.0);
  // Each TOKENS message after the first carries one verify pass's output: its accepted draft
  // tokens and the target's own. Only the last pass may be cut short (at max_tokens), by at most
  // the block's draft tokens.
  int64_t accepted_in_stream = 0;
  for (size_t i = 1; i < got.tokens.size(); ++i) {
    accepted_in_stream += static_cast<int64_t>(got.tokens[i].token_ids.size()) - 1;
  }
  EXPECT_LE(accepted_in_stream, stats.accepted_tokens);
  EXPECT_GE(accepted_in_stream, stats.accepted_tokens - (kBlock - 1));
}

TEST_F(WorkerProcessTest, JobsInSeveralSlotsStreamSideBySideEachGapFree) {
  ASSERT_TRUE(start_worker(true, {"--slots", "3"}));
  expect_side_by_side_jobs_match_the_target(false);
}

// --graphs: the target's passes recorded and replayed (the CPU twin of CUDA graphs here); --pdl
// is for CUDA kernels only and changes nothing here.
TEST_F(WorkerProcessTest, WithGraphsJobsSideBySideStillMatchTheTarget) {
  ASSERT_TRUE(start_worker(true, {"--slots", "3", "--graphs", "--pdl"}));
  expect_side_by_side_jobs_match_the_target(true);
}

TEST_F(WorkerProcessTest, ContinuationStreamsExactlyTheRemainingTokensAndText) {
  ASSERT_TRUE(start_worker(false));
  const std::string prompt = "a queue of jobs, café and 東京";
  const int64_t max_tokens = 12;
  broker_.send(assign("whole", prompt, max_tokens));
  AttemptOutput whole = collect_attempt(broker_, "whole");
  ASSERT_TRUE(whole.final_message) << describe(whole);
  const std::vector<int32_t> all = whole.ids();
  ASSERT_GE(all.size(), 4u) << "the tiny model stopped early; pick another prompt";
  for (const protocol::Tokens& t : whole.tokens)
    ASSERT_EQ(t.token_ids.size(), 1u) << "one token per step without a drafter";

  // A broker re-queues a job whose worker died after k TOKENS: resume with those k tokens and
  // the bytes of text they carried.
  for (size_t k = 1; k < all.size(); ++k) {
    SCOPED_TRACE("resumed after " + std::to_string(k) + " tokens");
    std::string streamed;
    for (size_t i = 0; i < k; ++i) streamed += whole.tokens[i].text;
    protocol::Assign job = assign("resumed-" + std::to_string(k), prompt, max_tokens);
    job.attempt = 2;
    job.resume_tokens.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    job.resume_text_bytes = static_cast<int64_t>(streamed.size());
    broker_.send(job);
    AttemptOutput rest = collect_attempt(broker_, job.job.id, 2);
    ASSERT_TRUE(rest.final_message) << describe(rest);
    EXPECT_TRUE(rest.problems.empty()) << describe(rest);
    EXPECT_EQ(rest.ids(), std::vector<int32_t>(all.begin() + static_cast<std::ptrdiff_t>(k), all.end()));
    EXPECT_EQ(streamed + rest.text(), whole.text());
    EXPECT_EQ(rest.final_message->result.finish_reason, whole.final_message->result.finish_reason);
    // usage is job-level: the job's prompt, and the output of all attempts.
    EXPECT_EQ(rest.final_message->result.usage, whole.final_message->result.usage);
  }
}

TEST_F(WorkerProcessTest, StopStringEndsTheJobAsInTheEngine) {
  ASSERT_TRUE(start_worker(false));
  const std::vector<int32_t> prompt = some_tokens(6, 300, 9);
  const Reference free_run = reference(prompt, 24);
  ASSERT_GE(free_run.text.size(), 8u);
  const std::string stop = free_run.text.substr(free_run.text.size() / 2, 3);  // a piece of what it would say
  const Reference want = reference(prompt, 24, {stop});
  ASSERT_EQ(want.finish_reason, FinishReason::kStop);
  protocol::Assign job = assign("stopping", prompt, 24);
  job.job.stop = {stop};
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "stopping");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_EQ(got.ids(), want.tokens);
  EXPECT_EQ(got.text(), want.text);
  EXPECT_EQ(got.text().find(stop), std::string::npos);
  EXPECT_EQ(got.final_message->result.finish_reason, protocol::FinishReason::kStop);
}

TEST_F(WorkerProcessTest, JobPastItsDeadlineEndsWithDeadline) {
  ASSERT_FALSE(long_prompt().empty());
  ASSERT_TRUE(start_worker(false));
  protocol::Assign job = assign("late", long_prompt(), kLongJobTokens);
  job.job.deadline_ms = 100;
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "late", 1, milliseconds(20000), [](const AttemptOutput&) {});
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.problems.empty()) << describe(got);
  EXPECT_EQ(got.final_message->result.finish_reason, protocol::FinishReason::kDeadline);
  EXPECT_LT(got.ids().size(), static_cast<size_t>(kLongJobTokens));
}

TEST_F(WorkerProcessTest, ResumeTokensThatReachMaxTokensEndWithLengthAtOnce) {
  ASSERT_TRUE(start_worker(false));
  const std::vector<int32_t> prompt = some_tokens(5, 300, 3);
  const Reference want = reference(prompt, 6);
  ASSERT_EQ(want.finish_reason, FinishReason::kLength);
  protocol::Assign job = assign("done-already", prompt, 6);
  job.attempt = 3;
  job.resume_tokens = want.tokens;
  job.resume_text_bytes = static_cast<int64_t>(want.text.size());
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "done-already", 3);
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.tokens.empty()) << describe(got);
  EXPECT_EQ(got.final_message->result.finish_reason, protocol::FinishReason::kLength);
  EXPECT_EQ(got.final_message->result.usage.completion_tokens, 6);
  EXPECT_EQ(got.final_message->result.usage.prompt_tokens, 5);
}

TEST_F(WorkerProcessTest, CancelMidStreamEndsWithFinalCancelled) {
  ASSERT_FALSE(long_prompt().empty());
  ASSERT_TRUE(start_worker(false));
  broker_.send(assign("long", long_prompt(), kLongJobTokens));
  bool cancelled = false;
  AttemptOutput got = collect_attempt(broker_, "long", 1, milliseconds(20000), [&](const AttemptOutput&) {
    if (!cancelled) broker_.send(protocol::Cancel{"long"});
    cancelled = true;
  });
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.problems.empty()) << describe(got);
  EXPECT_EQ(got.final_message->result.finish_reason, protocol::FinishReason::kCancelled);
  EXPECT_LT(got.ids().size(), static_cast<size_t>(kLongJobTokens));
  EXPECT_EQ(got.final_message->result.usage.completion_tokens, static_cast<int64_t>(got.ids().size()));
}

TEST_F(WorkerProcessTest, BadJobsEndWithFinalRejectedAndTheWorkerKeepsServing) {
  ASSERT_TRUE(start_worker(false));
  struct Case {
    std::string name;
    protocol::Assign job;
    std::string error_mentions;
  };
  std::vector<Case> cases;
  cases.push_back({"token-out-of-vocab", assign("bad-token", protocol::TokenIds{5, 100000, 7}, 4), "vocabulary"});
  protocol::Assign other_model = assign("bad-model", "hello", 4);
  other_model.job.model = "qwen3-8b";
  cases.push_back({"unknown-model", other_model, "tiny-target"});
  cases.push_back({"prompt-too-long", assign("bad-length", protocol::TokenIds(5000, 17), 4), "context"});
  cases.push_back(
      {"unknown-chat-role", assign("bad-role", std::vector<protocol::ChatMessage>{{"wizard", "hi"}}, 4), "wizard"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    broker_.send(c.job);
    AttemptOutput got = collect_attempt(broker_, c.job.job.id);
    ASSERT_TRUE(got.final_message) << describe(got);
    EXPECT_TRUE(got.tokens.empty()) << describe(got);
    EXPECT_EQ(got.final_message->result.finish_reason, protocol::FinishReason::kRejected);
    ASSERT_TRUE(got.final_message->result.error);
    EXPECT_NE(got.final_message->result.error->find(c.error_mentions), std::string::npos)
        << *got.final_message->result.error;
  }
  // Still serving: a chat job, formatted with ChatML.
  const std::vector<protocol::ChatMessage> chat = {{"system", "be brief"}, {"user", "hello queue"}};
  const Reference want =
      reference(tokenizer_->encode(format_chatml({{"system", "be brief"}, {"user", "hello queue"}})), 8);
  broker_.send(assign("good-chat", chat, 8));
  AttemptOutput good = collect_attempt(broker_, "good-chat");
  ASSERT_TRUE(good.final_message) << describe(good);
  EXPECT_EQ(good.ids(), want.tokens);
  EXPECT_NE(good.final_message->result.finish_reason, protocol::FinishReason::kError);
}

// --cache-memory-mb: a job whose caches the pool could never hold ends rejected, naming the
// pool, before any token; a job that fits runs as without a pool.
TEST_F(WorkerProcessTest, JobLargerThanTheCachePoolIsRejectedAndOthersRun) {
  // In float32, worker and reference alike: the test model's whole context then outgrows 1 MiB.
  struct Float32Caches {
    explicit Float32Caches(TargetModel& m) : model(m) { model.set_kv_cache_dtype(DType::kF32); }
    ~Float32Caches() { model.set_kv_cache_dtype(DType::kBF16); }
    TargetModel& model;
  } float32_caches(*model_);
  const int64_t context = model_->config().max_position_embeddings;
  ASSERT_GT(model_->make_cache(context).whole_bytes(), int64_t{1} << 20) << "the whole context must not fit 1 MiB";
  ASSERT_TRUE(start_worker(true, {"--cache-memory-mb", "1", "--kv-cache-dtype", "float32"}));
  broker_.send(assign("too-big", protocol::TokenIds{5, 6, 7}, context));
  AttemptOutput big = collect_attempt(broker_, "too-big");
  ASSERT_TRUE(big.final_message) << describe(big);
  EXPECT_TRUE(big.tokens.empty()) << describe(big);
  EXPECT_EQ(big.final_message->result.finish_reason, protocol::FinishReason::kRejected);
  ASSERT_TRUE(big.final_message->result.error);
  EXPECT_NE(big.final_message->result.error->find("cache pool"), std::string::npos) << *big.final_message->result.error;

  const std::vector<int32_t> prompt = some_tokens(6, 300, 4);
  const Reference want = reference(prompt, 12);
  broker_.send(assign("fits", protocol::TokenIds(prompt.begin(), prompt.end()), 12));
  AttemptOutput fits = collect_attempt(broker_, "fits");
  ASSERT_TRUE(fits.final_message) << describe(fits);
  EXPECT_EQ(fits.ids(), want.tokens);
}

TEST_F(WorkerProcessTest, DflashJobOnAWorkerWithoutDrafterRunsTargetOnly) {
  ASSERT_TRUE(start_worker(false));
  protocol::Assign dflash = assign("dflash-no-drafter", "hello", 8);
  dflash.job.spec = protocol::SpecMode::kDflash;
  const Reference want = reference(tokenizer_->encode("hello"), 8);
  broker_.send(dflash);
  AttemptOutput got = collect_attempt(broker_, "dflash-no-drafter");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_EQ(got.ids(), want.tokens);
  EXPECT_EQ(got.final_message->result.spec_stats.draft_steps, 0);
}

TEST_F(WorkerProcessTest, EachStepsTokensCarryItsDraftAndTheySumToTheFinalSpecStats) {
  ASSERT_TRUE(start_worker(true));
  protocol::Assign job = assign("spec-steps", some_tokens(7, 300, 11), 24);
  job.job.spec = protocol::SpecMode::kDflash;
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "spec-steps");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_EQ(got.ids().size(), 24u);
  protocol::StepSpeculation sum;
  for (const protocol::Tokens& t : got.tokens) {
    // The prefill's token, or a last step clamped to one token by max_tokens, had no draft.
    if (!t.spec) {
      EXPECT_EQ(t.token_ids.size(), 1u) << "seq " << t.seq << ": only a step without a draft has no spec";
      continue;
    }
    EXPECT_EQ(t.spec->drafts, 1) << "one TOKENS per engine step";
    EXPECT_GE(t.spec->draft_tokens, 1);
    EXPECT_LE(t.spec->draft_tokens, 7) << "at most block size - 1 drafted tokens";
    // The step's tokens are its accepted draft tokens and the target's bonus (none after an eos).
    EXPECT_LE(static_cast<int64_t>(t.token_ids.size()), t.spec->accepted_tokens + 1);
    sum.drafts += t.spec->drafts;
    sum.draft_tokens += t.spec->draft_tokens;
    sum.accepted_tokens += t.spec->accepted_tokens;
  }
  const protocol::SpecStats& stats = got.final_message->result.spec_stats;
  EXPECT_GT(sum.drafts, 0);
  EXPECT_EQ(sum.drafts, stats.draft_steps);
  EXPECT_EQ(sum.accepted_tokens, stats.accepted_tokens);
}

TEST_F(WorkerProcessTest, TokensOfAJobWithoutSpeculationCarryNoSpec) {
  ASSERT_TRUE(start_worker(true));
  protocol::Assign job = assign("plain", some_tokens(7, 300, 11), 12);
  job.job.spec = protocol::SpecMode::kOff;
  broker_.send(job);
  AttemptOutput got = collect_attempt(broker_, "plain");
  ASSERT_TRUE(got.final_message) << describe(got);
  ASSERT_FALSE(got.tokens.empty());
  for (const protocol::Tokens& t : got.tokens) EXPECT_FALSE(t.spec) << "seq " << t.seq;
}

TEST_F(WorkerProcessTest, HeartbeatsArriveAboutEverySecond) {
  ASSERT_TRUE(start_worker(false));
  broker_.heartbeats().clear();
  const auto until = Clock::now() + milliseconds(3300);
  while (Clock::now() < until) broker_.next(std::chrono::duration_cast<milliseconds>(until - Clock::now()));
  std::vector<FakeBroker::Message>& beats = broker_.heartbeats();
  ASSERT_GE(beats.size(), 3u);
  for (size_t i = 1; i < beats.size(); ++i) {
    const auto gap = std::chrono::duration_cast<milliseconds>(beats[i].at - beats[i - 1].at).count();
    EXPECT_GE(gap, 800);
    EXPECT_LE(gap, 1300);
  }
  EXPECT_EQ(protocol::from_wire<protocol::WorkerHeartbeat>(beats.back().wire).load, 0);
}

TEST_F(WorkerProcessTest, RegistersAgainAfterABrokerRestartAndDropsTheJobsOfTheOldLink) {
  ASSERT_FALSE(long_prompt().empty());
  ASSERT_TRUE(start_worker(false));
  broker_.send(assign("orphan", long_prompt(), kLongJobTokens));
  auto m = broker_.next_non_heartbeat(milliseconds(5000));
  ASSERT_TRUE(m && m->wire.type == protocol::MessageType::kTokens);
  broker_.restart();
  std::optional<protocol::Ready> again = broker_.expect_ready(milliseconds(5000));
  ASSERT_TRUE(again) << "no READY after the restart";
  EXPECT_EQ(again->worker_id, "wp-test");
  // The new broker never hears of the old link's job (the old one re-queues it).
  broker_.send(assign("after-restart", "hello", 4));
  AttemptOutput got = collect_attempt(broker_, "after-restart");
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_NE(got.final_message->result.finish_reason, protocol::FinishReason::kError);
  EXPECT_TRUE(stays_quiet("orphan", milliseconds(300)));
}

TEST_F(WorkerProcessTest, RegistersAgainWhenTheBrokerSaysDisconnect) {
  ASSERT_TRUE(start_worker(false));
  const std::string first = broker_.worker();
  broker_.send(protocol::Disconnect{});
  std::optional<protocol::Ready> again = broker_.expect_ready(milliseconds(5000));
  ASSERT_TRUE(again) << "no READY after DISCONNECT";
  EXPECT_NE(broker_.worker(), first) << "a new DEALER connects";
}

TEST_F(WorkerProcessTest, SilentBrokerCountsAsDeadAndTheJobsOnThatLinkStopQuietly) {
  ASSERT_FALSE(long_prompt().empty());
  ASSERT_TRUE(start_worker(false, {"--heartbeat-ms", "100", "--liveness", "2"}));
  const std::string first = broker_.worker();
  broker_.send(assign("orphan", long_prompt(), kLongJobTokens));
  auto m = broker_.next_non_heartbeat(milliseconds(5000));
  ASSERT_TRUE(m && m->wire.type == protocol::MessageType::kTokens);
  broker_.set_keep_alive(false);
  // Until the worker registers again, the job streams on the old link; it must still be running
  // when the link is given up, or this test shows nothing.
  bool registered_again = false;
  while (auto next = broker_.next(milliseconds(5000))) {
    ASSERT_NE(next->wire.type, protocol::MessageType::kFinal) << "the job ended before the link was lost";
    if (next->wire.type == protocol::MessageType::kReady) {
      registered_again = true;
      break;
    }
  }
  ASSERT_TRUE(registered_again) << "no READY after 2 missed heartbeats";
  EXPECT_NE(broker_.worker(), first) << "a new DEALER connects";
  broker_.set_keep_alive(true);
  EXPECT_TRUE(stays_quiet("orphan", milliseconds(500)));
  // The job was stopped: the worker reports no load.
  broker_.heartbeats().clear();
  const auto until = Clock::now() + milliseconds(1000);
  while (broker_.heartbeats().size() < 2 && Clock::now() < until) broker_.next(milliseconds(100));
  ASSERT_FALSE(broker_.heartbeats().empty());
  EXPECT_EQ(protocol::from_wire<protocol::WorkerHeartbeat>(broker_.heartbeats().back().wire).load, 0);
}

TEST_F(WorkerProcessTest, SigtermLetsTheRunningJobFinishThenDisconnectsAndExitsZero) {
  ASSERT_TRUE(start_worker(false));
  const std::vector<int32_t> prompt = some_tokens(6, 300, 5);
  const Reference want = reference(prompt, 48);
  broker_.send(assign("finishing", prompt, 48));
  bool signalled = false;
  AttemptOutput got = collect_attempt(broker_, "finishing", 1, milliseconds(10000), [&](const AttemptOutput&) {
    if (!signalled) worker_->signal(SIGTERM);
    signalled = true;
  });
  ASSERT_TRUE(got.final_message) << describe(got);
  EXPECT_TRUE(got.problems.empty()) << describe(got);
  EXPECT_EQ(got.ids(), want.tokens);
  EXPECT_EQ(protocol::finish_reason_name(got.final_message->result.finish_reason),
            finish_reason_name(want.finish_reason));
  auto bye = broker_.next_non_heartbeat(milliseconds(5000));
  ASSERT_TRUE(bye) << "no DISCONNECT";
  EXPECT_EQ(bye->wire.type, protocol::MessageType::kDisconnect);
  EXPECT_EQ(worker_->wait_exit(milliseconds(5000)), std::optional<int>(0));
}

TEST_F(WorkerProcessTest, AssignWhileDrainingIsNotStartedAndGoesBackWithDisconnect) {
  ASSERT_FALSE(long_prompt().empty());
  ASSERT_TRUE(start_worker(false, {"--drain-timeout-ms", "1000"}));
  broker_.send(assign("running", long_prompt(), kLongJobTokens));
  auto first = broker_.next_non_heartbeat(milliseconds(5000));
  ASSERT_TRUE(first && first->wire.type == protocol::MessageType::kTokens);
  worker_->signal(SIGTERM);
  std::this_thread::sleep_for(milliseconds(100));
  broker_.send(assign("late", "hello", 4));
  bool disconnected = false;
  while (auto m = broker_.next_non_heartbeat(milliseconds(5000))) {
    if (m->wire.type == protocol::MessageType::kDisconnect) {
      disconnected = true;
      break;
    }
    if (m->wire.type == protocol::MessageType::kTokens) {
      EXPECT_EQ(protocol::from_wire<protocol::Tokens>(m->wire).id, "running");
    }
    if (m->wire.type == protocol::MessageType::kFinal) {
      EXPECT_EQ(protocol::from_wire<protocol::Final>(m->wire).id, "running");
    }
  }
  EXPECT_TRUE(disconnected);
  EXPECT_EQ(worker_->wait_exit(milliseconds(5000)), std::optional<int>(0));
}

// A job still running at the drain timeout is not ended here: no FINAL, so the DISCONNECT hands it
// back and the broker continues it elsewhere (tests/e2e/failure_test.cpp checks the continuation).
TEST_F(WorkerProcessTest, SigtermHandsJobsStillRunningAtTheDrainTimeoutBack) {
  ASSERT_FALSE(long_prompt().empty());
  ASSERT_TRUE(start_worker(false, {"--drain-timeout-ms", "100"}));
  broker_.send(assign("too-long", long_prompt(), kLongJobTokens));
  auto first = broker_.next_non_heartbeat(milliseconds(5000));
  ASSERT_TRUE(first && first->wire.type == protocol::MessageType::kTokens);
  worker_->signal(SIGTERM);
  bool disconnected = false;
  while (auto m = broker_.next_non_heartbeat(milliseconds(5000))) {
    ASSERT_NE(m->wire.type, protocol::MessageType::kFinal) << "the job was ended, not handed back";
    if (m->wire.type == protocol::MessageType::kDisconnect) {
      disconnected = true;
      break;
    }
  }
  EXPECT_TRUE(disconnected) << "no DISCONNECT";
  EXPECT_EQ(worker_->wait_exit(milliseconds(5000)), std::optional<int>(0));
}

}  // namespace
}  // namespace flashq::testing
