// The table's memory ops, row copies and recording: what these must give is exact (every
// element equal), and a replay must compute what the recorded ops compute when run directly.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

std::vector<float> counting(size_t n, float from) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) + from;
  return values;
}

OpCase allocate_case() {
  return {"allocate", "f32 5x3 zero-filled",
          [](OpDevice& dev) {
            auto t = std::make_shared<Tensor>(dev.backend().allocate(DType::kF32, {5, 3}));
            return PreparedRun{[&dev, t] {
                                 *t = dev.backend().allocate(DType::kF32, {5, 3});
                               },
                               [&dev, t] { return Outputs{dev.read(*t)}; }};
          },
          [] {
            return std::vector<Expected>{{"contents", std::vector<float>(15, 0.0f)}};
          }};
}

OpCase copy_from_host_case() {
  const std::vector<float> values = counting(15, -4.5f);
  return {"copy_from_host", "f32 5x3",
          [=](OpDevice& dev) {
            Tensor t = dev.poisoned({5, 3});
            return PreparedRun{[&dev, t, values]() mutable { dev.backend().copy_from_host(values.data(), t); },
                               [&dev, t] { return Outputs{dev.read(t)}; }};
          },
          [=] {
            return std::vector<Expected>{{"contents", values}};
          }};
}

// A whole tensor and a slice of its rows.
OpCase copy_to_host_case() {
  const std::vector<float> values = counting(15, -4.5f);
  return {"copy_to_host", "f32 5x3 and rows 2-3",
          [=](OpDevice& dev) {
            Tensor t = dev.upload(values, {5, 3});
            auto host = std::make_shared<std::vector<float>>(15);
            auto rows = std::make_shared<std::vector<float>>(6);
            return PreparedRun{[&dev, t, host] { dev.backend().copy_to_host(t, host->data()); },
                               [&dev, t, host, rows] {
                                 dev.backend().copy_to_host(t.slice_rows(2, 2), rows->data());
                                 return Outputs{*host, *rows};
                               }};
          },
          [=] {
            return std::vector<Expected>{{"tensor", values}, {"rows 2-3", {values.begin() + 6, values.begin() + 12}}};
          }};
}

OpCase upload_weight_case(DType dtype) {
  auto values = std::make_shared<std::vector<float>>();
  std::mt19937 rng(40);
  *values = random_floats(64 * 48, rng);
  round_to(dtype, *values);
  return {"upload_weight", std::string(dtype_name(dtype)) + " 64x48",
          [=](OpDevice& dev) {
            auto w = std::make_shared<Tensor>(dev.weight(*values, dtype, {64, 48}));
            return PreparedRun{[&dev, w, values, dtype] {
                                 *w = dev.weight(*values, dtype, {64, 48});
                               },
                               [&dev, w] { return Outputs{dev.read(*w)}; }};
          },
          [=] {
            return std::vector<Expected>{{"weight", *values}};
          }};
}

OpCase copy_rows_case() {
  auto d = std::make_shared<std::vector<std::vector<float>>>();
  std::mt19937 rng(12);
  d->push_back(random_floats(3 * 4 * 8, rng));
  d->push_back(random_floats(10 * 4 * 8, rng));
  return {"copy_rows", "3x4x8 into 10x4x8 at row 6",
          [=](OpDevice& dev) {
            Tensor src = dev.upload((*d)[0], {3, 4, 8}), dst = dev.upload((*d)[1], {10, 4, 8});
            return PreparedRun{[&dev, src, dst]() mutable { dev.backend().copy_rows(src, dst, 6); },
                               [&dev, dst] { return Outputs{dev.read(dst)}; }};
          },
          [=] {
            return std::vector<Expected>{{"dst", reference::copy_rows((*d)[0], (*d)[1], 6, 32)}};
          }};
}

