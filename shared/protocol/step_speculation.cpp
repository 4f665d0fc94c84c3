#include "shared/protocol/step_speculation.h"

#include <limits>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"

namespace flashq::protocol {
namespace {

constexpr std::int64_t kCountMax = std::numeric_limits<std::int64_t>::max();

}  // namespace

void StepSpeculation::add_draft(std::int64_t drafted, std::int64_t accepted) {
  if (drafted <= 0) return;
  drafts += 1;
  draft_tokens += drafted;
  accepted_tokens += accepted;
  if (accepted_per_pos.size() < static_cast<std::size_t>(accepted)) accepted_per_pos.resize(static_cast<std::size_t>(accepted), 0);
  for (std::int64_t position = 0; position < accepted; ++position) accepted_per_pos[static_cast<std::size_t>(position)] += 1;
}

std::string encode_step_speculation(const StepSpeculation& spec) {
  return MapWriter()
      .integer("drafts", spec.drafts)
      .integer("draft_tokens", spec.draft_tokens)
      .integer("accepted_tokens", spec.accepted_tokens)
      .integers("accepted_per_pos", spec.accepted_per_pos)
      .finish();
}

StepSpeculation read_step_speculation(const FieldReader& fields) {
  StepSpeculation spec;
  spec.drafts = fields.integer("drafts", 0, kCountMax);
  spec.draft_tokens = fields.integer("draft_tokens", 0, kCountMax);
  spec.accepted_tokens = fields.integer("accepted_tokens", 0, kCountMax);
  if (spec.drafts > spec.draft_tokens) fields.fail("drafts", "must be <= draft_tokens (a draft has at least one token)");
  if (spec.accepted_tokens > spec.draft_tokens) fields.fail("accepted_tokens", "must be <= draft_tokens");
  const FieldPath at = fields.field_path("accepted_per_pos");
  const auto elements = read_array(fields.require("accepted_per_pos"), at, static_cast<std::size_t>(kMaxBlockSize));
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const std::int64_t previous = i == 0 ? spec.drafts : spec.accepted_per_pos.back();
    const std::int64_t count = read_integer(elements[i], at.element(i), 0, previous);
    spec.accepted_per_pos.push_back(count);
    sum += count;
  }
  if (sum != spec.accepted_tokens) {
    fields.fail("accepted_per_pos", "must sum to accepted_tokens (" + std::to_string(spec.accepted_tokens) + "), got " +
                                        std::to_string(sum));
  }
  return spec;
}

}  // namespace flashq::protocol
