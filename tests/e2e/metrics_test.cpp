// The broker's /metrics after a known run of real processes: a broker and a worker with a drafter,
// one speculative job. The per-step speculation counters must add up to what the job's FINAL
// reports, and every latency histogram must have counted exactly this job (docs/operations.md §5).
#include <gtest/gtest.h>

#include <map>

#include "tests/e2e/e2e_fixture.h"

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

}  // namespace
}  // namespace flashq::testing
