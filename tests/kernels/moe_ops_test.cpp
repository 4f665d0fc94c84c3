// What the mixture-of-experts ops and the MXFP4 product must do beyond the parity table, on every
// available backend (the CPU always, CUDA where a GPU is visible): bad input refused with a
// flashq::Error that says what is wrong (an expert id outside the experts when the op runs: on a
// GPU at the next copy_to_host), a row's result independent of the rows beside it, and the two
// gate/up layouts giving the same bits; and on the CPU, the table's MXFP4 and experts cases on
// every matmul path this CPU has (the chosen one alone runs in backend_ops_test).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "kernels/cpu/matmul_path.h"
#include "shared/error.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_harness.h"

namespace flashq {
namespace {

std::vector<std::unique_ptr<Backend>> available_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(make_cpu_backend());
  if (cuda_device_count() > 0) backends.push_back(make_backend("cuda"));
  return backends;
}

// Runs `call` and a read of `sync` (where a GPU reports what its kernels found); expects a
// flashq::Error whose message holds `words`.
template <typename Call>
void expect_refused(Backend& backend, const Tensor& sync, Call&& call, const std::string& words) {
  try {
    call();
    std::vector<float> host(static_cast<size_t>(sync.numel()));
    backend.copy_to_host(sync, host.data());
    ADD_FAILURE() << backend.name() << ": no error; expected one saying '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << backend.name() << ": '" << e.what() << "' does not say '" << words << "'";
  }
}

std::vector<float> bytes(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<float> v(n);
  for (float& b : v) b = static_cast<float>(byte(rng));
  return v;
}

LinearWeight mxfp4_layer(OpDevice& dev, int64_t out, int64_t in, std::mt19937& rng) {
  LinearWeight w;
  w.weight = dev.weight(bytes(static_cast<size_t>(out * in / 2), rng), DType::kU8, {out, in / 2});
  std::vector<float> scales(static_cast<size_t>(out * in / 32));
  std::uniform_int_distribution<int> scale(118, 126);
  for (float& s : scales) s = static_cast<float>(scale(rng));
  w.scales = dev.weight(scales, DType::kU8, {out, in / 32});
  return w;
}

LinearWeight bf16_layer(OpDevice& dev, int64_t out, int64_t in, std::mt19937& rng) {
  LinearWeight w;
  std::vector<float> values = random_floats(static_cast<size_t>(out * in), rng);
  round_to(DType::kBF16, values);
  w.weight = dev.weight(values, DType::kBF16, {out, in});
  return w;
}

TEST(MoeOps, MatmulMxfp4RefusesBadShapesAndDtypes) {
  std::mt19937 rng(1);
  for (auto& backend : available_backends()) {
    OpDevice dev(*backend);
    Tensor y = dev.poisoned({1, 4});
    Tensor x48 = dev.upload(random_floats(48, rng), {1, 48});
    Tensor blocks48 = dev.weight(bytes(4 * 24, rng), DType::kU8, {4, 24});
    Tensor scales48 = dev.weight(bytes(4, rng), DType::kU8, {4, 1});
    expect_refused(
        *backend, y, [&] { backend->matmul_mxfp4(x48, blocks48, scales48, y); }, "multiple of 32");

    Tensor x = dev.upload(random_floats(64, rng), {1, 64});
    Tensor blocks = dev.weight(bytes(4 * 32, rng), DType::kU8, {4, 32});
    Tensor scales = dev.weight(bytes(8, rng), DType::kU8, {4, 2});
    Tensor bf16_blocks = dev.weight(std::vector<float>(4 * 32, 1.0f), DType::kBF16, {4, 32});
    expect_refused(
        *backend, y, [&] { backend->matmul_mxfp4(x, bf16_blocks, scales, y); }, "u8");
    Tensor short_scales = dev.weight(bytes(4, rng), DType::kU8, {4, 1});
    expect_refused(
        *backend, y, [&] { backend->matmul_mxfp4(x, blocks, short_scales, y); }, "matmul_mxfp4 shapes");
    Tensor wide_y = dev.poisoned({1, 5});
    expect_refused(
        *backend, y, [&] { backend->matmul_mxfp4(x, blocks, scales, wide_y); }, "matmul_mxfp4 shapes");
    // A dense matmul does not take bytes for a weight.
    expect_refused(
        *backend, y, [&] { backend->matmul(x, blocks, y); }, "must be f32, f16 or bf16");
  }
}

TEST(MoeOps, LinearRefusesABiasOfAnotherLength) {
  std::mt19937 rng(2);
  for (auto& backend : available_backends()) {
    OpDevice dev(*backend);
    LinearWeight w = mxfp4_layer(dev, 4, 64, rng);
    w.bias = dev.weight(std::vector<float>(5, 0.5f), DType::kBF16, {5});
    Tensor x = dev.upload(random_floats(64, rng), {1, 64}), y = dev.poisoned({1, 4});
    expect_refused(
        *backend, y, [&] { backend->linear(x, w, y); }, "must be [out]");
  }
}

TEST(MoeOps, MoeRouteRefusesTopKOutsideTheExpertsAndNormalizingAfterTopK) {
  std::mt19937 rng(3);
  for (auto& backend : available_backends()) {
    OpDevice dev(*backend);
    Tensor logits = dev.upload(random_floats(2 * 8, rng), {2, 8});
    Tensor ids = dev.poisoned_ints(2 * 2).reshape({2, 2}), weights = dev.poisoned({2, 2});
    for (int64_t k : {0, 9}) {
      Tensor ids_k = dev.poisoned_ints(2 * std::max<int64_t>(k, 1)).reshape({2, std::max<int64_t>(k, 1)});
      Tensor weights_k = dev.poisoned({2, std::max<int64_t>(k, 1)});
      expect_refused(
          *backend, weights_k,
          [&] {
            backend->moe_route(logits, {k, RoutingOrder::kTopKThenSoftmax, false}, ids_k, weights_k);
          },
          "top_k " + std::to_string(k) + " outside [1, 8]");
    }
    expect_refused(
        *backend, weights,
        [&] {
          backend->moe_route(logits, {2, RoutingOrder::kTopKThenSoftmax, true}, ids, weights);
        },
        "normalize_top_k");
    Tensor float_ids = dev.poisoned({2, 2});
    expect_refused(
        *backend, weights,
        [&] {
          backend->moe_route(logits, {2, RoutingOrder::kSoftmaxThenTopK, false}, float_ids, weights);
        },
        "int32");
    Tensor three_wide = dev.poisoned({2, 3});
    expect_refused(
        *backend, weights,
        [&] {
          backend->moe_route(logits, {2, RoutingOrder::kSoftmaxThenTopK, false}, ids, three_wide);
        },
        "must be [2, 2]");
  }
}

TEST(MoeOps, MoeExpertsRefusesBadExpertsAndIdsOutsideThem) {
  std::mt19937 rng(4);
  const int64_t hidden = 64, width = 32;
  for (auto& backend : available_backends()) {
    OpDevice dev(*backend);
    std::vector<ExpertWeights> experts(4);
    for (ExpertWeights& e : experts) {
      e.gate_up = mxfp4_layer(dev, 2 * width, hidden, rng);
      e.down = mxfp4_layer(dev, hidden, width, rng);
    }
    Tensor x = dev.upload(random_floats(2 * hidden, rng), {2, hidden}), out = dev.poisoned({2, hidden});
    Tensor weights = dev.upload({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2});
    const ExpertActivation act{ExpertActivationKind::kClampedSwiglu, 1.702f, 7.0f};
    for (int32_t bad : {4, -1}) {
      Tensor ids = dev.ints({0, 1, 2, bad}).reshape({2, 2});
      expect_refused(
          *backend, out, [&] { backend->moe_experts(x, ids, weights, experts, act, out); },
          "expert id " + std::to_string(bad) + " outside [0, 4)");
    }
    Tensor ids = dev.ints({0, 1, 2, 3}).reshape({2, 2});
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, ids, weights, {}, act, out); }, "no experts");

    std::vector<ExpertWeights> mixed = experts;
    mixed[2].gate = bf16_layer(dev, width, hidden, rng);
    mixed[2].up = bf16_layer(dev, width, hidden, rng);
    mixed[2].gate_up = {};
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, ids, weights, mixed, act, out); },
        "expert 2: every expert needs gate and up, or gate_up alone");

    std::vector<ExpertWeights> short_down = experts;
    short_down[3].down = mxfp4_layer(dev, hidden, 2 * width, rng);
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, ids, weights, short_down, act, out); },
        "expert 3 down: 64 x 64, want 64 x 32");

    Tensor no_ids = dev.poisoned_ints(0).reshape({2, 0}), no_weights = dev.poisoned({2, 0});
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, no_ids, no_weights, experts, act, out); }, "k >= 1");
    Tensor float_ids = dev.upload({0, 1, 2, 3}, {2, 2});
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, float_ids, weights, experts, act, out); }, "int32");
    Tensor narrow_weights = dev.upload({0.5f, 0.5f}, {2, 1});
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, ids, narrow_weights, experts, act, out); },
        "must both be [rows of x, k]");
    const ExpertActivation no_limit{ExpertActivationKind::kClampedSwiglu, 1.702f, 0.0f};
    expect_refused(
        *backend, out, [&] { backend->moe_experts(x, ids, weights, experts, no_limit, out); }, "positive limit");
  }
}

