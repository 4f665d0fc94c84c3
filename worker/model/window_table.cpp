#include "worker/model/window_table.h"

#include <string>

#include "shared/error.h"

namespace flashq {
namespace {

[[noreturn]] void misuse(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "window table: " + what); }

}  // namespace

WindowTable::WindowTable(BlockPool& pool) : pool_(pool) {
  check_invariant(pool.windowed().window > 0 && pool.windowed().rows_per_pass > 0,
                  "a window table's pool has windowed layers");
}

WindowTable::~WindowTable() { clear({}); }

int64_t WindowTable::held() const { return static_cast<int64_t>(blocks_.size() - first_held_); }

std::optional<BlockCopy> WindowTable::adopt_prefix(const PrefixMatch& match) {
  if (!blocks_.empty()) misuse("a prefix is adopted only by an empty table");
  blocks_ = match.window_blocks;
  first_held_ = static_cast<size_t>(std::find_if(blocks_.begin(), blocks_.end(), [](BlockId id) { return id >= 0; }) -
                                    blocks_.begin());
  length_ = match.positions(pool_.block_size());
  // BlockTable::adopt_prefix has taken the partial block itself: its attached block remains.
  if (match.partial_tokens == 0) return std::nullopt;
  check_invariant(match.window_partial.has_value(), "a partial match of windowed layers has its attached block");
  const std::optional<BlockId> copy = pool_.allocate();
  check_invariant(copy.has_value(), "a partial match is lent only when its blocks' copies can be had");
  blocks_.push_back(*copy);
  pool_.release(*match.window_partial);  // cached again, and not evicted before the caller copies it
  return BlockCopy{*match.window_partial, *copy, match.partial_tokens};
}

void WindowTable::give_back(size_t index, std::span<const BlockId> owners) {
  const BlockId id = blocks_[index];
  if (index < owners.size() && pool_.registered(owners[index]) && !pool_.attached(id)) {
    pool_.attach_window(owners[index], id);  // false when the owner has one: this one goes
  }
  pool_.release(id);
  blocks_[index] = -1;
}

void WindowTable::give_back_past_window(std::span<const BlockId> owners) {
  const int64_t block_size = pool_.block_size();
  while (first_held_ < blocks_.size() && static_cast<int64_t>(first_held_ + 1) * block_size <= window_start()) {
    give_back(first_held_++, owners);
  }
}

int64_t WindowTable::blocks_needed(int64_t length) const {
  const int64_t through = std::min(length, length_ + pool_.windowed().rows_per_pass);
  return std::max<int64_t>(0, pool_.blocks_for(through) - static_cast<int64_t>(blocks_.size()));
}

bool WindowTable::reserve(int64_t length) {
  if (length < 0) misuse("a negative length");
  const std::optional<std::vector<BlockId>> taken = pool_.allocate(blocks_needed(length));
  if (!taken) return false;
  blocks_.insert(blocks_.end(), taken->begin(), taken->end());
  return true;
}

void WindowTable::commit(int64_t count) {
  const auto capacity = static_cast<int64_t>(blocks_.size()) * pool_.block_size();
  if (count < 0 || length_ + count > capacity) {
    misuse("commit of " + std::to_string(count) + " positions after " + std::to_string(length_) +
           " exceeds the reserved " + std::to_string(capacity));
  }
  length_ += count;
}

void WindowTable::truncate(int64_t length) {
  if (length < 0 || length > length_) {
    misuse("truncation to " + std::to_string(length) + " of a sequence of " + std::to_string(length_));
  }
  const int64_t start = std::max<int64_t>(0, length + 1 - pool_.windowed().window);
  check_invariant(start >= static_cast<int64_t>(first_held_) * pool_.block_size(),
                  "a windowed cache keeps the blocks of its window");
  const auto keep = static_cast<size_t>(std::max(pool_.blocks_for(length), static_cast<int64_t>(first_held_)));
  while (blocks_.size() > keep) {
    pool_.release(blocks_.back());
    blocks_.pop_back();
  }
  length_ = length;
}

int64_t WindowTable::slot(int64_t position) const {
  const int64_t block_size = pool_.block_size();
  const int64_t index = position / block_size;
  if (position < 0 || index >= static_cast<int64_t>(blocks_.size())) {
    misuse("position " + std::to_string(position) + " is outside the reserved " +
           std::to_string(static_cast<int64_t>(blocks_.size()) * block_size));
  }
  const BlockId id = blocks_[static_cast<size_t>(index)];
  check_invariant(id >= 0, "a windowed layer reads only the blocks of its window");
  return int64_t{id} * block_size + position % block_size;
}

void WindowTable::clear(std::span<const BlockId> owners) {
  for (size_t i = first_held_; i < blocks_.size(); ++i) give_back(i, owners);
  blocks_.clear();
  first_held_ = 0;
  length_ = 0;
}

}  // namespace flashq
