#include "worker/grammar/grammar_matcher.h"

#include <algorithm>

#include "shared/error.h"
#include "worker/grammar/mask_context.h"

namespace flashq::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), stepper_(grammar_->grammar(), pool_) {
  reset();
}

void GrammarMatcher::reset() {
  history_.clear();
  terminated_.clear();
  history_.push_back(stepper_.start());
  terminated_.push_back(false);
}

bool GrammarMatcher::advance(std::string_view bytes, StackSet& out) {
  out = history_.back();
  for (char byte : bytes) {
    stepper_.advance(out, static_cast<uint8_t>(byte), scratch_a_);
    if (scratch_a_.empty()) return false;
    std::swap(out, scratch_a_);
  }
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  StackSet next;
  if (!advance(bytes, next)) return false;
  history_.push_back(std::move(next));
  terminated_.push_back(false);
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenTable& tokens = grammar_->tokens();
  if (id < 0 || id >= tokens.vocab_size() || is_terminated()) return false;
  if (tokens.is_end_token(id)) {
    if (!can_end()) return false;
    history_.push_back(history_.back());
    terminated_.push_back(true);
    return true;
  }
  if (tokens.bytes(id).empty()) return false;
  return accept_bytes(tokens.bytes(id));
}

void GrammarMatcher::rollback(int steps) {
  if (steps < 0 || static_cast<size_t>(steps) > accepted_steps()) {
    throw Error(ErrorCode::kInvalidArgument,
                "grammar rollback of " + std::to_string(steps) + " tokens, but only " +
                    std::to_string(accepted_steps()) + " were accepted");
  }
  history_.resize(history_.size() - steps);
  terminated_.resize(terminated_.size() - steps);
}

bool GrammarMatcher::can_end() const {
  const StackSet& now = history_.back();
  return std::find(now.begin(), now.end(), kEmptyStack) != now.end();
}

// Tokens the cache could not decide from the context alone, checked against the whole stack.
// They are walked in byte order, so a prefix shared with the previous token is not walked again;
// walk_states_[d] holds the stacks after d bytes of the current token (its vectors are reused).
void GrammarMatcher::add_uncertain_tokens(const StackSet& stacks, const TokenMaskEntry& entry,
                                          std::span<uint32_t> mask) {
  const TokenTable& tokens = grammar_->tokens();
  const std::vector<int32_t>& sorted = tokens.sorted_ids();
  if (walk_states_.size() < static_cast<size_t>(tokens.max_token_bytes()) + 1) {
    walk_states_.resize(static_cast<size_t>(tokens.max_token_bytes()) + 1);
  }
  walk_states_[0] = stacks;
  size_t walked = 0;  // walk_states_[0..walked] are valid for `previous`
  std::string_view previous;
  for (int32_t index : entry.uncertain) {
    int32_t id = sorted[index];
    if ((mask[id >> 5] >> (id & 31)) & 1) continue;
    std::string_view bytes = tokens.bytes(id);
    size_t common = 0;
    size_t limit = std::min({bytes.size(), previous.size(), walked});
    while (common < limit && bytes[common] == previous[common]) ++common;
    walked = common;
    bool alive = true;
    for (size_t d = common; d < bytes.size(); ++d) {
      stepper_.advance(walk_states_[d], static_cast<uint8_t>(bytes[d]), walk_states_[d + 1]);
      if (walk_states_[d + 1].empty()) {
        alive = false;
        break;
      }
      walked = d + 1;
    }
    previous = bytes;
    if (alive) mask[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

void GrammarMatcher::fill_mask(std::span<uint32_t> mask) {
  const TokenTable& tokens = grammar_->tokens();
  if (mask.size() < tokens.mask_words()) {
    throw Error(ErrorCode::kInvalidArgument, "token mask of " + std::to_string(mask.size()) +
                                                 " words, the vocabulary needs " +
                                                 std::to_string(tokens.mask_words()));
  }
  std::fill(mask.begin(), mask.end(), 0);
  if (is_terminated()) return;
  size_t mark = pool_.size();
  const StackSet& stacks = history_.back();
  std::shared_ptr<const TokenMaskEntry> entry = grammar_->mask_entry(mask_context_of(pool_, stacks));
  if (!entry->accepted_bits.empty()) std::copy(entry->accepted_bits.begin(), entry->accepted_bits.end(), mask.begin());
  for (int32_t id : entry->accepted_ids) mask[id >> 5] |= uint32_t{1} << (id & 31);
  add_uncertain_tokens(stacks, *entry, mask);
  pool_.truncate(mark);  // the walks' nodes; the history keeps only older ones
  if (can_end()) {
    for (int32_t id : tokens.end_token_ids()) mask[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

size_t GrammarMatcher::fill_draft_masks(std::span<const int32_t> draft, std::span<uint32_t> masks) {
  const size_t words = grammar_->tokens().mask_words();
  if (masks.size() < (draft.size() + 1) * words) {
    throw Error(ErrorCode::kInvalidArgument, "draft masks need " + std::to_string((draft.size() + 1) * words) +
                                                 " words, got " + std::to_string(masks.size()));
  }
  size_t accepted = 0;
  fill_mask(masks.subspan(0, words));
  while (accepted < draft.size() && accept_token(draft[accepted])) {
    ++accepted;
    fill_mask(masks.subspan(accepted * words, words));
  }
  rollback(static_cast<int>(accepted));
  return accepted;
}

std::optional<int32_t> GrammarMatcher::forced_token() {
  std::vector<uint32_t> mask(grammar_->tokens().mask_words());
  fill_mask(mask);
  std::optional<int32_t> only;
  for (size_t w = 0; w < mask.size(); ++w) {
    if (mask[w] == 0) continue;
    if (only || (mask[w] & (mask[w] - 1)) != 0) return std::nullopt;
    only = static_cast<int32_t>(w * 32 + __builtin_ctz(mask[w]));
  }
  return only;
}

}  // namespace flashq::grammar
