// The fixture of the end-to-end tests: a random tiny float32 target and DFlash drafter written
// once per test binary, the same model loaded in this process to compute what every job must
// produce (greedy, target only), and per test a Cluster of real processes on loopback.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/flashq_client.h"
#include "kernels/backend.h"
#include "shared/protocol/stream.h"
#include "tests/e2e/e2e_cluster.h"
#include "tests/e2e/stream_collector.h"
#include "tests/support/temp_dir.h"
#include "tools/flashq_model/make_tiny.h"
#include "worker/engine/engine.h"
#include "worker/model/model_registry.h"
#include "worker/text/text_stream.h"
#include "worker/text/tokenizer.h"

namespace flashq::testing {

// What a job must produce: the engine in this process, greedy, target only.
struct Reference {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish_reason;
};

// One job as its producer saw it (stream: true, so every event arrives on the producer's socket).
struct JobRun {
  std::string id;
  std::vector<protocol::Event> events;
  std::optional<protocol::FinalResult> final_result;
  std::string error;  // what wait() threw, if it did

  std::vector<int32_t> ids() const { return ids_of(events); }
  std::string text() const { return text_of(events); }
  std::string finish_reason() const {
    return final_result ? std::string(protocol::finish_reason_name(final_result->finish_reason)) : "(none)";
  }

  static std::vector<int32_t> ids_of(const std::vector<protocol::Event>& events) {
    std::vector<int32_t> out;
    for (const protocol::Event& e : events) out.insert(out.end(), e.token_ids.begin(), e.token_ids.end());
    return out;
  }
  static std::string text_of(const std::vector<protocol::Event>& events) {
    std::string out;
    for (const protocol::Event& e : events) out += e.text;
    return out;
  }
};

inline std::ostream& operator<<(std::ostream& out, const JobRun& run) {
  out << "job " << run.id << ": " << run.events.size() << " events, finish " << run.finish_reason();
  if (run.final_result && run.final_result->error) out << " (" << *run.final_result->error << ")";
  if (!run.error.empty()) out << ", wait failed: " << run.error;
  return out;
}

// seq 0, 1, 2, ... without gaps or repeats, exactly one event with `final`, and it is the last.
inline ::testing::AssertionResult is_complete_stream(const std::vector<protocol::Event>& events) {
  if (events.empty()) return ::testing::AssertionFailure() << "no events";
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].seq != static_cast<int64_t>(i)) {
      return ::testing::AssertionFailure() << "event " << i << " has seq " << events[i].seq;
    }
    if (events[i].final_result && i + 1 != events.size()) {
      return ::testing::AssertionFailure() << "a final event at seq " << i << " of " << events.size();
    }
  }
  if (!events.back().final_result) {
    return ::testing::AssertionFailure() << "no final event after seq " << events.back().seq;
  }
  return ::testing::AssertionSuccess();
}

