#include "worker/model/state_snapshots.h"

namespace flashq {

StateSnapshots::StateSnapshots(Backend& backend, const LinearAttentionConfig& shape, int64_t linear_layers,
                               int64_t capacity, BlockPool& pool)
    : backend_(backend), shape_(shape), linear_layers_(linear_layers), capacity_(capacity), pool_(pool) {
  pool_.require_state_snapshots();
}

std::list<StateSnapshots::Slot>::iterator StateSnapshots::take_slot() {
  if (static_cast<int64_t>(slots_.size()) < capacity_) {
    slots_.push_back({.state = std::make_unique<RecurrentState>(backend_, shape_, linear_layers_)});
    return std::prev(slots_.end());
  }
  auto oldest = slots_.begin();
  by_block_.erase(oldest->block);
  // Its block's content may have changed since (its mark cleared with it): only a mark still
  // standing for this snapshot is taken back.
  if (pool_.generation(oldest->block) == oldest->generation) pool_.mark_state_snapshot(oldest->block, false);
  slots_.splice(slots_.end(), slots_, oldest);
  return std::prev(slots_.end());
}

void StateSnapshots::keep(BlockId id, const RecurrentState& state) {
  if (capacity_ <= 0) return;
  auto found = by_block_.find(id);
  auto slot = found != by_block_.end() ? found->second : take_slot();
  if (found != by_block_.end()) slots_.splice(slots_.end(), slots_, slot);
  slot->block = id;
  slot->generation = pool_.generation(id);
  slot->state->copy_live_from(state);
  by_block_[id] = slot;
  pool_.mark_state_snapshot(id, true);
}

bool StateSnapshots::restore(BlockId id, RecurrentState& state) {
  auto found = by_block_.find(id);
  if (found == by_block_.end() || found->second->generation != pool_.generation(id)) return false;
  slots_.splice(slots_.end(), slots_, found->second);
  state.copy_live_from(*found->second->state);
  return true;
}

}  // namespace flashq
