// The table's token ops: embedding in every weight dtype (widening is exact: rows equal),
// argmax with ties and NaN, and sampling, whose draws may differ from the reference only where
// the uniform falls within float rounding of a boundary of the cumulative weights (a few in
// 10^5; at most 2 of 64 rows here) and never at temperature 0.
#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

OpCase embedding_case(DType dtype, int64_t dim) {
  const int64_t vocab = 301;
  const std::vector<int32_t> ids = {0, 300, 5, 5, 17, 299, 1, 150, 42, 7, 8, 9, 10, 11, 12, 13, 250};
  const auto rows = static_cast<int64_t>(ids.size());
  auto table = std::make_shared<std::vector<float>>();
  std::mt19937 rng(static_cast<unsigned>(9 + dim));
  *table = random_floats(static_cast<size_t>(vocab * dim), rng);
  round_to(dtype, *table);
  return {"embedding", std::string(dtype_name(dtype)) + " dim=" + std::to_string(dim),
          [=](OpDevice& dev) {
            Tensor t = dev.weight(*table, dtype, {vocab, dim}), id = dev.ints(ids), out = dev.poisoned({rows, dim});
            return PreparedRun{[&dev, t, id, out]() mutable { dev.backend().embedding(t, id, out); },
                               [&dev, out] { return Outputs{dev.read(out)}; }};
          },
          [=] {
            return std::vector<Expected>{{"rows", reference::embedding(*table, ids, dim)}};
          }};
}

OpCase argmax_case(int64_t rows, int64_t vocab) {
  const LazyInputs<std::vector<float>> logits([=] {
    std::mt19937 rng(static_cast<unsigned>(10 + rows * 31 + vocab));
    std::vector<float> made = random_floats(static_cast<size_t>(rows * vocab), rng, 10.0f);
    for (int64_t m = 0; m < rows && vocab > 2; m += 2) {
      // A tie for the maximum in every other row, the two copies far apart so that different
      // threads find them.
      const int64_t a = (m * 7919) % vocab, b = (a + vocab / 2 + 1) % vocab;
      made[m * vocab + a] = made[m * vocab + b] = 50.0f;
    }
    return made;
  });
  return {"argmax", "rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab),
          [=](OpDevice& dev) {
            Tensor l = dev.upload(*logits, {rows, vocab}), ids = dev.poisoned_ints(rows);
            return PreparedRun{[&dev, l, ids]() mutable { dev.backend().argmax(l, ids); },
                               [&dev, ids] { return Outputs{dev.read(ids)}; }};
          },
          [=] {
            return std::vector<Expected>{{"ids", as_floats(reference::argmax(*logits, vocab))}};
          }};
}

// Logits 4 bytes off 16-byte alignment take a GPU kernel's 4-byte loads, the rest 16-byte loads:
// a tie (row 0), the last element (row 1), NaN at the front (row 2: NaN never wins, even first).
OpCase misaligned_argmax_case() {
  const int64_t rows = 3, vocab = 1000;
  auto logits = std::make_shared<std::vector<float>>();
  std::mt19937 rng(12);
  *logits = random_floats(static_cast<size_t>(rows * vocab), rng, 10.0f);
  (*logits)[5] = (*logits)[900] = 60.0f;
  (*logits)[vocab + 999] = 70.0f;
  (*logits)[2 * vocab] = (*logits)[2 * vocab + 3] = std::nanf("");
  return {"argmax", "rows=3 vocab=1000 ties, NaN, misaligned",
          [=](OpDevice& dev) {
            Tensor aligned = dev.upload(*logits, {rows, vocab});
            Tensor misaligned = dev.upload(*logits, DType::kF32, {rows, vocab}, true);
            Tensor ids = dev.poisoned_ints(rows), misaligned_ids = dev.poisoned_ints(rows);
            return PreparedRun{[&dev, aligned, ids]() mutable { dev.backend().argmax(aligned, ids); },
                               [&dev, misaligned, ids, misaligned_ids]() mutable {
                                 dev.backend().argmax(misaligned, misaligned_ids);
                                 return Outputs{dev.read(ids), dev.read(misaligned_ids)};
                               }};
          },
          [=] {
            const std::vector<float> ids = as_floats(reference::argmax(*logits, vocab));
            return std::vector<Expected>{{"ids", ids}, {"ids of misaligned logits", ids}};
          }};
}