// Expert products of 16 rows, and of their first row alone: the same bits for that row (the
// kernels sum each element in one order whatever rows share the call), and an interleaved
// gate_up holding the separate gate's and up's rows gives the same bits as they do.
TEST(MoeOps, ARowDoesNotDependOnItsNeighboursOrOnTheGateUpLayout) {
  std::mt19937 rng(5);
  const int64_t rows = 16, hidden = 64, width = 32, top_k = 2, expert_count = 4;
  const std::vector<float> x_values = random_floats(static_cast<size_t>(rows * hidden), rng);
  std::vector<int32_t> id_values;
  std::vector<float> weight_values;
  for (int64_t m = 0; m < rows; ++m) {
    id_values.insert(id_values.end(),
                     {static_cast<int32_t>(m % expert_count), static_cast<int32_t>((m + 1) % expert_count)});
    weight_values.insert(weight_values.end(), {0.75f, 0.25f});
  }
  for (auto& backend : available_backends()) {
    OpDevice dev(*backend);
    std::mt19937 weights_rng(6);
    std::vector<ExpertWeights> separate(expert_count), interleaved(expert_count);
    for (int64_t e = 0; e < expert_count; ++e) {
      // Gate and up rows as bytes, then the same rows interleaved.
      std::vector<float> gate = bytes(static_cast<size_t>(width * hidden / 2), weights_rng);
      std::vector<float> up = bytes(static_cast<size_t>(width * hidden / 2), weights_rng);
      std::vector<float> gate_scales(static_cast<size_t>(width * hidden / 32), 121.0f), up_scales = gate_scales;
      std::vector<float> both, both_scales;
      for (int64_t i = 0; i < width; ++i) {
        const auto row = static_cast<std::ptrdiff_t>(i * hidden / 2),
                   scale_row = static_cast<std::ptrdiff_t>(i * hidden / 32);
        both.insert(both.end(), gate.begin() + row, gate.begin() + row + hidden / 2);
        both.insert(both.end(), up.begin() + row, up.begin() + row + hidden / 2);
        both_scales.insert(both_scales.end(), gate_scales.begin() + scale_row,
                           gate_scales.begin() + scale_row + hidden / 32);
        both_scales.insert(both_scales.end(), up_scales.begin() + scale_row,
                           up_scales.begin() + scale_row + hidden / 32);
      }
      ExpertWeights& s = separate[static_cast<size_t>(e)];
      s.gate.weight = dev.weight(gate, DType::kU8, {width, hidden / 2});
      s.gate.scales = dev.weight(gate_scales, DType::kU8, {width, hidden / 32});
      s.up.weight = dev.weight(up, DType::kU8, {width, hidden / 2});
      s.up.scales = dev.weight(up_scales, DType::kU8, {width, hidden / 32});
      s.down = mxfp4_layer(dev, hidden, width, weights_rng);
      ExpertWeights& i = interleaved[static_cast<size_t>(e)];
      i.gate_up.weight = dev.weight(both, DType::kU8, {2 * width, hidden / 2});
      i.gate_up.scales = dev.weight(both_scales, DType::kU8, {2 * width, hidden / 32});
      i.down = s.down;
    }
    const ExpertActivation act{};
    Tensor x = dev.upload(x_values, {rows, hidden}), ids = dev.ints(id_values).reshape({rows, top_k});
    Tensor weights = dev.upload(weight_values, {rows, top_k});
    Tensor all = dev.poisoned({rows, hidden}), alone = dev.poisoned({1, hidden}),
           as_pairs = dev.poisoned({rows, hidden});
    backend->moe_experts(x, ids, weights, separate, act, all);
    backend->moe_experts(x.slice_rows(0, 1), ids.slice_rows(0, 1), weights.slice_rows(0, 1), separate, act, alone);
    backend->moe_experts(x, ids, weights, interleaved, act, as_pairs);
    const std::vector<float> all_rows = dev.read(all), first_alone = dev.read(alone), pairs = dev.read(as_pairs);
    EXPECT_EQ(std::vector<float>(all_rows.begin(), all_rows.begin() + hidden), first_alone) << backend->name();
    EXPECT_EQ(all_rows, pairs) << backend->name();
  }
}

