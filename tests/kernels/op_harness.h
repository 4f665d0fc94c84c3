// The op-parity harness (llama.cpp's test-backend-ops is the model): a table of op cases, each
// run on every available backend and compared with a plain reference (op_reference.h) and, on
// a GPU, with the CPU backend too; each case is also timed. This header holds what a case is,
// what a run leaves to compare, and OpDevice, one backend seen from the host.
//
// Outputs are filled with NaN before an op runs, so an element the op never writes fails the
// comparison. Inputs are rounded to their dtype once, when the case is made, so the reference
// and every backend see the same numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace flashq {

// One output of a case as the reference gives it, and how a backend's must match it.
struct Expected {
  std::string name;
  std::vector<float> values;
  // Normalised error (max |got - want| / max |want|) must be below this; 0: every element equal.
  double tolerance = 0.0;
  // For sampled token ids (tolerance unused): how many may differ; an id outside the vocabulary
  // (read back as NaN) never passes.
  int max_differing = -1;
  // Also bit for bit the output of this name of the same run (a fused op and the ops it fuses,
  // or the same call twice).
  std::string same_bits_as;
};

using Outputs = std::vector<std::vector<float>>;

// A case made ready on one backend: its inputs uploaded and its outputs poisoned. `launch` issues
// the op under test, and may be issued again to time it; `read` then issues what else the case
// compares (a second call, the unfused ops) and brings the outputs to the host in the order of
// the reference's.
struct PreparedRun {
  std::function<void()> launch;
  std::function<Outputs()> read;
};

class OpDevice;

struct OpCase {
  std::string op;    // a name of kBackendOps (kernels/backend_ops.h)
  std::string name;  // shapes and dtypes
  std::function<PreparedRun(OpDevice&)> prepare;
  std::function<std::vector<Expected>()> reference;
};

// A backend as the cases use it: host values in, host values out.
class OpDevice {
 public:
  explicit OpDevice(Backend& backend);

  Backend& backend() const { return backend_; }
  std::string name() const { return backend_.name(); }

  // `values` (already of `dtype`'s precision) as a tensor on the device; `misaligned` puts it 4
  // bytes past a 16-byte boundary, which vector loads must not assume.
  Tensor upload(const std::vector<float>& values, DType dtype, Shape shape, bool misaligned = false);
  Tensor upload(const std::vector<float>& values, Shape shape) { return upload(values, DType::kF32, std::move(shape)); }
  Tensor ints(const std::vector<int32_t>& values);
  // Through upload_weight; the weight must keep its dtype and be on this device.
  Tensor weight(const std::vector<float>& values, DType dtype, Shape shape);
  // float32 NaN everywhere, or int32 -1.
  Tensor poisoned(Shape shape);
  Tensor poisoned_ints(int64_t count);
  // Any dtype, widened to float (int32 ids exactly, below 2^24).
  std::vector<float> read(const Tensor& t);
  // Waits for every op issued so far.
  void synchronize();

 private:
  Backend& backend_;
  Tensor sync_;  // one element, read back to wait for the stream
};

// ---- inputs ----

// A case's inputs, made on first use: a process that runs one op's cases (ctest runs each test
// alone) makes only theirs, not the whole table's. Copies share the inputs.
template <typename Data>
class LazyInputs {
 public:
  explicit LazyInputs(std::function<Data()> make) : state_(std::make_shared<State>(std::move(make))) {}
  const Data& operator*() const {
    State& s = *state_;
    std::call_once(s.made, [&s] { s.data.emplace(s.make()); });
    return *s.data;
  }
  const Data* operator->() const { return &**this; }

 private:
  struct State {
    explicit State(std::function<Data()> make_data) : make(std::move(make_data)) {}
    std::function<Data()> make;
    std::once_flag made;
    std::optional<Data> data;
  };
  std::shared_ptr<State> state_;
};

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f);
// `values` rounded to `dtype`'s precision in place (bf16, f16; f32 as it is).
void round_to(DType dtype, std::vector<float>& values);
// The reference's tolerance for products with weights of `dtype`: the GPU rounds x to bf16 for
// its tensor cores.
double tolerance_for(DType weight_dtype);
std::vector<float> as_floats(const std::vector<int32_t>& ids);

// ---- running ----

// max |got - want| / max |want|, or infinity where got has a NaN or infinity and want has not.
double normalized_error(const std::vector<float>& got, const std::vector<float>& want);

// One run of a case: its outputs, and the time of one launch of the op.
struct CaseRun {
  Outputs outputs;
  double microseconds = 0.0;
};

// Prepares `c` on `device`, launches it, reads its outputs, then times further launches.
CaseRun run_case(const OpCase& c, OpDevice& device);

// A row of the printed table: a case on one backend against the reference or another backend,
// with its worst output (the largest error for its tolerance).
struct CaseReport {
  std::string op, name, backend, against, worst_output;
  double error = 0.0, tolerance = 0.0, microseconds = 0.0;
  bool passed = true;
};

// Checks `got` (a run on `backend`) against `want` (the reference's values, or another
// backend's outputs) under the rules of `expected`, adding a gtest failure that names the case,
// the backends and the output for each that does not match.
CaseReport check_outputs(const OpCase& c, const std::string& backend, const std::string& against,
                         const std::vector<Expected>& expected, const Outputs& want, const Outputs& got);
// The values of every expected output, in order (the `want` of a check against the reference).
Outputs reference_values(const std::vector<Expected>& expected);

void print_report(const std::vector<CaseReport>& rows);

}  // namespace flashq