class E2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One OpenMP thread here too: on a loaded two-core machine, a second thread that is not
    // scheduled holds every barrier (references took seconds instead of a tenth of one).
    omp_set_num_threads(1);
    root_ = new TempDir();
    TinyModelSpec spec;
    spec.dtype = DType::kF32;
    spec.seed = 7;
    write_tiny_model(spec, target_dir());
    write_tiny_drafter({.layers = 1, .block_size = 8, .seed = 7}, target_dir(), drafter_dir());
    backend_ = make_cpu_backend().release();
    model_ = load_target_model(target_dir(), *backend_).release();
    tokenizer_ = load_tokenizer(target_dir()).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    delete backend_;
    delete root_;
    references_.clear();
  }

  void SetUp() override { cluster_ = std::make_unique<Cluster>(scratch_.path()); }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->logs();
    cluster_.reset();  // every child process is killed here
  }

  static std::filesystem::path target_dir() { return root_->path() / "tiny-target"; }
  static std::filesystem::path drafter_dir() { return root_->path() / "tiny-drafter"; }

  // References for several prompts at once, batched in one engine (its outputs do not depend on
  // the batch: docs/decisions.md, "Batch invariance"). Cached.
  static std::vector<Reference> references(const std::vector<std::string>& prompts, int64_t max_tokens) {
    Engine engine(*model_, nullptr, {.max_slots = 8});
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (references_.count({prompts[i], max_tokens})) continue;
      SequenceRequest request{.spec = SpecMode::kOff};
      request.generation.prompt_tokens = tokenizer_->encode(prompts[i]);
      request.generation.max_tokens = max_tokens;
      engine.add(i, request);
    }
    engine.run_until_idle();
    for (FinishedSequence& done : engine.take_finished()) {
      TextStream text(*tokenizer_, {});  // the text as a worker streams it
      std::string streamed = text.push(done.tokens).text;
      streamed += text.finish().text;
      references_[{prompts[done.id], max_tokens}] = {done.tokens, streamed,
                                                     std::string(finish_reason_name(done.finish_reason))};
    }
    std::vector<Reference> out;
    for (const std::string& p : prompts) out.push_back(references_.at({p, max_tokens}));
    return out;
  }
  static Reference reference(const std::string& prompt, int64_t max_tokens) {
    return references({prompt}, max_tokens).at(0);
  }

  // A prompt whose greedy output runs to `max_tokens` without an end-of-sequence: a job that is
  // still running when the test cancels it or its deadline passes.
  static std::string long_prompt(int64_t max_tokens = 400) {
    for (const char* p : {"Once upon a time", "The queue hums along", "hello world", "Tell me about brokers",
                          "A long story", "def main():", "In the beginning", "Lorem ipsum dolor"}) {
      if (reference(p, max_tokens).finish_reason == "length") return p;
    }
    return "";
  }

  bool start_broker(const std::vector<std::string>& extra = {}) { return cluster_->start_broker(extra); }
  ChildProcess& start_worker(const std::string& name, int slots, const std::vector<std::string>& extra = {}) {
    return cluster_->start_worker(name, target_dir(), drafter_dir(), slots, extra);
  }

  std::unique_ptr<Client> connect_client() {
    auto client = std::make_unique<Client>();
    client->connect(cluster_->frontend(), cluster_->stream());
    return client;
  }

  static protocol::Job make_job(const std::string& id, const std::string& prompt, int64_t max_tokens) {
    protocol::Job job;
    job.id = id;
    job.prompt = prompt;
    job.max_tokens = max_tokens;
    job.temperature = 0;
    job.stream = true;
    return job;
  }

  // Milliseconds left until `until` (at least 1: a wait of 0 would have no end), so that a batch of
  // waits shares one bound.
  static int ms_until(Clock::time_point until) {
    return static_cast<int>(
        std::max<int64_t>(1, std::chrono::duration_cast<milliseconds>(until - Clock::now()).count()));
  }

  // Waits for job `id`'s final event on the producer's socket, keeping every event.
  static JobRun wait_job(Client& client, const std::string& id, int timeout_ms = 60000,
                         const std::function<void(const protocol::Event&)>& on_event = nullptr) {
    JobRun run{.id = id};
    try {
      run.final_result = client.wait(
          id,
          [&](const protocol::Event& e) {
            run.events.push_back(e);
            if (on_event) on_event(e);
          },
          timeout_ms);
    } catch (const Error& e) {
      run.error = e.what();
    }
    return run;
  }

  // Submits and waits. The submit's timeout is generous: the first request on a fresh
  // connection also waits for the connection.
  static JobRun run_job(Client& client, const protocol::Job& job, int timeout_ms = 60000) {
    try {
      client.submit(job, 20000);
    } catch (const Error& e) {
      return JobRun{.id = job.id, .error = std::string("submit: ") + e.what()};
    }
    return wait_job(client, job.id, timeout_ms);
  }

  // Subscriptions take a moment to reach the broker. Submits probe jobs (cancelled at once, so
  // they end quickly with or without a worker) until `collector` sees one's final event.
  bool wait_subscribed(StreamCollector& collector, Client& client) {
    for (int i = 0; i < 50; ++i) {
      const std::string id = "probe-" + std::to_string(++probes_);
      try {
        client.submit(make_job(id, "probe", 1), 20000);
        client.cancel(id, 20000);
        client.wait(id, nullptr, 20000);
      } catch (const Error& e) {
        ADD_FAILURE() << "probe job " << id << ": " << e.what();
        return false;
      }
      if (collector.wait_final(id, milliseconds(200))) return true;
    }
    return false;
  }

  // The job's output checked against the reference and its stream checked for completeness,
  // on the producer's socket and (when given) on the stream socket.
  static void expect_matches(const JobRun& run, const Reference& want, const StreamCollector* collector = nullptr) {
    SCOPED_TRACE(run.id);
    ASSERT_TRUE(run.final_result) << run;
    EXPECT_TRUE(is_complete_stream(run.events)) << run;
    EXPECT_EQ(run.finish_reason(), want.finish_reason) << run;
    EXPECT_EQ(run.ids(), want.tokens) << run;
    EXPECT_EQ(run.text(), want.text) << run;
    EXPECT_EQ(run.final_result->usage.completion_tokens, static_cast<int64_t>(want.tokens.size())) << run;
    if (collector) {
      EXPECT_TRUE(collector->wait_final(run.id, milliseconds(10000))) << "no final event on the stream socket, " << run;
      const std::vector<protocol::Event> published = collector->events(run.id);
      EXPECT_TRUE(is_complete_stream(published)) << "stream socket, " << run;
      EXPECT_EQ(published, run.events) << "the stream socket and the producer's socket differ, " << run;
    }
  }

  static TempDir* root_;
  static Backend* backend_;
  static TargetModel* model_;
  static Tokenizer* tokenizer_;
  static std::map<std::pair<std::string, int64_t>, Reference> references_;

  TempDir scratch_;
  std::unique_ptr<Cluster> cluster_;
  int probes_ = 0;
};

inline TempDir* E2eTest::root_ = nullptr;
inline Backend* E2eTest::backend_ = nullptr;
inline TargetModel* E2eTest::model_ = nullptr;
inline Tokenizer* E2eTest::tokenizer_ = nullptr;
inline std::map<std::pair<std::string, int64_t>, Reference> E2eTest::references_;

}  // namespace flashq::testing