// A captured router and experts read the logits and ids when replayed (on a GPU a CUDA graph: the
// ids never leave the device), so one captured layer serves every step.
TEST(MoeOps, CapturedRoutingAndExpertsReadTheirInputsWhenReplayed) {
  std::mt19937 rng(8);
  const int64_t rows = 4, hidden = 64, width = 32, expert_count = 8, top_k = 2;
  const std::vector<float> x_values = random_floats(static_cast<size_t>(rows * hidden), rng);
  const std::vector<float> first_logits = random_floats(static_cast<size_t>(rows * expert_count), rng, 3.0f);
  const std::vector<float> second_logits = random_floats(static_cast<size_t>(rows * expert_count), rng, 3.0f);
  for (auto& backend : available_backends()) {
    OpDevice dev(*backend);
    std::mt19937 weights_rng(9);
    std::vector<ExpertWeights> experts(expert_count);
    for (ExpertWeights& e : experts) {
      e.gate_up = mxfp4_layer(dev, 2 * width, hidden, weights_rng);
      e.down = mxfp4_layer(dev, hidden, width, weights_rng);
    }
    const MoeRouting routing{top_k, RoutingOrder::kTopKThenSoftmax, false};
    const ExpertActivation act{ExpertActivationKind::kClampedSwiglu, 1.702f, 7.0f};
    Tensor x = dev.upload(x_values, {rows, hidden}), logits = dev.upload(first_logits, {rows, expert_count});
    Tensor ids = dev.poisoned_ints(rows * top_k).reshape({rows, top_k}), weights = dev.poisoned({rows, top_k});
    Tensor out = dev.poisoned({rows, hidden});
    auto layer = [&] {
      backend->moe_route(logits, routing, ids, weights);
      backend->moe_experts(x, ids, weights, experts, act, out);
    };
    layer();  // once before capturing, so that a GPU's scratch has its size
    std::unique_ptr<CapturedOps> captured;
    try {
      captured = backend->capture(layer);
    } catch (const Error& e) {
      ADD_FAILURE() << backend->name() << " could not capture the layer: " << e.what();
      continue;
    }
    backend->copy_from_host(second_logits.data(), logits);
    backend->replay(*captured);
    const std::vector<float> replayed = dev.read(out), replayed_ids = dev.read(ids);
    layer();
    EXPECT_EQ(replayed, dev.read(out)) << backend->name();
    EXPECT_EQ(replayed_ids, dev.read(ids)) << backend->name();
    backend->copy_from_host(first_logits.data(), logits);
    layer();
    EXPECT_NE(replayed_ids, dev.read(ids)) << backend->name() << ": the two routings should differ";
  }
}

