#include "worker/model/block_pool.h"

#include <algorithm>
#include <string>

#include "shared/error.h"
#include "shared/splitmix64.h"

namespace flashq {
namespace {

[[noreturn]] void misuse(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "block pool: " + what); }

}  // namespace

uint64_t BlockPool::chain_hash(uint64_t parent_hash, std::span<const int32_t> tokens) {
  uint64_t h = splitmix64(parent_hash ^ 0x5bd1e995ULL);
  for (int32_t t : tokens) h = splitmix64(h ^ static_cast<uint32_t>(t));
  return splitmix64(h ^ tokens.size());
}

BlockPool::BlockPool(int64_t blocks, int64_t block_size, WindowedLayers windowed)
    : block_size_(block_size), windowed_(windowed) {
  if (blocks <= 0 || block_size <= 0) {
    misuse("needs a positive number of blocks and block size, got " + std::to_string(blocks) + " blocks of " +
           std::to_string(block_size));
  }
  if (windowed.window < 0 || windowed.rows_per_pass < 0) misuse("a negative window or rows per pass");
  blocks_.resize(static_cast<size_t>(blocks));
  free_.reserve(static_cast<size_t>(blocks));
  for (int64_t i = blocks - 1; i >= 0; --i) free_.push_back(static_cast<BlockId>(i));  // block 0 first
}

int64_t BlockPool::window_blocks_for(int64_t length) const {
  if (windowed_.window == 0) return 0;
  // Before a pass of up to rows_per_pass rows at position L: positions [L + 1 - window, L + rows).
  return std::min(blocks_for(length), blocks_for(windowed_.window - 1 + windowed_.rows_per_pass) + 1);
}

BlockPool::Block& BlockPool::block(BlockId id) {
  return const_cast<Block&>(static_cast<const BlockPool&>(*this).block(id));
}

const BlockPool::Block& BlockPool::block(BlockId id) const {
  if (id < 0 || id >= static_cast<BlockId>(blocks_.size())) {
    misuse("block " + std::to_string(id) + " is outside the pool of " + std::to_string(blocks_.size()));
  }
  return blocks_[static_cast<size_t>(id)];
}

std::optional<BlockId> BlockPool::allocate() {
  BlockId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();
    lru_.pop_front();
    drop_registration(blocks_[static_cast<size_t>(id)]);
    ++evictions_;
  } else {
    return std::nullopt;
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  check_invariant(b.refs == 0 && !cached_when_released(b), "an allocated block was unreferenced and unregistered");
  ++b.generation;  // children registered after its old content no longer match it
  b.state_snapshot = false;
  b.refs = 1;
  return id;
}

std::optional<std::vector<BlockId>> BlockPool::allocate(int64_t count) {
  if (!can_allocate(count)) return std::nullopt;
  std::vector<BlockId> ids;
  for (int64_t i = 0; i < count; ++i) {
    const std::optional<BlockId> id = allocate();
    check_invariant(id.has_value(), "a pool that can allocate n blocks gives n");
    ids.push_back(*id);
  }
  return ids;
}

void BlockPool::retain(BlockId id) {
  Block& b = block(id);
  if (b.refs == 0 && !cached_when_released(b)) misuse("retain of free block " + std::to_string(id));
  if (b.refs == 0) lru_.erase(b.lru);
  ++b.refs;
}

void BlockPool::release(BlockId id) {
  Block& b = block(id);
  if (b.refs == 0) misuse("release of unreferenced block " + std::to_string(id));
  if (--b.refs > 0) return;
  if (cached_when_released(b)) {
    b.lru = lru_.insert(lru_.end(), id);
  } else {
    free_.push_back(id);
  }
}

int32_t BlockPool::ref_count(BlockId id) const { return block(id).refs; }
bool BlockPool::registered(BlockId id) const { return block(id).registered; }
bool BlockPool::has_draft_context(BlockId id) const { return block(id).draft_context; }

bool BlockPool::follows(const Block& b, std::optional<BlockId> parent) const {
  return parent ? b.parent == *parent && b.parent_generation == blocks_[static_cast<size_t>(*parent)].generation
                : b.parent == -1;
}

