// Every CPU matmul path this CPU can run (kernels/cpu/matmul_path.h) on the cases of
// op_cases_matmul_paths.h, each within its activations' error bound; a path the CPU lacks is
// skipped with the reason. Also the choice of the path: by CPU features, named by
// FLASHQ_CPU_MATMUL, and refused with a typed error when unknown or unsupported.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend_factory.h"
#include "kernels/cpu/matmul_path.h"
#include "shared/error.h"
#include "tests/kernels/op_cases_matmul_paths.h"
#include "tests/kernels/op_harness.h"

namespace flashq {
namespace {

// Sets a path for one test and puts back the one before.
class PathForTest {
 public:
  explicit PathForTest(cpu::MatmulPath path) : before_(cpu::matmul_path()) { cpu::set_matmul_path(path); }
  ~PathForTest() { cpu::set_matmul_path(before_); }
  PathForTest(const PathForTest&) = delete;
  PathForTest& operator=(const PathForTest&) = delete;

 private:
  cpu::MatmulPath before_;
};

class CpuMatmulPath : public ::testing::TestWithParam<cpu::MatmulPath> {};

TEST_P(CpuMatmulPath, MatchesTheReferenceWithinItsErrorBoundAndRowsDoNotDependOnTheirNeighbours) {
  const cpu::MatmulPath path = GetParam();
  const std::string name(cpu::matmul_path_name(path));
  if (const std::string why = cpu::matmul_path_unsupported(path); !why.empty()) GTEST_SKIP() << name << ": " << why;
  PathForTest chosen(path);
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  OpDevice device(*cpu);
  std::vector<CaseReport> report;
  for (const OpCase& c : matmul_path_cases(path)) {
    const std::vector<Expected> expected = c.reference();
    const CaseRun run = run_case(c, device);
    report.push_back(check_outputs(c, "cpu " + name, "reference", expected, reference_values(expected), run.outputs));
    report.back().microseconds = run.microseconds;
  }
  print_report(report);
}

INSTANTIATE_TEST_SUITE_P(Paths, CpuMatmulPath, ::testing::ValuesIn(cpu::all_matmul_paths()),
                         [](const ::testing::TestParamInfo<cpu::MatmulPath>& p) {
                           std::string name(cpu::matmul_path_name(p.param));
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

TEST(CpuMatmulPathChoice, TheDefaultIsFloat32OnTheWidestVectorsThisCpuHas) {
  if (std::getenv("FLASHQ_CPU_MATMUL") != nullptr) GTEST_SKIP() << "FLASHQ_CPU_MATMUL chooses the path here";
  const cpu::MatmulPath chosen = cpu::matmul_path();
  const cpu::MatmulPath widest =
      cpu::matmul_path_unsupported(cpu::MatmulPath::kAvx512).empty() ? cpu::MatmulPath::kAvx512 : cpu::MatmulPath::kAvx2;
  EXPECT_EQ(chosen, widest) << cpu::matmul_path_name(chosen);
  EXPECT_EQ(activation_rounding(chosen), 0.0) << "the default keeps float32 activations";
  std::printf("this CPU takes the %s path\n", std::string(cpu::matmul_path_name(chosen)).c_str());
}

TEST(CpuMatmulPathChoice, NamesParseAndUnknownOrUnsupportedPathsAreTypedErrors) {
  for (cpu::MatmulPath path : cpu::all_matmul_paths()) {
    EXPECT_EQ(cpu::parse_matmul_path(cpu::matmul_path_name(path)), path);
  }
  try {
    cpu::parse_matmul_path("avx1024");
    ADD_FAILURE() << "an unknown path was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("avx1024"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(cpu::set_matmul_path(cpu::matmul_path()));
  for (cpu::MatmulPath path : cpu::all_matmul_paths()) {
    if (cpu::matmul_path_unsupported(path).empty()) continue;
    try {
      cpu::set_matmul_path(path);
      ADD_FAILURE() << cpu::matmul_path_name(path) << " was accepted on a CPU without it";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    }
  }
}

}  // namespace
}  // namespace flashq
