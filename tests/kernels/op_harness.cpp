#include "tests/kernels/op_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace flashq {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A host tensor of `dtype` holding `values`.
Tensor host_tensor(const std::vector<float>& values, DType dtype, Shape shape) {
  Tensor t = Tensor::zeros_cpu(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        t.data<float>()[i] = values[i];
        break;
      case DType::kBF16:
        t.data<uint16_t>()[i] = f32_to_bf16(values[i]);
        break;
      case DType::kF16:
        t.data<uint16_t>()[i] = f32_to_f16(values[i]);
        break;
      case DType::kI32:
        t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
        break;
      case DType::kU8:  // raw bytes (MXFP4 blocks and scales), given as 0..255
        t.data<uint8_t>()[i] = static_cast<uint8_t>(values[i]);
        break;
    }
  }
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct Verdict {
  double error = 0.0;
  bool passed = true;
};

Verdict compare(const Expected& e, const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return {std::numeric_limits<double>::infinity(), false};
  if (e.max_differing >= 0) {
    int differing = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!std::isfinite(got[i])) return {std::numeric_limits<double>::infinity(), false};
      differing += got[i] != want[i];
    }
    return {static_cast<double>(differing), differing <= e.max_differing};
  }
  if (e.tolerance > 0.0) {
    const double error = normalized_error(got, want);
    return {error, error < e.tolerance};
  }
  double worst = 0.0;
  bool equal = true;
  for (size_t i = 0; i < want.size(); ++i) {
    equal = equal && got[i] == want[i];
    worst = std::max(worst, std::isnan(got[i]) ? std::numeric_limits<double>::infinity()
                                               : std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return {worst, equal};
}

// error / tolerance, the measure of the worst output (an exact output that differs is worst).
double badness(const Expected& e, const Verdict& v) {
  if (!v.passed) return std::numeric_limits<double>::infinity();
  if (e.max_differing >= 0) return v.error / (e.max_differing + 1);
  return e.tolerance > 0.0 ? v.error / e.tolerance : 0.0;
}

}  // namespace

OpDevice::OpDevice(Backend& backend) : backend_(backend), sync_(backend.allocate(DType::kF32, {1})) {}

Tensor OpDevice::upload(const std::vector<float>& values, DType dtype, Shape shape, bool misaligned) {
  Tensor host = host_tensor(values, dtype, std::move(shape));
  Tensor t;
  if (misaligned) {
    // 4 bytes past the allocation's start, which is at least 16-byte aligned.
    Tensor spaced = backend_.allocate(dtype, {host.numel() + 4 / static_cast<int64_t>(dtype_size(dtype))});
    t = spaced.slice_rows(4 / static_cast<int64_t>(dtype_size(dtype)), host.numel()).reshape(host.shape());
  } else {
    t = backend_.allocate(dtype, host.shape());
  }
  backend_.copy_from_host(host.raw(), t);
  return t;
}

Tensor OpDevice::ints(const std::vector<int32_t>& values) {
  Tensor t = backend_.allocate(DType::kI32, {static_cast<int64_t>(values.size())});
  backend_.copy_from_host(values.data(), t);
  return t;
}

Tensor OpDevice::weight(const std::vector<float>& values, DType dtype, Shape shape) {
  Tensor w = backend_.upload_weight(host_tensor(values, dtype, std::move(shape)));
  EXPECT_EQ(w.device(), backend_.device()) << "upload_weight on " << name();
  EXPECT_EQ(w.dtype(), dtype) << "upload_weight on " << name() << " changed the dtype";
  return w;
}

Tensor OpDevice::poisoned(Shape shape) {
  Tensor t = backend_.allocate(DType::kF32, std::move(shape));
  const std::vector<float> nans(static_cast<size_t>(t.numel()), kNaN);
  backend_.copy_from_host(nans.data(), t);
  return t;
}

Tensor OpDevice::poisoned_ints(int64_t count) { return ints(std::vector<int32_t>(static_cast<size_t>(count), -1)); }

std::vector<float> OpDevice::read(const Tensor& t) {
  Tensor host = Tensor::zeros_cpu(t.dtype(), t.shape());
  backend_.copy_to_host(t, host.raw());
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t.dtype()) {
      case DType::kF32:
        values[i] = host.data<float>()[i];
        break;
      case DType::kBF16:
        values[i] = bf16_to_f32(host.data<uint16_t>()[i]);
        break;
      case DType::kF16:
        values[i] = f16_to_f32(host.data<uint16_t>()[i]);
        break;
      case DType::kI32:
        values[i] = static_cast<float>(host.data<int32_t>()[i]);
        break;
      case DType::kU8:
        values[i] = static_cast<float>(host.data<uint8_t>()[i]);
        break;
    }
  }
  return values;
}