TEST(MoeOps, EveryCpuMatmulPathMatchesTheReference) {
  const cpu::MatmulPath chosen = cpu::matmul_path();
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  for (cpu::MatmulPath path : cpu::all_matmul_paths()) {
    const std::string name(cpu::matmul_path_name(path));
    if (const std::string why = cpu::matmul_path_unsupported(path); !why.empty()) {
      std::printf("%s: skipped, %s\n", name.c_str(), why.c_str());
      continue;
    }
    // avx512bf16-round rounds activations to bf16 (up to 2^-9 each, only on request), beyond these
    // cases' float32 tolerance; cpu_matmul_paths_test holds it to its own bound.
    if (path == cpu::MatmulPath::kAvx512Bf16Round) continue;
    cpu::set_matmul_path(path);
    std::vector<CaseReport> report;
    for (const OpCase& c : op_table()) {
      if (c.op != "matmul_mxfp4" && c.op != "linear" && c.op != "moe_experts") continue;
      OpDevice device(*cpu);
      const std::vector<Expected> expected = c.reference();
      report.push_back(check_outputs(c, "cpu " + name, "reference", expected, reference_values(expected),
                                     run_case(c, device).outputs));
    }
    print_report(report);
  }
  cpu::set_matmul_path(chosen);
}

}  // namespace
}  // namespace flashq
