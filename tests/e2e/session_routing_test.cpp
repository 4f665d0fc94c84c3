// Routing by session end to end (docs/operations.md, "Routing by session"): `flashq submit
// --session` twice against a broker with two real workers; the broker's /metrics says the second
// turn went to the session's worker. A bad --session is refused before anything is sent.
#include <gtest/gtest.h>

#include "tests/e2e/e2e_fixture.h"

namespace flashq::testing {
namespace {

TEST_F(E2eTest, ASessionsSecondTurnGoesToTheWorkerOfItsFirst) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 2);
  start_worker("w2", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(2));
  const std::string endpoints = " --broker " + cluster_->frontend() + " --stream-endpoint " + cluster_->stream();
  for (const char* prompt : {"'first turn'", "'second turn'"}) {
    CommandResult turn = run_command(bin_path("flashq") + " submit --max-tokens 4 --session agent-7 --prompt " + prompt +
                                     endpoints);
    EXPECT_EQ(turn.exit_code, 0) << turn.output;
  }
  EXPECT_EQ(cluster_->metric("flashq_routing_decisions_total{reason=\"session\"}"), std::optional<double>(1))
      << cluster_->logs();
  EXPECT_EQ(cluster_->metric("flashq_routing_decisions_total{reason=\"least_loaded\"}"), std::optional<double>(1));

  CommandResult empty = run_command(bin_path("flashq") + " submit --session '' --prompt hi" + endpoints);
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("--session must be 1..256 bytes, got 0"), std::string::npos) << empty.output;
  CommandResult long_one =
      run_command(bin_path("flashq") + " submit --session " + std::string(257, 's') + " --prompt hi" + endpoints);
  EXPECT_EQ(long_one.exit_code, 2) << long_one.output;
  EXPECT_NE(long_one.output.find("got 257"), std::string::npos) << long_one.output;
  EXPECT_EQ(cluster_->metric("flashq_jobs_admitted_total"), std::optional<double>(2)) << "nothing more was sent";
}

}  // namespace
}  // namespace flashq::testing