void OpDevice::synchronize() {
  float sink = 0.0f;
  backend_.copy_to_host(sync_, &sink);
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void round_to(DType dtype, std::vector<float>& values) {
  for (float& v : values) {
    if (dtype == DType::kBF16) v = bf16_to_f32(f32_to_bf16(v));
    if (dtype == DType::kF16) v = f16_to_f32(f32_to_f16(v));
  }
}

double tolerance_for(DType weight_dtype) { return weight_dtype == DType::kF32 ? 1e-4 : 1e-2; }

std::vector<float> as_floats(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

double normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double scale = 1e-30, worst = 0.0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
  for (size_t i = 0; i < want.size(); ++i) {
    // A plain max would skip NaN, which is exactly what poisoning is meant to catch.
    if (!std::isfinite(got[i]) && std::isfinite(want[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return worst / scale;
}

CaseRun run_case(const OpCase& c, OpDevice& device) {
  using Clock = std::chrono::steady_clock;
  PreparedRun run = c.prepare(device);
  run.launch();
  CaseRun result{run.read(), 0.0};
  // Launches repeated until about a millisecond has gone by (at most 50), so that short ops are
  // not timed by the clock's resolution and long ones are not run many times.
  device.synchronize();
  auto start = Clock::now();
  run.launch();
  device.synchronize();
  const double once = std::chrono::duration<double>(Clock::now() - start).count();
  const int repeats = static_cast<int>(std::clamp(1e-3 / std::max(once, 1e-9), 1.0, 50.0));
  start = Clock::now();
  for (int i = 0; i < repeats; ++i) run.launch();
  device.synchronize();
  result.microseconds = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / repeats;
  return result;
}

Outputs reference_values(const std::vector<Expected>& expected) {
  Outputs values;
  for (const Expected& e : expected) values.push_back(e.values);
  return values;
}

CaseReport check_outputs(const OpCase& c, const std::string& backend, const std::string& against,
                         const std::vector<Expected>& expected, const Outputs& want, const Outputs& got) {
  CaseReport report{c.op, c.name, backend, against, "", 0.0, 0.0, 0.0, true};
  EXPECT_EQ(got.size(), expected.size()) << c.op << " " << c.name << " on " << backend << ": outputs";
  EXPECT_EQ(want.size(), expected.size()) << c.op << " " << c.name << " " << against << ": outputs";
  double worst = -1.0;
  for (size_t i = 0; i < expected.size() && i < got.size() && i < want.size(); ++i) {
    const Expected& e = expected[i];
    const Verdict v = compare(e, got[i], want[i]);
    EXPECT_TRUE(v.passed) << c.op << " " << c.name << " on " << backend << " against " << against << ": " << e.name
                          << (e.max_differing >= 0 ? " ids differing " : " error ") << v.error
                          << (e.max_differing >= 0 ? ", at most " + std::to_string(e.max_differing)
                                                   : ", tolerance " + std::to_string(e.tolerance));
    if (!e.same_bits_as.empty()) {
      const auto sibling = std::find_if(expected.begin(), expected.end(),
                                        [&](const Expected& other) { return other.name == e.same_bits_as; });
      EXPECT_NE(sibling, expected.end()) << c.op << " " << c.name << ": no output named " << e.same_bits_as;
      if (sibling != expected.end()) {
        const bool identical = same_bits(got[i], got[static_cast<size_t>(sibling - expected.begin())]);
        EXPECT_TRUE(identical) << c.op << " " << c.name << " on " << backend << ": " << e.name << " is not bit for bit "
                               << e.same_bits_as;
        report.passed = report.passed && identical;
      }
    }
    report.passed = report.passed && v.passed;
    if (badness(e, v) > worst) {
      worst = badness(e, v);
      report.worst_output = e.name;
      report.error = v.error;
      report.tolerance = e.max_differing >= 0 ? e.max_differing : e.tolerance;
    }
  }
  return report;
}

void print_report(const std::vector<CaseReport>& rows) {
  std::printf("%-16s %-44s %-5s %-10s %-28s %10s %10s %12s\n", "op", "case", "on", "against", "worst output", "error",
              "tolerance", "us");
  for (const CaseReport& r : rows) {
    std::printf("%-16s %-44s %-5s %-10s %-28s %10.3g %10.3g %12.1f%s\n", r.op.c_str(), r.name.c_str(),
                r.backend.c_str(), r.against.c_str(), r.worst_output.c_str(), r.error, r.tolerance, r.microseconds,
                r.passed ? "" : "  FAILED");
  }
  std::fflush(stdout);
}

}  // namespace flashq
