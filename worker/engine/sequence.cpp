#include "worker/engine/sequence.h"

#include "shared/error.h"

namespace flashq {

SpecMode parse_spec_mode(std::string_view name) {
  if (name == "off") return SpecMode::kOff;
  if (name == "dflash") return SpecMode::kDflash;
  if (name == "auto") return SpecMode::kAuto;
  throw Error(ErrorCode::kInvalidArgument, "unknown spec mode '" + std::string(name) + "' (off, dflash or auto)");
}

std::string_view spec_mode_name(SpecMode mode) {
  switch (mode) {
    case SpecMode::kOff: return "off";
    case SpecMode::kDflash: return "dflash";
    case SpecMode::kAuto: return "auto";
  }
  return "?";
}

double SpecStats::tau() const {
  return target_passes > 0 ? static_cast<double>(committed_tokens) / static_cast<double>(target_passes) : 0.0;
}

Sequence::Sequence(uint64_t sequence_id, SequenceRequest r, KvCache cache)
    : id(sequence_id),
      request(std::move(r)),
      target_cache(std::move(cache)),
      sampler(request.generation.sampling),
      added_at(Clock::now()) {}

}  // namespace flashq
