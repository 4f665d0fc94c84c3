// Unknown models end to end (docs/protocol.md 9.4): `flashq submit` naming a model no worker of
// the broker serves is refused at once, exit code 2 (docs/decisions.md, "Job command exit
// codes"), with the models served in its message; the model the real worker serves runs.
#include <gtest/gtest.h>

#include <thread>

#include "tests/e2e/e2e_fixture.h"

namespace flashq::testing {
namespace {

TEST_F(E2eTest, SubmitNamingAModelNoWorkerServesFailsAtOnceListingTheModelsServed) {
  ASSERT_TRUE(start_broker({"--unknown-model-grace-ms", "200"}));
  start_worker("w1", 1);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  std::this_thread::sleep_for(milliseconds(300));  // past the grace period
  const std::string endpoints = " --broker " + cluster_->frontend() + " --stream-endpoint " + cluster_->stream();
  const std::string served = target_dir().filename().string();

  const auto started = Clock::now();
  CommandResult typo = run_command(bin_path("flashq") + " submit --id typo --model absent --prompt hi" + endpoints);
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("job typo rejected: unknown_model (no worker serves model 'absent'; models served: " +
                             served + ")"),
            std::string::npos)
      << typo.output;
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5)) << "refused at once, not at the job's deadline";

  CommandResult good = run_command(bin_path("flashq") + " submit --max-tokens 4 --model " + served +
                                   " --prompt hi" + endpoints);
  EXPECT_EQ(good.exit_code, 0) << good.output;
}

}  // namespace
}  // namespace flashq::testing