OpCase copy_columns_case() {
  auto d = std::make_shared<std::vector<std::vector<float>>>();
  std::mt19937 rng(13);
  d->push_back(random_floats(5 * 3, rng));
  d->push_back(random_floats(5 * 11, rng));
  return {"copy_columns", "5x3 into 5x11 at column 7",
          [=](OpDevice& dev) {
            Tensor src = dev.upload((*d)[0], {5, 3}), dst = dev.upload((*d)[1], {5, 11});
            return PreparedRun{[&dev, src, dst]() mutable { dev.backend().copy_columns(src, dst, 7); },
                               [&dev, dst] { return Outputs{dev.read(dst)}; }};
          },
          [=] {
            return std::vector<Expected>{{"dst", reference::copy_columns((*d)[0], 3, (*d)[1], 11, 7)}};
          }};
}

OpCase store_rows_case() {
  auto d = std::make_shared<std::vector<std::vector<float>>>();
  std::mt19937 rng(23);
  d->push_back(random_floats(5 * 3 * 8, rng));
  d->push_back(random_floats(9 * 3 * 8, rng));
  const std::vector<int32_t> rows = {8, 0, 4, 5, 2};
  return {"store_rows", "5 rows of 3x8 into 9, in any order",
          [=](OpDevice& dev) {
            Tensor src = dev.upload((*d)[0], {5, 3, 8}), dst = dev.upload((*d)[1], {9, 3, 8}), at = dev.ints(rows);
            return PreparedRun{[&dev, src, dst, at]() mutable { dev.backend().store_rows(src, dst, at); },
                               [&dev, dst] { return Outputs{dev.read(dst)}; }};
          },
          [=] {
            return std::vector<Expected>{{"dst", reference::store_rows((*d)[0], (*d)[1], rows, 24)}};
          }};
}

// Into a bf16 cache: each float rounded once as stored (to nearest even), the other rows kept.
OpCase store_rows_bf16_case() {
  auto d = std::make_shared<std::vector<std::vector<float>>>();
  std::mt19937 rng(29);
  d->push_back(random_floats(5 * 3 * 8, rng));
  d->push_back(random_floats(9 * 3 * 8, rng));
  round_to(DType::kBF16, (*d)[1]);
  const std::vector<int32_t> rows = {8, 0, 4, 5, 2};
  return {"store_rows", "5 rows of 3x8 into a bf16 cache of 9",
          [=](OpDevice& dev) {
            Tensor src = dev.upload((*d)[0], {5, 3, 8}), dst = dev.upload((*d)[1], DType::kBF16, {9, 3, 8});
            Tensor at = dev.ints(rows);
            return PreparedRun{[&dev, src, dst, at]() mutable { dev.backend().store_rows(src, dst, at); },
                               [&dev, dst] { return Outputs{dev.read(dst)}; }};
          },
          [=] {
            std::vector<float> stored = reference::store_rows((*d)[0], (*d)[1], rows, 24);
            round_to(DType::kBF16, stored);
            return std::vector<Expected>{{"dst", stored}};
          }};
}

OpCase gather_rows_case() {
  auto src = std::make_shared<std::vector<float>>();
  std::mt19937 rng(24);
  *src = random_floats(9 * 3 * 8, rng);
  const std::vector<int32_t> rows = {8, 0, 4, 4, 2};
  return {"gather_rows", "5 rows of 3x8 out of 9, one twice",
          [=](OpDevice& dev) {
            Tensor s = dev.upload(*src, {9, 3, 8}), at = dev.ints(rows), dst = dev.poisoned({5, 3, 8});
            return PreparedRun{[&dev, s, at, dst]() mutable { dev.backend().gather_rows(s, at, dst); },
                               [&dev, dst] { return Outputs{dev.read(dst)}; }};
          },
          [=] {
            return std::vector<Expected>{{"dst", reference::gather_rows(*src, rows, 24)}};
          }};
}

// A small pass: h = table[ids], h = rmsnorm(h), logits = h * head^T, next = argmax(logits).
struct Pass {
  Tensor table, head, norm, ids, h, logits, next;
};

constexpr int64_t kPassVocab = 300, kPassHidden = 256, kPassRows = 4;

void run_pass(Backend& b, Pass& p) {
  b.embedding(p.table, p.ids, p.h);
  b.rmsnorm(p.h, p.norm, 1e-6f, p.h);
  b.matmul(p.h, p.head, p.logits);
  b.argmax(p.logits, p.next);
}

struct PassWeights {
  std::vector<float> table, head, norm;
};

