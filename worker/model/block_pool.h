// The bookkeeping of a paged KV cache: N blocks of block_size positions each, handed to
// sequences' block tables (block_table.h) one at a time as they grow, with reference counts so
// sequences that share a prefix share its blocks.
//
// Prefix caching: a full block of committed tokens may be registered under its chain hash, a
// hash of its tokens and its prefix's chain hash, so equal hashes stand for equal prefixes. A
// hash only finds a candidate; a match also compares the block's tokens and its parent (block id
// and generation, bumped each time a block is taken for new content), so a match is exact by
// induction from the first block and a 64-bit collision can only cost a missed hit, never a
// wrong one. A registered block whose count drops to 0 stays cached with its contents, and the
// least recently released one is evicted when a block is needed and none is free.
//
// Matches go to the token, not just the block: after the run of whole blocks, the cached block
// after the same parent whose first tokens agree with the rest of the sequence longest (a
// block's rows depend on its tokens and the ones before only) lends that many rows, copied into
// a block of the sequence's own, which it goes on writing. Those cached blocks include a
// sequence's last, partial block, registered as a tail when the sequence lets its blocks go (it
// ended or was preempted): the next turn of a conversation extends the previous one token for
// token, and a prompt that shares a system prompt ending mid-block diverges mid-block.
//
// A block id names the same rows in every store laid out by block: the target's keys and values
// of its positions, and the drafter's context (its injected keys and values) for the same
// positions. A block registered with `draft_context` holds the drafter's rows too, so a prefix
// hit costs the drafter nothing either.
//
// Windowed layers (a model whose attention is partly a sliding window, gpt-oss): a sequence
// keeps their rows in blocks of its own (window_table.h), only those its window still sees. A
// block it gives back whose positions a registered block of its full-attention layers holds is
// attached to that block (attach_window) and stays cached with it; a prefix match then ends only
// where every block of the window before it is attached, so a hit restores both kinds of layers.
// An attached block goes when its owner goes (evicted, unregistered), and may be evicted alone.
//
// Misuse (an id out of range, releasing a free block, unregistering a shared block) is a typed
// kInvalidArgument error and changes nothing. The pool outlives its block tables and is used
// from the engine's thread only.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace flashq {

using BlockId = int32_t;

// Counters for /metrics; tokens count positions asked for and found by match_prefix.
struct BlockPoolStats {
  int64_t blocks = 0;     // in the pool
  int64_t used = 0;       // referenced by at least one sequence
  int64_t free = 0;       // holding nothing
  int64_t cached = 0;     // unreferenced, holding a registered prefix block (evictable)
  int64_t evictions = 0;  // cached blocks taken for new content
  int64_t lookup_tokens = 0;
  int64_t hit_tokens = 0;
};

// Rows [0, rows) of block `from` must be copied to block `to` (in every store: target K/V, the
// drafter's context) before `to` is written.
struct BlockCopy {
  BlockId from;
  BlockId to;
  int64_t rows;
};

// The attention window of a model's windowed layers (none: window 0), and the most positions one
// forward pass stores (KvCache::kMaxRowsPerPass), which bound the blocks a sequence holds for them.
struct WindowedLayers {
  int64_t window = 0;
  int64_t rows_per_pass = 0;
};

// The longest run of cached full blocks at the start of a token sequence, and the cached block
// (full or a tail) whose first tokens continue it furthest. With windowed layers it ends where
// the window's blocks are attached too.
struct PrefixMatch {
  std::vector<BlockId> blocks;  // retained for the caller (match_prefix) or not (peek_prefix)
  int64_t draft_blocks = 0;     // leading blocks that also hold the drafter's context
  int64_t evictable = 0;        // of the blocks and window blocks, those no sequence referenced
  // With windowed layers: per block of `blocks`, the block attached to it (retained like it), or
  // -1 before the window of the match's end; and the partial block's attached block.
  std::vector<BlockId> window_blocks;
  std::optional<BlockId> window_partial;
  std::vector<uint64_t> hashes; // each block's chain hash
  std::optional<BlockId> partial;  // retained like `blocks`; its drafter rows are not used
  int64_t partial_tokens = 0;      // its leading rows that hold the next positions
  // Set by BlockTable::adopt_prefix: the partial block's rows, copied into the table's own block.
  std::optional<BlockCopy> partial_copy;

