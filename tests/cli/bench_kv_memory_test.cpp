// flashq-bench kv-memory on config.json alone (make-tiny --config-only): gpt-oss-20b's published
// shape (24 layers, 12 of them sliding with a window of 128, 8 KV heads of 64) at 8,192
// positions in bf16, each figure worked out here from the shape: 2,048 bytes a layer's position.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

constexpr double kMiB = 1 << 20;
constexpr double kPosition = 2 * 8 * 64 * 2;  // keys and values, 8 heads of 64, bf16

nlohmann::json kv_memory(const std::filesystem::path& model, const std::string& args) {
  CommandResult r = run_command(bin_path("flashq-bench") + " kv-memory --json --model " + model.string() + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output.substr(r.output.find('{')));
}

TEST(BenchKvMemory, GptOss20bSlidingLayersHoldTheirWindowOnly) {
  TempDir dir;
  const std::filesystem::path model = dir.path() / "gpt-oss-20b";
  CommandResult made =
      run_command(bin_path("flashq-model") + " make-tiny --preset gpt-oss-20b --config-only --out " + model.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_TRUE(std::filesystem::exists(model / "config.json"));
  EXPECT_FALSE(std::filesystem::exists(model / "model.safetensors")) << "config only";

  const nlohmann::json out = kv_memory(model, "--positions 8192");
  EXPECT_EQ(out.at("sliding_layers"), 12);
  EXPECT_EQ(out.at("sliding_window"), 128);
  const nlohmann::json& s = out.at("sequences").at(0);
  // Whole-length: 12 full layers of 8,192 rows and 12 rings of 128 + 256.
  EXPECT_DOUBLE_EQ(s.at("whole_length_mib").get<double>(), (12 * 8192 + 12 * 384) * kPosition / kMiB);
  EXPECT_DOUBLE_EQ(s.at("whole_length_model_context_mib").get<double>(), (12 * 131072 + 12 * 384) * kPosition / kMiB);
  // Paged, before the next decode pass at 8,192: 513 blocks of 16, of every layer.
  EXPECT_DOUBLE_EQ(s.at("paged_every_layer_mib").get<double>(), 513 * 16 * 24 * kPosition / kMiB);
  // Windowed: blocks of 12 layers; the full layers' 513 and the sliding layers' 9, positions
  // 8,065 to 8,192 (blocks 504 to 512).
  EXPECT_EQ(s.at("paged_windowed_decode_blocks"), 513 + 9);
  EXPECT_DOUBLE_EQ(s.at("paged_windowed_decode_mib").get<double>(), (513 + 9) * 16 * 12 * kPosition / kMiB);
  EXPECT_GE(s.at("paged_windowed_prefill_peak_mib").get<double>(), s.at("paged_windowed_decode_mib").get<double>());
  EXPECT_LT(s.at("paged_windowed_prefill_peak_mib").get<double>(), s.at("paged_every_layer_mib").get<double>() * 0.55);
}

TEST(BenchKvMemory, ADenseModelHasNoWindowedFiguresAndABadOptionIsNamed) {
  TempDir dir;
  const std::filesystem::path model = dir.path() / "qwen3";
  ASSERT_EQ(run_command(bin_path("flashq-model") + " make-tiny --config-only --out " + model.string()).exit_code, 0);
  const nlohmann::json out = kv_memory(model, "--positions 100,200 --kv-cache-dtype float32");
  ASSERT_EQ(out.at("sequences").size(), 2u);
  EXPECT_FALSE(out.at("sequences").at(0).contains("paged_windowed_decode_mib"));
  EXPECT_EQ(out.at("kv_cache_dtype"), "float32");
  CommandResult bad = run_command(bin_path("flashq-bench") + " kv-memory --model " + model.string() +
                                  " --kv-cache-dtype fp8");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("bf16 or float32"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace flashq::testing