// Rows at temperature 0 (greedy) must be the reference's ids; the others may differ in at most
// `max_differing` rows. An id outside the vocabulary reads back as NaN and fails.
// `make` gives the logits [rows, vocab] and the params [rows, 4].
OpCase sample_case(const std::string& name, int64_t rows, int64_t vocab,
                   std::function<std::array<std::vector<float>, 2>()> make, int max_differing) {
  const LazyInputs<std::array<std::vector<float>, 2>> d(std::move(make));
  // Splits a row's ids into greedy and drawn rows; an id outside [0, vocab) becomes NaN.
  auto split = [d, vocab](const std::vector<float>& ids) {
    Outputs parts(2);
    for (size_t m = 0; m < ids.size(); ++m) {
      const bool valid = ids[m] >= 0.0f && ids[m] < static_cast<float>(vocab);
      parts[(*d)[1][4 * m] == 0.0f ? 0 : 1].push_back(valid ? ids[m] : std::nanf(""));
    }
    return parts;
  };
  return {"sample", name,
          [=](OpDevice& dev) {
            Tensor l = dev.upload((*d)[0], {rows, vocab}), p = dev.upload((*d)[1], {rows, 4});
            Tensor ids = dev.poisoned_ints(rows);
            return PreparedRun{[&dev, l, p, ids]() mutable { dev.backend().sample(l, p, ids); },
                               [&dev, ids, split] { return split(dev.read(ids)); }};
          },
          [=] {
            Outputs parts = split(as_floats(reference::sample((*d)[0], (*d)[1], vocab)));
            return std::vector<Expected>{{"greedy ids", parts[0]}, {"drawn ids", parts[1], 0.0, max_differing}};
          }};
}

void add_sample_cases(std::vector<OpCase>& cases) {
  for (int64_t vocab : {5, 1000, 151936}) {
    for (bool quantised : {false, true}) {  // quantised logits make many ties
      const int64_t rows = 64;
      auto make = [=] {
        std::mt19937 rng(static_cast<unsigned>(12 + vocab + quantised));
        std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
        std::array<std::vector<float>, 2> made;
        made[0] = random_floats(static_cast<size_t>(rows * vocab), rng, 8.0f);
        if (quantised) {
          for (float& l : made[0]) l = std::round(l);
        }
        for (int64_t m = 0; m < rows; ++m) {
          const float temperature = m % 8 == 0 ? 0.0f : 0.3f + 0.2f * static_cast<float>(m % 5);
          const float top_k = m % 3 == 0 ? 0.0f : static_cast<float>(1 + (m * 37) % 60);
          const float top_p = m % 4 == 0 ? 1.0f : 0.5f + 0.1f * static_cast<float>(m % 5);
          made[1].insert(made[1].end(), {temperature, top_k, top_p, uniform(rng)});
        }
        return made;
      };
      cases.push_back(sample_case("rows=64 vocab=" + std::to_string(vocab) + (quantised ? " quantised" : ""), rows,
                                  vocab, make, 2));
    }
  }
  // Signed zeros are one value (their ties go by index) and NaN reads as -inf: draws fixed
  // whatever the rounding, so every id must be the reference's.
  const float nan = std::nanf("");
  const std::vector<std::vector<float>> rows = {
      {-0.0f, 0.0f, -1.0f, -2.0f, nan, -3.0f, 0.0f, -0.0f},  // four zeros tie for the top
      {nan, 1.0f, 5.0f, 2.0f, nan, 5.0f, -1.0f, nan},        // NaN first; 5 at 2 and 5
  };
  // {temperature, top_k, top_p, u}: greedy, top-1, top-2 drawn low and high, top-p of one weight.
  const std::vector<std::array<float, 4>> draws = {{0.0f, 0.0f, 1.0f, 0.5f},
                                                   {1.0f, 1.0f, 1.0f, 0.9f},
                                                   {1.0f, 2.0f, 1.0f, 0.25f},
                                                   {1.0f, 2.0f, 1.0f, 0.75f},
                                                   {1.0f, 0.0f, 0.1f, 0.9f}};
  std::array<std::vector<float>, 2> inputs;
  for (const std::vector<float>& row : rows) {
    for (const std::array<float, 4>& draw : draws) {
      inputs[0].insert(inputs[0].end(), row.begin(), row.end());
      inputs[1].insert(inputs[1].end(), draw.begin(), draw.end());
    }
  }
  cases.push_back(sample_case(
      "signed zeros and NaN", static_cast<int64_t>(rows.size() * draws.size()), 8, [inputs] { return inputs; }, 0));
}

}  // namespace

std::vector<OpCase> token_op_cases() {
  std::vector<OpCase> cases;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t dim : {7, 64, 1024}) cases.push_back(embedding_case(dtype, dim));
  }
  for (int64_t vocab : {1, 7, 1000, 151936}) {
    for (int64_t rows : {1, 3, 16}) cases.push_back(argmax_case(rows, vocab));
  }
  cases.push_back(misaligned_argmax_case());
  add_sample_cases(cases);
  return cases;
}

}  // namespace flashq