  int64_t positions(int64_t block_size) const {
    return static_cast<int64_t>(blocks.size()) * block_size + partial_tokens;
  }
};

class BlockPool {
 public:
  // The chain hash of an empty prefix.
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ULL;
  static uint64_t chain_hash(uint64_t parent_hash, std::span<const int32_t> tokens);

  // kInvalidArgument unless both are positive (and the window's figures not negative).
  BlockPool(int64_t blocks, int64_t block_size, WindowedLayers windowed = {});

  int64_t block_size() const { return block_size_; }
  const WindowedLayers& windowed() const { return windowed_; }
  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // Blocks a sequence can take now: free ones and cached ones no sequence references.
  int64_t available() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  bool can_allocate(int64_t count) const { return count <= available(); }
  // Blocks positions [0, length) occupy.
  int64_t blocks_for(int64_t length) const { return (length + block_size_ - 1) / block_size_; }
  // The most blocks of windowed layers a sequence of `length` positions holds at once: those of
  // the window before a pass and of the pass's rows (0 without windowed layers).
  int64_t window_blocks_for(int64_t length) const;
  // The most blocks a sequence of `length` positions holds, of both kinds.
  int64_t blocks_to_hold(int64_t length) const { return blocks_for(length) + window_blocks_for(length); }

  // A block of its own for the caller (count 1, unregistered): a free one, else the least
  // recently released cached one (evicted). Nothing when every block is referenced.
  std::optional<BlockId> allocate();
  // `count` blocks as allocate() gives them, or none (nothing taken) when fewer can be had.
  std::optional<std::vector<BlockId>> allocate(int64_t count);
  void retain(BlockId id);
  // Drops a reference; at 0 a registered block stays cached, any other becomes free.
  void release(BlockId id);

  int32_t ref_count(BlockId id) const;
  bool registered(BlockId id) const;
  bool has_draft_context(BlockId id) const;

  // Full blocks of `tokens` found cached, and the partial match after them, retained for the
  // caller: at most tokens[0, size - 1), since the last token must still run through the model
  // for its logits. The partial match only when, with it held, the pool can still supply the
  // blocks `tokens` lack (its rows are copied into the first). Counts lookup and hit tokens.
  PrefixMatch match_prefix(std::span<const int32_t> tokens);
  // The same run without retaining or counting (admission asks before it commits).
  PrefixMatch peek_prefix(std::span<const int32_t> tokens) const;
  // Whether a new sequence starting with `tokens` can hold `length` positions now: the blocks
  // its cached full blocks lack (a partial match saves compute, not a block, and is used only
  // when there is room), from free and evictable ones, those of the prefix not counted as
  // evictable. The engine keeps a sequence waiting while this is false.
  bool can_admit(std::span<const int32_t> tokens, int64_t length) const;

  // Registers block `id` (referenced only by its caller) holding `tokens` (block_size of them)
  // after the prefix ending in `parent` (nullopt: the sequence's first block) whose chain hash
  // is `parent_hash`. Returns the block that now stands for this content: `id`, or an equal
  // block already cached (the caller may swap to it), or nothing when another block's content
  // holds the hash (`id` stays unregistered).
  std::optional<BlockId> register_block(BlockId id, std::optional<BlockId> parent, uint64_t parent_hash,
                                        std::span<const int32_t> tokens, bool draft_context);
  // Registers block `id` (referenced only by its caller, who will not write it again) as a tail
  // holding `tokens` (1 to block_size - 1 of them) after the prefix ending in `parent` (nullopt:
  // none), whose chain hash is `parent_hash`. False, and `id` unregistered, when a cached block
  // after the same parent begins with these tokens already.
  bool register_tail(BlockId id, std::optional<BlockId> parent, uint64_t parent_hash, std::span<const int32_t> tokens);
  // Block `id` (registered) now holds the drafter's context for all of its positions too: its
  // writer's drafter caught up on them (the drafter injects committed positions lazily).
  void mark_draft_context(BlockId id);
  // Takes block `id` (referenced only by its caller) out of the cache: its content is about to
  // change. Cached blocks after it become unreachable and age out.
  void unregister(BlockId id);

