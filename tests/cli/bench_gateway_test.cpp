// flashq-bench gateway --quick end to end: the gateway with an in-process broker, synthetic
// workers and HTTP clients completes and reports every figure with real numbers; a bad option is
// exit 2 naming it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

TEST(BenchGateway, QuickRunReportsEveryFigure) {
  CommandResult r = run_command(bin_path("flashq-bench") + " gateway --quick --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output.substr(r.output.rfind("\n{") + 1));
  const nlohmann::json& open = out.at("open_streams");
  EXPECT_EQ(open.at("streams").get<int>(), 100);
  EXPECT_GT(open.at("rss_open_bytes").get<double>(), open.at("rss_before_bytes").get<double>());
  EXPECT_GT(open.at("client_bytes").get<double>(), 0.0);
  EXPECT_GT(open.at("process_bytes_per_stream").get<double>(), 0.0);
  EXPECT_GT(out.at("throughput").at("token_events").get<double>(), 0.0);
  EXPECT_GT(out.at("throughput").at("token_events_per_s").get<double>(), 0.0);
  const nlohmann::json& latency = out.at("latency");
  EXPECT_GT(latency.at("events_sse").get<double>(), 0.0);
  EXPECT_GT(latency.at("events_direct").get<double>(), 0.0);
  EXPECT_GT(latency.at("sse_p50_us").get<double>(), 0.0);
  EXPECT_GT(latency.at("direct_p50_us").get<double>(), 0.0);
}

TEST(BenchGateway, NoStreamsIsRefused) {
  CommandResult r = run_command(bin_path("flashq-bench") + " gateway --streams 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("must be positive"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashq::testing
