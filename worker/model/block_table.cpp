#include "worker/model/block_table.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace flashq {
namespace {

[[noreturn]] void misuse(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "block table: " + what); }

}  // namespace

BlockTable::~BlockTable() { clear(); }

PrefixMatch BlockTable::adopt_prefix(std::span<const int32_t> tokens) {
  if (!blocks_.empty()) misuse("a prefix is adopted only by an empty table");
  PrefixMatch match = pool_.match_prefix(tokens);
  blocks_ = match.blocks;
  written_.assign(blocks_.size(), false);
  hashes_ = match.hashes;
  length_ = capacity();
  if (match.partial) {
    // Never shared: this table writes after the borrowed rows, so it takes a copy of them.
    const std::optional<BlockId> copy = pool_.allocate();
    check_invariant(copy.has_value(), "a partial match is lent only when a block can take its copy");
    match.partial_copy = BlockCopy{*match.partial, *copy, match.partial_tokens};
    blocks_.push_back(*copy);
    written_.push_back(true);
    length_ += match.partial_tokens;
    pool_.release(*match.partial);  // cached again, and not evicted before the caller copies it
    match.partial.reset();
  }
  return match;
}

int64_t BlockTable::blocks_needed(int64_t length) const {
  return std::max<int64_t>(0, pool_.blocks_for(length) - static_cast<int64_t>(blocks_.size()));
}

bool BlockTable::reserve(int64_t length) {
  if (length < 0) misuse("a negative length");
  const std::optional<std::vector<BlockId>> taken = pool_.allocate(blocks_needed(length));
  if (!taken) return false;
  blocks_.insert(blocks_.end(), taken->begin(), taken->end());
  written_.resize(blocks_.size(), true);
  return true;
}

void BlockTable::commit(int64_t count) {
  if (count < 0 || length_ + count > capacity()) {
    misuse("commit of " + std::to_string(count) + " positions after " + std::to_string(length_) +
           " exceeds the reserved " + std::to_string(capacity()));
  }
  length_ += count;
}

std::optional<std::vector<BlockCopy>> BlockTable::truncate(int64_t length) {
  if (length < 0 || length > length_) {
    misuse("truncation to " + std::to_string(length) + " of a sequence of " + std::to_string(length_));
  }
  const int64_t block_size = pool_.block_size();
  const auto keep = static_cast<size_t>(pool_.blocks_for(length));
  const int64_t tail_rows = length % block_size;  // 0: no partial tail
  const bool tail_shared = tail_rows > 0 && pool_.ref_count(blocks_[keep - 1]) > 1;
  if (tail_shared) {
    // The blocks given back that only this table holds become free or cached: the copy may take one.
    int64_t available = pool_.available();
    for (size_t i = keep; i < blocks_.size(); ++i) available += pool_.ref_count(blocks_[i]) == 1 ? 1 : 0;
    if (available < 1) return std::nullopt;
  }
  while (blocks_.size() > keep) {  // from the end: a prefix's head is released last, evicted last
    pool_.release(blocks_.back());
    blocks_.pop_back();
    written_.pop_back();
  }
  // Registered blocks stay registered only while whole; a block that stopped registration may
  // be written again, with other content.
  const size_t whole = static_cast<size_t>(length / block_size);
  if (hashes_.size() > whole) hashes_.resize(whole);
  if (hashes_.size() >= whole) registration_stopped_ = false;
  length_ = length;
  std::vector<BlockCopy> copies;
  if (tail_rows > 0) {
    BlockId& tail = blocks_[keep - 1];
    if (tail_shared) {
      const std::optional<BlockId> copy = pool_.allocate();
      check_invariant(copy.has_value(), "a block is left for a shared tail's copy");
      copies.push_back({tail, *copy, tail_rows});
      pool_.release(tail);
      tail = *copy;
      written_[keep - 1] = true;
    } else {
      pool_.unregister(tail);  // its rows past `length` are about to be overwritten
    }
  }
  return copies;
}

