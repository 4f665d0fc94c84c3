// The broker's /metrics after a known run of real processes: a broker and a worker with a drafter,
// one speculative job. The per-step speculation counters must add up to what the job's FINAL
// reports, and every latency histogram must have counted exactly this job (docs/operations.md §5).
#include <gtest/gtest.h>

#include <map>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

const std::vector<std::string> kCounted = {
    "flashq_generation_tokens_total",
    "flashq_spec_decode_num_drafts_total",
    "flashq_spec_decode_num_draft_tokens_total",
    "flashq_spec_decode_num_accepted_tokens_total",
    "flashq_spec_decode_num_accepted_tokens_per_pos_total",
    "flashq_time_to_first_token_seconds_count",
    "flashq_inter_token_latency_seconds_count",
    "flashq_request_queue_time_seconds_count",
    "flashq_e2e_request_latency_seconds_count",
};

TEST_F(E2eTest, MetricsCountAKnownSpeculativeRunExactly) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 1);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  std::map<std::string, double> before;
  for (const std::string& name : kCounted) before[name] = cluster_->metric(name).value_or(0);

  auto client = connect_client();
  protocol::Job job = make_job("metered-1", "The queue hums along", 48);
  job.spec = protocol::SpecMode::kDflash;
  const JobRun run = run_job(*client, job);
  ASSERT_TRUE(run.final_result) << run;
  const protocol::FinalResult& final_result = *run.final_result;
  ASSERT_GT(final_result.spec_stats.draft_steps, 0) << run;

  auto delta = [&](const std::string& name) { return cluster_->metric(name).value_or(0) - before.at(name); };
  const double tokens = static_cast<double>(run.ids().size());
  EXPECT_EQ(delta("flashq_generation_tokens_total"), tokens);
  EXPECT_EQ(delta("flashq_spec_decode_num_drafts_total"), final_result.spec_stats.draft_steps);
  EXPECT_EQ(delta("flashq_spec_decode_num_accepted_tokens_total"), final_result.spec_stats.accepted_tokens);
  // Every draft proposes 1 .. block size - 1 tokens (the test drafter's block is 8 or less).
  const double draft_tokens = delta("flashq_spec_decode_num_draft_tokens_total");
  EXPECT_GE(draft_tokens, final_result.spec_stats.draft_steps);
  EXPECT_LE(draft_tokens, 7.0 * static_cast<double>(final_result.spec_stats.draft_steps));
  // Summed over positions, the per-position counter is the accepted tokens.
  EXPECT_EQ(delta("flashq_spec_decode_num_accepted_tokens_per_pos_total"), final_result.spec_stats.accepted_tokens);
  EXPECT_EQ(delta("flashq_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(delta("flashq_request_queue_time_seconds_count"), 1);
  EXPECT_EQ(delta("flashq_e2e_request_latency_seconds_count"), 1);
  // One inter-token observation per token after the first event's.
  size_t first_event_tokens = 0;
  for (const protocol::Event& e : run.events) {
    if (!e.token_ids.empty()) {
      first_event_tokens = e.token_ids.size();
      break;
    }
  }
  EXPECT_EQ(delta("flashq_inter_token_latency_seconds_count"), tokens - static_cast<double>(first_event_tokens));
}

// A worker's own /metrics on --metrics-http: after one job on an otherwise idle worker, its
// tokens, steps and the KV cache pool it was given.
TEST_F(E2eTest, WorkerServesItsOwnMetrics) {
  ASSERT_TRUE(start_broker());
  const int port = free_port();
  start_worker("w1", 2, {"--metrics-http", "127.0.0.1:" + std::to_string(port), "--cache-memory-mb", "16"});
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  const HttpResponse before_job = http_get(port, "/metrics");
  ASSERT_EQ(before_job.status, 200) << cluster_->logs();
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  EXPECT_EQ(http_get(port, "/readyz").status, 200);
  const double tokens_before = metric_value(before_job.body, "flashq_worker_generation_tokens_total").value_or(-1);
  const double steps_before = metric_value(before_job.body, "flashq_worker_engine_steps_total").value_or(-1);
  ASSERT_GE(tokens_before, 0) << before_job.body;

  auto client = connect_client();
  protocol::Job job = make_job("worker-metered", "The queue hums along", 32);
  job.spec = protocol::SpecMode::kDflash;
  const JobRun run = run_job(*client, job);
  ASSERT_TRUE(run.final_result) << run;

  const std::string m = http_get(port, "/metrics").body;
  auto value = [&](const std::string& name) { return metric_value(m, name).value_or(-1); };
  EXPECT_EQ(value("flashq_worker_generation_tokens_total") - tokens_before, static_cast<double>(run.ids().size())) << m;
  const double steps = value("flashq_worker_engine_steps_total") - steps_before;
  EXPECT_GE(steps, 1);
  // One step produced at most a block's worth of tokens for this one job.
  EXPECT_GE(steps * 8, static_cast<double>(run.ids().size()));
  EXPECT_EQ(value("flashq_worker_engine_step_seconds_count"), value("flashq_worker_engine_steps_total"));
  EXPECT_EQ(value("flashq_worker_engine_step_batch_size_count"), value("flashq_worker_engine_steps_total"));
  EXPECT_NEAR(value("flashq_worker_engine_step_tokens_sum"), value("flashq_worker_generation_tokens_total"), 1e-6);
  // A speculative job prefilled, drafted and verified.
  for (const char* phase : {"prefill", "draft", "verify"}) {
    EXPECT_GT(value(std::string("flashq_worker_engine_pass_seconds_total{phase=\"") + phase + "\"}"), 0) << phase;
  }
  // The step time holds every pass.
  EXPECT_LE(value("flashq_worker_engine_pass_seconds_total"), value("flashq_worker_engine_step_seconds_sum") + 1e-6);
  EXPECT_EQ(value("flashq_worker_kv_cache_capacity_bytes"), 16.0 * (1 << 20));
  EXPECT_EQ(value("flashq_worker_kv_cache_used_bytes"), 0) << "the finished job gave its caches back";
  EXPECT_EQ(value("flashq_worker_jobs_running"), 0);
}

// With a cache pool the target's KV cache is paged: the same prompt twice is a prefix hit the
// second time (every whole block but the one holding its last token), the same output, and the
// blocks go back to the cache when the jobs finish.
TEST_F(E2eTest, AWorkerWithAPagedCacheCountsPrefixHitsAndBlocks) {
  ASSERT_TRUE(start_broker());
  const int port = free_port();
  start_worker(
      "w1", 2,
      {"--metrics-http", "127.0.0.1:" + std::to_string(port), "--cache-memory-mb", "16", "--kv-block-size", "8"});
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  const std::string prompt =
      "The queue hums along while the workers decode, block after block, and the broker keeps count";
  std::vector<std::vector<int32_t>> outputs;
  for (const char* id : {"paged-1", "paged-2"}) {
    const JobRun run = run_job(*client, make_job(id, prompt, 12));
    ASSERT_TRUE(run.final_result) << run;
    outputs.push_back(run.ids());
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  const std::string m = http_get(port, "/metrics").body;
  auto value = [&](const std::string& name) { return metric_value(m, name).value_or(-1); };
  const double lookups = value("flashq_worker_prefix_cache_lookup_tokens_total");
  const double hits = value("flashq_worker_prefix_cache_hit_tokens_total");
  ASSERT_GT(lookups, 16) << m;
  const double prompt_tokens = lookups / 2;
  EXPECT_EQ(hits, prompt_tokens - 1) << "all but the last token, which must run (full blocks and a partial one)\n" << m;
  EXPECT_EQ(value("flashq_worker_kv_blocks{state=\"used\"}"), 0) << m;
  EXPECT_GT(value("flashq_worker_kv_blocks{state=\"cached\"}"), 0) << m;
  EXPECT_GT(value("flashq_worker_kv_blocks{state=\"free\"}"), 0) << m;
  EXPECT_EQ(value("flashq_worker_preemptions_total"), 0) << m;
  EXPECT_GE(value("flashq_worker_prefix_cache_draft_hit_tokens_total"), 0) << m;
  EXPECT_LE(value("flashq_worker_prefix_cache_draft_hit_tokens_total"), hits) << m;
  EXPECT_EQ(value("flashq_worker_kv_block_evictions_total"), 0) << m;
  EXPECT_EQ(value("flashq_worker_kv_cache_used_bytes"), 0) << m;
}

// On the CPU the pool is sized from the host's memory without a flag (host_cache_pool_bytes), so
// the paged cache and prefix caching are on by default: the same prompt twice is a hit. For a
// model this small the pool is what the worker could fill: its 2 slots at the whole context, twice.
TEST_F(E2eTest, AWorkerOnTheCpuCachesPrefixesWithoutFlags) {
  ASSERT_TRUE(start_broker());
  const int port = free_port();
  cluster_->start_worker("w1", target_dir(), /*drafter=*/{}, 2,
                         {"--metrics-http", "127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  const std::string prompt = "A system prompt that every request repeats, word for word, ahead of its question";
  std::vector<std::vector<int32_t>> outputs;
  for (const char* id : {"default-pool-1", "default-pool-2"}) {
    const JobRun run = run_job(*client, make_job(id, prompt, 8));
    ASSERT_TRUE(run.final_result) << run;
    outputs.push_back(run.ids());
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  const std::string m = http_get(port, "/metrics").body;
  auto value = [&](const std::string& name) { return metric_value(m, name).value_or(-1); };
  const double useful = 2.0 * 2 * static_cast<double>(model_->config().max_position_embeddings) *
                        static_cast<double>(model_->paged_bytes_per_block(1));
  EXPECT_EQ(value("flashq_worker_kv_cache_capacity_bytes"), useful) << m;
  EXPECT_GT(value("flashq_worker_kv_blocks{state=\"free\"}"), 0) << m;
  EXPECT_GT(value("flashq_worker_kv_blocks{state=\"cached\"}"), 0) << m;
  const double lookups = value("flashq_worker_prefix_cache_lookup_tokens_total");
  ASSERT_GT(lookups, 0) << m;
  EXPECT_EQ(value("flashq_worker_prefix_cache_hit_tokens_total"), lookups / 2 - 1)
      << "the second job found all of its prompt but the last token\n" << m;
}

// --cache-memory-mb 0: no pool, so whole-length caches and no prefix caching, as before there
// was a default pool on the CPU.
TEST_F(E2eTest, AWorkerWithCacheMemoryZeroHasNoPool) {
  ASSERT_TRUE(start_broker());
  const int port = free_port();
  start_worker("w1", 2, {"--metrics-http", "127.0.0.1:" + std::to_string(port), "--cache-memory-mb", "0"});
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  const JobRun run = run_job(*client, make_job("no-pool", "The queue hums along", 8));
  ASSERT_TRUE(run.final_result) << run;
  const std::string m = http_get(port, "/metrics").body;
  EXPECT_FALSE(metric_value(m, "flashq_worker_kv_cache_capacity_bytes").has_value()) << m;
  EXPECT_FALSE(metric_value(m, "flashq_worker_prefix_cache_lookup_tokens_total").has_value()) << m;
}

TEST_F(E2eTest, AWorkerWithAMalformedMetricsAddressExitsSayingSo) {
  const CommandResult result = run_command(bin_path("flashq-worker") + " --model '" + target_dir().string() +
                                           "' --device cpu --broker tcp://127.0.0.1:1 --metrics-http nonsense");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("an HTTP address is host:port, got 'nonsense'"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace flashq::testing
