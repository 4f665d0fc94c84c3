// Test helpers: a random tiny model written to a temp dir and loaded on the CPU backend.
#pragma once

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "shared/error.h"
#include "tests/support/temp_dir.h"
#include "tools/flashq_model/make_tiny.h"
#include "worker/model/model_registry.h"

namespace flashq::testing {

struct LoadedTinyModel {
  TempDir dir;
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<TargetModel> model;

  explicit LoadedTinyModel(const TinyModelSpec& spec) {
    write_tiny_model(spec, dir.path());
    model = load_target_model(dir.path(), *backend);
  }
};

inline std::vector<float> to_host(Backend& backend, const Tensor& t) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  backend.copy_to_host(t, values.data());
  return values;
}

// max |a - b| / max |b|: the error relative to the scale of the reference.
inline double max_normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 1e-30, worst = 0.0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
  }
  return got.size() == want.size() ? worst / scale : 1e30;
}

inline std::vector<int32_t> some_tokens(size_t count, int32_t vocab, uint32_t seed) {
  std::vector<int32_t> tokens;
  uint64_t state = seed + 1;
  for (size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    tokens.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab)));
  }
  return tokens;
}

}  // namespace flashq::testing