std::shared_ptr<PassWeights> pass_weights() {
  auto w = std::make_shared<PassWeights>();
  std::mt19937 rng(31);
  w->table = random_floats(static_cast<size_t>(kPassVocab * kPassHidden), rng);
  w->head = random_floats(static_cast<size_t>(kPassVocab * kPassHidden), rng, 0.5f);
  w->norm = random_floats(static_cast<size_t>(kPassHidden), rng);
  round_to(DType::kBF16, w->table);
  round_to(DType::kBF16, w->head);
  return w;
}

std::shared_ptr<Pass> make_pass(OpDevice& dev, const PassWeights& w, const std::vector<int32_t>& ids) {
  return std::make_shared<Pass>(Pass{dev.weight(w.table, DType::kBF16, {kPassVocab, kPassHidden}),
                                     dev.weight(w.head, DType::kBF16, {kPassVocab, kPassHidden}),
                                     dev.weight(w.norm, DType::kF32, {kPassHidden}), dev.ints(ids),
                                     dev.poisoned({kPassRows, kPassHidden}), dev.poisoned({kPassRows, kPassVocab}),
                                     dev.poisoned_ints(kPassRows)});
}

std::vector<Expected> pass_reference(const PassWeights& w, const std::vector<int32_t>& ids) {
  const std::vector<float> h =
      reference::rmsnorm(reference::embedding(w.table, ids, kPassHidden), w.norm, kPassHidden, 1e-6f);
  const std::vector<float> logits = reference::matmul(h, w.head, kPassRows, kPassVocab, kPassHidden);
  return {{"logits", logits, 1e-2}, {"next ids", as_floats(reference::argmax(logits, kPassVocab))}};
}

// Recording runs nothing: the outputs keep what they held.
OpCase capture_case() {
  auto w = pass_weights();
  const std::vector<int32_t> ids = {5, 17, 299, 0};
  return {"capture", "a 4-op pass recorded: nothing runs",
          [=](OpDevice& dev) {
            std::shared_ptr<Pass> warm = make_pass(dev, *w, ids), p = make_pass(dev, *w, ids);
            run_pass(dev.backend(), *warm);  // a GPU's scratch takes its size outside the recording
            auto recorded = std::make_shared<std::unique_ptr<CapturedOps>>();
            return PreparedRun{
                [&dev, p, recorded] { *recorded = dev.backend().capture([&] { run_pass(dev.backend(), *p); }); },
                [&dev, p] { return Outputs{dev.read(p->next)}; }};
          },
          [] {
            return std::vector<Expected>{{"next ids, untouched", std::vector<float>(kPassRows, -1.0f)}};
          }};
}

// A pass run once directly (so a GPU's scratch has its size), recorded, then replayed with new
// ids: the replay computes the new ids' pass.
OpCase replay_case() {
  auto w = pass_weights();
  const std::vector<int32_t> first = {5, 17, 299, 0}, second = {42, 42, 7, 123};
  return {"replay", "a 4-op pass replayed with new ids",
          [=](OpDevice& dev) {
            std::shared_ptr<Pass> p = make_pass(dev, *w, first);
            run_pass(dev.backend(), *p);
            std::shared_ptr<CapturedOps> recorded = dev.backend().capture([&dev, p] { run_pass(dev.backend(), *p); });
            dev.backend().copy_from_host(second.data(), p->ids);
            return PreparedRun{[&dev, recorded] { dev.backend().replay(*recorded); },
                               [&dev, p] {
                                 return Outputs{dev.read(p->logits), dev.read(p->next)};
                               }};
          },
          [=] { return pass_reference(*w, second); }};
}

}  // namespace

std::vector<OpCase> memory_op_cases() {
  std::vector<OpCase> cases = {allocate_case(), copy_from_host_case(), copy_to_host_case()};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) cases.push_back(upload_weight_case(dtype));
  cases.push_back(copy_rows_case());
  cases.push_back(copy_columns_case());
  cases.push_back(store_rows_case());
  cases.push_back(store_rows_bf16_case());
  cases.push_back(gather_rows_case());
  cases.push_back(capture_case());
  cases.push_back(replay_case());
  return cases;
}

}  // namespace flashq
