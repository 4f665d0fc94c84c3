// The op-parity harness: every op of kernels/backend_ops.h, on every available backend (the CPU
// always, CUDA where a GPU is visible), against the plain references of op_reference.h, and on a
// GPU against the CPU backend too, with the cases of the table (op_cases.h). One test per op,
// which prints a row per case and backend: what it is compared with, the worst output's error
// and its tolerance, and the microseconds of one launch. An op of the list without a case fails.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "kernels/backend_ops.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_harness.h"

namespace flashq {
namespace {

struct Backends {
  std::unique_ptr<Backend> cpu, cuda;  // cuda: none without a GPU
};

Backends& backends() {
  static Backends made = [] {
    Backends b;
    b.cpu = make_cpu_backend();
    if (cuda_device_count() > 0) b.cuda = make_backend("cuda");
    return b;
  }();
  return made;
}

TEST(BackendOps, EveryOpOfTheBackendHasACaseAndEveryCaseAnOp) {
  for (std::string_view op : kBackendOps) {
    const auto cases = std::count_if(op_table().begin(), op_table().end(), [&](const OpCase& c) { return c.op == op; });
    EXPECT_GT(cases, 0) << "op " << op
                        << " (kernels/backend_ops.h) has no case in the table (tests/kernels/op_cases_*.cpp)";
  }
  for (const OpCase& c : op_table()) {
    EXPECT_NE(std::find(kBackendOps.begin(), kBackendOps.end(), c.op), kBackendOps.end())
        << "case '" << c.name << "' is of op " << c.op << ", which kernels/backend_ops.h does not list";
  }
}

// Runs a case on `device`, checks it against the reference (and `cpu_outputs`, when given), and
// adds its rows to `report`; returns its outputs.
Outputs run_and_check(const OpCase& c, Backend& backend, const std::vector<Expected>& expected,
                      const Outputs* cpu_outputs, std::vector<CaseReport>& report) {
  OpDevice device(backend);
  CaseRun run;
  try {
    run = run_case(c, device);
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.op << " " << c.name << " on " << backend.name() << " threw: " << e.what();
    return {};
  }
  report.push_back(check_outputs(c, backend.name(), "reference", expected, reference_values(expected), run.outputs));
  report.back().microseconds = run.microseconds;
  if (cpu_outputs != nullptr) {
    report.push_back(check_outputs(c, backend.name(), "cpu", expected, *cpu_outputs, run.outputs));
    report.back().microseconds = run.microseconds;
  }
  return run.outputs;
}

class BackendOp : public ::testing::TestWithParam<std::string_view> {};

TEST_P(BackendOp, MatchesTheReferenceOnEveryBackend) {
  std::vector<CaseReport> report;
  int cases = 0;
  for (const OpCase& c : op_table()) {
    if (c.op != GetParam()) continue;
    ++cases;
    const std::vector<Expected> expected = c.reference();
    const Outputs on_cpu = run_and_check(c, *backends().cpu, expected, nullptr, report);
    if (backends().cuda) run_and_check(c, *backends().cuda, expected, on_cpu.empty() ? nullptr : &on_cpu, report);
  }
  EXPECT_GT(cases, 0) << "op " << GetParam() << " has no case in the table";
  if (!backends().cuda) {
    std::printf("no CUDA device visible: %s runs on the CPU backend only\n", std::string(GetParam()).c_str());
  }
  print_report(report);
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendOp, ::testing::ValuesIn(kBackendOps),
                         [](const ::testing::TestParamInfo<std::string_view>& p) { return std::string(p.param); });

}  // namespace
}  // namespace flashq
