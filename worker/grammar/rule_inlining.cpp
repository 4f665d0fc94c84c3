#include "worker/grammar/rule_inlining.h"

namespace flashq::grammar {
namespace {

// Bounds that keep inlining linear in the grammar's size: a recursive single-alternative rule is
// expanded at most kPasses times and no sequence grows past kMaxSequence.
constexpr int kPasses = 4;
constexpr size_t kMaxInlined = 256;
constexpr size_t kMaxSequence = 4096;

bool inline_into(std::vector<Element>& sequence, const RuleAlternatives& alternatives,
                 int32_t self) {
  bool changed = false;
  std::vector<Element> out;
  out.reserve(sequence.size());
  for (const Element& e : sequence) {
    bool inlinable = e.kind == ElementKind::kRule && e.index != self &&
                     alternatives[e.index].size() == 1 &&
                     alternatives[e.index][0].size() <= kMaxInlined &&
                     out.size() + alternatives[e.index][0].size() < kMaxSequence;
    if (!inlinable) {
      out.push_back(e);
      continue;
    }
    const auto& body = alternatives[e.index][0];
    out.insert(out.end(), body.begin(), body.end());
    changed = true;
  }
  sequence = std::move(out);
  return changed;
}

size_t total_elements(const RuleAlternatives& alternatives) {
  size_t total = 0;
  for (const auto& rule : alternatives) {
    for (const auto& sequence : rule) total += sequence.size() + 1;
  }
  return total;
}

}  // namespace

void inline_single_alternative_rules(RuleAlternatives& alternatives) {
  // The grammar may at most double (plus a constant) through inlining.
  const size_t budget = 2 * total_elements(alternatives) + 100'000;
  for (int pass = 0; pass < kPasses; ++pass) {
    bool changed = false;
    for (size_t r = 0; r < alternatives.size(); ++r) {
      for (auto& sequence : alternatives[r]) {
        changed = inline_into(sequence, alternatives, static_cast<int32_t>(r)) || changed;
      }
    }
    if (!changed || total_elements(alternatives) > budget) return;
  }
}

}  // namespace flashq::grammar
