#include "worker/grammar/byte_stepper.h"

#include "shared/error.h"

namespace flashq::grammar {
namespace {

// Expansion recurses once per rule entered or alternative ended without a byte in between; the
// grammar is free of left recursion, so this bounds only pathological chains of empty rules.
constexpr int kMaxExpansionDepth = 20'000;

}  // namespace

bool ByteStepper::first_visit(int32_t node) {
  if (visited_.size() <= static_cast<size_t>(node)) visited_.resize(pool_.size() * 2 + 64, 0);
  if (visited_[node] == step_) return false;
  visited_[node] = step_;
  return true;
}

void ByteStepper::visit(int32_t position, int32_t below, StackSet& out, int depth) {
  if (depth > kMaxExpansionDepth) {
    throw Error(ErrorCode::kInvalidArgument, "grammar expands through more than " +
                                                 std::to_string(kMaxExpansionDepth) +
                                                 " empty rules without matching a byte");
  }
  // Each (position, stack below) is expanded once per step: alternatives that meet again
  // (optional parts in a row) would otherwise multiply the work.
  ++visits_;
  int32_t node = pool_.push(position, below);
  if (node == kStackOverflow || !first_visit(node)) return;
  const Element& e = grammar_.elements()[position];
  switch (e.kind) {
    case ElementKind::kBytes:
      if (out.size() >= kMaxStacks) {
        throw Error(ErrorCode::kInvalidArgument, "grammar keeps more than " + std::to_string(kMaxStacks) +
                                                     " parses open at once (too ambiguous)");
      }
      out.push_back(node);
      return;
    case ElementKind::kEnd:
      if (below == kEmptyStack) {
        if (!empty_added_) out.push_back(kEmptyStack);
        empty_added_ = true;
        return;
      }
      visit(pool_.node(below).position, pool_.node(below).below, out, depth + 1);
      return;
    case ElementKind::kRule: {
      int32_t continuation = below;
      if (grammar_.elements()[position + 1].kind != ElementKind::kEnd) {
        continuation = pool_.push(position + 1, below);
        if (continuation == kStackOverflow) return;
      }
      for (int32_t start : grammar_.rules()[e.index].alternatives) {
        visit(start, continuation, out, depth + 1);
      }
      return;
    }
  }
}

void ByteStepper::expand(int32_t position, int32_t below, StackSet& out) {
  ++step_;
  empty_added_ = false;
  for (int32_t s : out) empty_added_ = empty_added_ || s == kEmptyStack;
  visit(position, below, out, 0);
}

void ByteStepper::advance(const StackSet& stacks, uint8_t byte, StackSet& out) {
  out.clear();
  ++step_;
  empty_added_ = false;
  const auto& elements = grammar_.elements();
  const auto& sets = grammar_.byte_sets();
  for (int32_t s : stacks) {
    if (s < 0) continue;
    const StackNode& n = pool_.node(s);
    if (!sets[elements[n.position].index].contains(byte)) continue;
    int32_t below = n.below;  // copy: visit() may grow the pool and move its nodes
    visit(n.position + 1, below, out, 0);
  }
}

StackSet ByteStepper::start() {
  StackSet out;
  ++step_;
  empty_added_ = false;
  // The root is entered as a rule reference with nothing after it.
  for (int32_t alternative : grammar_.rules()[grammar_.root()].alternatives) {
    visit(alternative, kEmptyStack, out, 0);
  }
  return out;
}

}  // namespace flashq::grammar