  // Attaches block `window` (referenced, holding the windowed layers' rows of the positions
  // registered block `owner` holds) to `owner`: at count 0 it stays cached while `owner` does.
  // False, and nothing changed, when `owner` has one attached already or `window` is attached.
  bool attach_window(BlockId owner, BlockId window);
  // The block attached to `owner`, if any; whether `window` is attached to some block.
  std::optional<BlockId> window_of(BlockId owner) const;
  bool attached(BlockId window) const;

  // A hybrid model's recurrent state (state_snapshots.h): with snapshots required, a match ends
  // at the last of its full blocks that has the state after it kept (marked), and has no
  // partial block, unless its partial block is a tail matched whole and marked (the state after
  // the tail's last token kept: a sequence's end). A mark goes with the block's content (cleared
  // when it is taken for new).
  void require_state_snapshots() { snapshots_required_ = true; }
  bool requires_state_snapshots() const { return snapshots_required_; }
  void mark_state_snapshot(BlockId id, bool kept);
  bool has_state_snapshot(BlockId id) const { return block(id).state_snapshot; }
  // Bumped each time block `id` is taken for new content.
  uint32_t generation(BlockId id) const { return block(id).generation; }

  BlockPoolStats stats() const;

 private:
  struct Block {
    int32_t refs = 0;
    uint32_t generation = 0;  // bumped when the block is taken for new content
    bool registered = false;
    bool tail = false;  // registered with fewer than block_size tokens
    bool draft_context = false;
    uint64_t hash = 0;         // a full block's chain hash (the index's key)
    uint64_t parent_hash = 0;  // its parent's chain hash (the children's key)
    BlockId parent = -1;  // -1: the first block of its sequence
    uint32_t parent_generation = 0;
    BlockId window = -1;  // on a registered block: its windowed layers' block, attached
    BlockId owner = -1;   // on an attached block: the registered block it is attached to
    bool state_snapshot = false;  // the recurrent state after its last position is kept
    std::vector<int32_t> tokens;     // when registered: what a match compares
    std::list<BlockId>::iterator lru;  // when cached (registered, count 0)
  };

  Block& block(BlockId id);
  const Block& block(BlockId id) const;
  // The cached block holding `tokens` after `parent`, if any.
  std::optional<BlockId> find(std::optional<BlockId> parent, uint64_t hash, std::span<const int32_t> tokens) const;
  bool follows(const Block& b, std::optional<BlockId> parent) const;
  // kInvalidArgument unless `parent` (nullopt: none) may precede a block registered after it.
  void check_parent(std::optional<BlockId> parent, uint64_t parent_hash) const;
  // The registered block after `parent` (chain hash `parent_hash`) whose first tokens agree with
  // `tokens` longest, and how many agree; nothing when none agrees on the first.
  std::optional<std::pair<BlockId, int64_t>> find_partial(std::optional<BlockId> parent, uint64_t parent_hash,
                                                          std::span<const int32_t> tokens) const;
  // The match of `tokens` (its partial block only with `partial`), fitted to the window.
  PrefixMatch walk(std::span<const int32_t> tokens, bool partial = true) const;
  // Shortens `match` to where every block of the window before its end has one attached, and
  // lists those (windowed layers only).
  void fit_window(PrefixMatch& match) const;
  // Whether the blocks of the window before position `end` are attached: blocks [0, full) of
  // `match`, then its partial block.
  bool window_attached(const PrefixMatch& match, int64_t full, int64_t end) const;
  // Shortens `match` to its last full block with a state snapshot, unless it ends in a whole tail
  // with one (require_state_snapshots).
  void fit_state_snapshots(PrefixMatch& match) const;
  // Whether a cached block, unreferenced, stays cached (registered, or attached) or is free.
  bool cached_when_released(const Block& b) const { return b.registered || b.owner >= 0; }
  void drop_registration(Block& b);
  void detach_window(Block& owner);

  int64_t block_size_;
  WindowedLayers windowed_;
  bool snapshots_required_ = false;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_;               // a stack: the most recently freed is reused first
  std::list<BlockId> lru_;                  // cached, unreferenced: least recently released first
  std::unordered_map<uint64_t, BlockId> index_;  // chain hash -> registered block
  std::unordered_map<uint64_t, std::vector<BlockId>> children_;  // parent's chain hash -> blocks after it
  int64_t evictions_ = 0, lookup_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace flashq