std::optional<BlockId> BlockPool::find(std::optional<BlockId> parent, uint64_t hash,
                                       std::span<const int32_t> tokens) const {
  const auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  const Block& b = blocks_[static_cast<size_t>(it->second)];
  if (!follows(b, parent) || !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<std::pair<BlockId, int64_t>> BlockPool::find_partial(std::optional<BlockId> parent, uint64_t parent_hash,
                                                                   std::span<const int32_t> tokens) const {
  const auto it = children_.find(parent_hash);
  if (it == children_.end()) return std::nullopt;
  std::optional<std::pair<BlockId, int64_t>> best;
  for (BlockId id : it->second) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (!follows(b, parent)) continue;
    const size_t limit = std::min(b.tokens.size(), tokens.size());
    const auto agree = static_cast<int64_t>(
        std::mismatch(b.tokens.begin(), b.tokens.begin() + static_cast<std::ptrdiff_t>(limit), tokens.begin()).first -
        b.tokens.begin());
    if (agree > 0 && (!best || agree > best->second)) best = std::make_pair(id, agree);
  }
  return best;
}

PrefixMatch BlockPool::walk(std::span<const int32_t> tokens, bool partial) const {
  PrefixMatch match;
  uint64_t last_hash = kRootHash;
  const int64_t usable = tokens.empty() ? 0 : (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  std::optional<BlockId> parent;
  bool draft_run = true;
  for (int64_t i = 0; i < usable; ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const uint64_t hash = chain_hash(last_hash, block_tokens);
    const std::optional<BlockId> found = find(parent, hash, block_tokens);
    if (!found) break;
    const Block& b = blocks_[static_cast<size_t>(*found)];
    match.blocks.push_back(*found);
    draft_run = draft_run && b.draft_context;
    if (draft_run) ++match.draft_blocks;
    if (b.refs == 0) ++match.evictable;
    match.hashes.push_back(hash);
    last_hash = hash;
    parent = found;
  }
  const auto matched = static_cast<int64_t>(match.blocks.size()) * block_size_;
  const int64_t rest = tokens.empty() ? 0 : static_cast<int64_t>(tokens.size()) - 1 - matched;
  if (rest > 0 && partial) {
    const auto after =
        tokens.subspan(static_cast<size_t>(matched), static_cast<size_t>(std::min(rest, block_size_ - 1)));
    if (const auto found = find_partial(parent, last_hash, after)) {
      match.partial = found->first;
      match.partial_tokens = found->second;
    }
  }
  if (windowed_.window > 0) fit_window(match);
  if (snapshots_required_) fit_state_snapshots(match);
  return match;
}

bool BlockPool::window_attached(const PrefixMatch& match, int64_t full, int64_t end) const {
  // The next position, `end`, attends [end + 1 - window, end]: those before it must be cached.
  for (int64_t i = std::max<int64_t>(0, end + 1 - windowed_.window) / block_size_; i * block_size_ < end; ++i) {
    const BlockId owner = i < full ? match.blocks[static_cast<size_t>(i)] : *match.partial;
    if (blocks_[static_cast<size_t>(owner)].window < 0) return false;
  }
  return true;
}

void BlockPool::fit_window(PrefixMatch& match) const {
  auto full = static_cast<int64_t>(match.blocks.size());
  if (!match.partial || !window_attached(match, full, full * block_size_ + match.partial_tokens)) {
    match.partial.reset();
    match.partial_tokens = 0;
    while (full > 0 && !window_attached(match, full, full * block_size_)) --full;
    match.blocks.resize(static_cast<size_t>(full));
    match.hashes.resize(static_cast<size_t>(full));
    match.draft_blocks = std::min(match.draft_blocks, full);
  }
  const int64_t end = match.positions(block_size_);
  const int64_t first = std::max<int64_t>(0, end + 1 - windowed_.window) / block_size_;
  match.evictable = 0;
  for (int64_t i = 0; i < full; ++i) {
    const Block& owner = blocks_[static_cast<size_t>(match.blocks[static_cast<size_t>(i)])];
    match.window_blocks.push_back(i >= first ? owner.window : -1);
    match.evictable += owner.refs == 0 ? 1 : 0;
    if (i >= first) match.evictable += blocks_[static_cast<size_t>(owner.window)].refs == 0 ? 1 : 0;
  }
  if (match.partial) match.window_partial = blocks_[static_cast<size_t>(*match.partial)].window;
}

PrefixMatch BlockPool::peek_prefix(std::span<const int32_t> tokens) const { return walk(tokens); }

PrefixMatch BlockPool::match_prefix(std::span<const int32_t> tokens) {
  PrefixMatch match = walk(tokens);
  if (match.partial) {
    // Its rows go into a block of the caller's own: lent only when that block, and the rest of
    // `tokens`, can be had with the partial block (and its attached one) held (else those rows
    // are computed again).
    int64_t held = blocks_[static_cast<size_t>(*match.partial)].refs == 0 ? 1 : 0;
    if (match.window_partial) held += blocks_[static_cast<size_t>(*match.window_partial)].refs == 0 ? 1 : 0;
    const auto length = static_cast<int64_t>(tokens.size());
    const int64_t need = blocks_to_hold(length) - static_cast<int64_t>(match.blocks.size());
    if (available() - match.evictable - held < need) match = walk(tokens, false);
  }
  for (BlockId id : match.blocks) retain(id);
  for (BlockId id : match.window_blocks) {
    if (id >= 0) retain(id);
  }
  if (match.partial) retain(*match.partial);
  if (match.window_partial) retain(*match.window_partial);
  lookup_tokens_ += static_cast<int64_t>(tokens.size());
  hit_tokens_ += match.positions(block_size_);
  return match;
}

bool BlockPool::can_admit(std::span<const int32_t> tokens, int64_t length) const {
  if (length < static_cast<int64_t>(tokens.size())) misuse("a sequence shorter than its own tokens");
  const PrefixMatch match = walk(tokens);
  // The window's blocks of the match are not counted as held: as the sequence grows it gives
  // them back, and holds window_blocks_for(length) at most.
  const int64_t need = blocks_to_hold(length) - static_cast<int64_t>(match.blocks.size());
  return need <= available() - match.evictable;
}

bool BlockPool::register_tail(BlockId id, std::optional<BlockId> parent, uint64_t parent_hash,
                              std::span<const int32_t> tokens) {
  Block& b = block(id);
  if (b.registered) misuse("block " + std::to_string(id) + " is registered already");
  if (b.refs != 1) misuse("registration of tail " + std::to_string(id) + " held " + std::to_string(b.refs) + " times");
  if (tokens.empty() || static_cast<int64_t>(tokens.size()) >= block_size_) {
    misuse("a tail holds 1 to " + std::to_string(block_size_ - 1) + " tokens, got " + std::to_string(tokens.size()));
  }
  check_parent(parent, parent_hash);
  // A cached block after the same parent that begins with these tokens holds all this one could.
  const std::optional<std::pair<BlockId, int64_t>> holder = find_partial(parent, parent_hash, tokens);
  if (holder && holder->second == static_cast<int64_t>(tokens.size())) return false;
  b.registered = true;
  b.tail = true;
  b.draft_context = false;
  b.hash = 0;
  b.parent_hash = parent_hash;
  b.parent = parent.value_or(-1);
  b.parent_generation = parent ? blocks_[static_cast<size_t>(*parent)].generation : 0;
  b.tokens.assign(tokens.begin(), tokens.end());
  children_[parent_hash].push_back(id);
  return true;
}

void BlockPool::check_parent(std::optional<BlockId> parent, uint64_t parent_hash) const {
  if (parent) {
    const Block& p = block(*parent);
    if (!p.registered || p.tail || p.hash != parent_hash) {
      misuse("the parent of a registered block must be a registered full block of that hash");
    }
  } else if (parent_hash != kRootHash) {
    misuse("a first block's parent hash must be the root's");
  }
}

void BlockPool::mark_draft_context(BlockId id) {
  Block& b = block(id);
  if (!b.registered || b.tail)
    misuse("drafter context marked on block " + std::to_string(id) + ", not a registered full one");
  b.draft_context = true;
}

std::optional<BlockId> BlockPool::register_block(BlockId id, std::optional<BlockId> parent, uint64_t parent_hash,
                                                 std::span<const int32_t> tokens, bool draft_context) {
  Block& b = block(id);
  if (b.registered) misuse("block " + std::to_string(id) + " is registered already");
  if (b.refs != 1) {  // its one writer registers it, once its rows are written
    misuse("registration of block " + std::to_string(id) + " held " + std::to_string(b.refs) + " times");
  }
  if (static_cast<int64_t>(tokens.size()) != block_size_) {
    misuse("a registered block holds " + std::to_string(block_size_) + " tokens, got " + std::to_string(tokens.size()));
  }
  check_parent(parent, parent_hash);
  const uint64_t hash = chain_hash(parent_hash, tokens);
  if (const std::optional<BlockId> equal = find(parent, hash, tokens)) return equal;
  if (index_.contains(hash)) return std::nullopt;  // a collision: the first content keeps the hash
  b.registered = true;
  b.draft_context = draft_context;
  b.hash = hash;
  b.parent_hash = parent_hash;
  b.parent = parent.value_or(-1);
  b.parent_generation = parent ? blocks_[static_cast<size_t>(*parent)].generation : 0;
  b.tokens.assign(tokens.begin(), tokens.end());
  index_.emplace(hash, id);
  children_[parent_hash].push_back(id);
  return id;
}

void BlockPool::unregister(BlockId id) {
  Block& b = block(id);
  if (!b.registered) return;
  if (b.refs != 1) misuse("block " + std::to_string(id) + " is shared or cached; copy it before changing it");
  drop_registration(b);
  ++b.generation;  // its content changes: blocks registered after it no longer follow it
  b.state_snapshot = false;
}

void BlockPool::mark_state_snapshot(BlockId id, bool kept) { block(id).state_snapshot = kept; }

void BlockPool::fit_state_snapshots(PrefixMatch& match) const {
  // A tail matched whole, with the state after it kept: the match ends there (its full blocks
  // are the tail's prefix, all needed).
  if (match.partial) {
    const Block& p = blocks_[static_cast<size_t>(*match.partial)];
    if (p.tail && p.state_snapshot && match.partial_tokens == static_cast<int64_t>(p.tokens.size())) return;
  }
  match.partial.reset();
  match.partial_tokens = 0;
  auto full = static_cast<int64_t>(match.blocks.size());
  while (full > 0 && !blocks_[static_cast<size_t>(match.blocks[static_cast<size_t>(full - 1)])].state_snapshot) --full;
  match.blocks.resize(static_cast<size_t>(full));
  match.hashes.resize(static_cast<size_t>(full));
  match.draft_blocks = std::min(match.draft_blocks, full);
  match.evictable = 0;
  for (BlockId id : match.blocks) match.evictable += blocks_[static_cast<size_t>(id)].refs == 0 ? 1 : 0;
}

bool BlockPool::attach_window(BlockId owner, BlockId window) {
  Block& o = block(owner);
  Block& w = block(window);
  if (!o.registered) misuse("a window block is attached to a registered block, not " + std::to_string(owner));
  if (w.refs == 0 || w.registered || owner == window) {
    misuse("block " + std::to_string(window) + " is not a held, unregistered block to attach");
  }
  if (o.window >= 0 || w.owner >= 0) return false;
  o.window = window;
  w.owner = owner;
  return true;
}

std::optional<BlockId> BlockPool::window_of(BlockId owner) const {
  const Block& o = block(owner);
  return o.window >= 0 ? std::optional<BlockId>(o.window) : std::nullopt;
}

bool BlockPool::attached(BlockId window) const { return block(window).owner >= 0; }

void BlockPool::detach_window(Block& owner) {
  Block& w = blocks_[static_cast<size_t>(owner.window)];
  w.owner = -1;
  owner.window = -1;
  if (w.refs == 0) {  // cached only for its owner's sake
    lru_.erase(w.lru);
    free_.push_back(static_cast<BlockId>(&w - blocks_.data()));
  }
}

void BlockPool::drop_registration(Block& b) {
  if (b.owner >= 0) {  // an attached block: its owner keeps none
    blocks_[static_cast<size_t>(b.owner)].window = -1;
    b.owner = -1;
    return;
  }
  if (b.window >= 0) detach_window(b);
  if (!b.tail) index_.erase(b.hash);
  std::vector<BlockId>& siblings = children_[b.parent_hash];
  const auto id = static_cast<BlockId>(&b - blocks_.data());
  siblings.erase(std::remove(siblings.begin(), siblings.end(), id), siblings.end());
  if (siblings.empty()) children_.erase(b.parent_hash);
  b.registered = false;
  b.tail = false;
  b.draft_context = false;
  b.tokens.clear();
  b.state_snapshot = false;
}

BlockPoolStats BlockPool::stats() const {
  BlockPoolStats s;
  s.blocks = blocks();
  s.free = static_cast<int64_t>(free_.size());
  s.cached = static_cast<int64_t>(lru_.size());
  s.used = s.blocks - s.free - s.cached;
  s.evictions = evictions_;
  s.lookup_tokens = lookup_tokens_;
  s.hit_tokens = hit_tokens_;
  return s;
}

}  // namespace flashq