void BlockTable::commit_full_blocks(std::span<const int32_t> tokens, int64_t drafter_through) {
  if (static_cast<int64_t>(tokens.size()) < length_) {
    misuse(std::to_string(tokens.size()) + " tokens for a sequence of " + std::to_string(length_));
  }
  const int64_t block_size = pool_.block_size();
  const auto full = static_cast<size_t>(length_ / block_size);
  while (!registration_stopped_ && hashes_.size() < full) {
    const size_t i = hashes_.size();
    const auto block_tokens = tokens.subspan(i * static_cast<size_t>(block_size), static_cast<size_t>(block_size));
    const std::optional<BlockId> parent = i == 0 ? std::nullopt : std::optional<BlockId>(blocks_[i - 1]);
    const uint64_t parent_hash = i == 0 ? BlockPool::kRootHash : hashes_.back();
    const bool draft_context = static_cast<int64_t>(i + 1) * block_size <= drafter_through;
    const std::optional<BlockId> holder = pool_.register_block(blocks_[i], parent, parent_hash, block_tokens, draft_context);
    if (!holder) {
      registration_stopped_ = true;  // later blocks could not name this one as their parent
      break;
    }
    if (*holder != blocks_[i]) {
      // An equal block is cached: share it, unless this table's copy holds drafter rows it lacks.
      if (draft_context && !pool_.has_draft_context(*holder)) {
        registration_stopped_ = true;
        break;
      }
      pool_.retain(*holder);
      pool_.release(blocks_[i]);
      blocks_[i] = *holder;
      written_[i] = false;
    }
    hashes_.push_back(BlockPool::chain_hash(parent_hash, block_tokens));
  }
}

void BlockTable::clear_keeping_tail(std::span<const int32_t> tokens) {
  register_tail(tokens);
  clear();
}

std::optional<BlockId> BlockTable::register_tail(std::span<const int32_t> tokens) {
  const int64_t block_size = pool_.block_size();
  const auto full = static_cast<size_t>(length_ / block_size);
  const int64_t tail_rows = length_ % block_size;
  if (static_cast<int64_t>(tokens.size()) < length_) {
    misuse(std::to_string(tokens.size()) + " tokens for a sequence of " + std::to_string(length_));
  }
  // Only after registered full blocks: a tail is found by walking to it.
  if (tail_rows > 0 && hashes_.size() == full && pool_.ref_count(blocks_[full]) == 1 &&
      !pool_.registered(blocks_[full])) {
    const std::optional<BlockId> parent = full == 0 ? std::nullopt : std::optional<BlockId>(blocks_[full - 1]);
    const uint64_t parent_hash = full == 0 ? BlockPool::kRootHash : hashes_.back();
    if (pool_.register_tail(blocks_[full], parent, parent_hash,
                            tokens.subspan(full * static_cast<size_t>(block_size), static_cast<size_t>(tail_rows)))) {
      return blocks_[full];
    }
  }
  return std::nullopt;
}

void BlockTable::commit_draft_context(int64_t drafter_through) {
  for (const auto& [index, id] : draft_context_to_write(drafter_through)) pool_.mark_draft_context(id);
}

std::vector<std::pair<int64_t, BlockId>> BlockTable::draft_context_to_write(int64_t drafter_through) const {
  const int64_t block_size = pool_.block_size();
  std::vector<std::pair<int64_t, BlockId>> blocks;
  for (size_t i = 0; i < hashes_.size() && static_cast<int64_t>(i + 1) * block_size <= drafter_through; ++i) {
    if (written_[i] && !pool_.has_draft_context(blocks_[i])) blocks.emplace_back(static_cast<int64_t>(i), blocks_[i]);
  }
  return blocks;
}

int64_t BlockTable::slot(int64_t position) const {
  if (position < 0 || position >= capacity()) {
    misuse("position " + std::to_string(position) + " is outside the reserved " + std::to_string(capacity()));
  }
  const int64_t block_size = pool_.block_size();
  return static_cast<int64_t>(blocks_[static_cast<size_t>(position / block_size)]) * block_size + position % block_size;
}

void BlockTable::clear() {
  while (!blocks_.empty()) {
    pool_.release(blocks_.back());
    blocks_.pop_back();
  }
  written_.clear();
  hashes_.clear();
  length_ = 0;
  registration_stopped_ = false;
}

}  // namespace flashq
