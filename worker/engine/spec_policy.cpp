#include "worker/engine/spec_policy.h"

#include <algorithm>
#include <cmath>

namespace flashq {

SpecPolicy::SpecPolicy(int64_t max_block_size) : max_block_size_(max_block_size) {}

int SpecPolicy::bucket_of(int64_t rows) {
  int bucket = 0;
  while ((int64_t{1} << (bucket + 1)) <= rows && bucket + 1 < kBuckets) ++bucket;
  return bucket;
}

void SpecPolicy::update(Average& average, double seconds) {
  average.seconds = average.measured ? 0.8 * average.seconds + 0.2 * seconds : seconds;
  average.measured = true;
}

void SpecPolicy::record_target_pass(int64_t rows, double seconds) { update(target_[bucket_of(rows)], seconds); }
void SpecPolicy::record_draft_pass(int64_t rows, double seconds) { update(draft_[bucket_of(rows)], seconds); }

namespace {

// The wait after a probe: back to the shortest after an accepted one, doubled after a failed one.
int64_t next_probe_wait(bool accepted, int64_t wait) {
  return accepted ? SpecPolicy::kFirstProbeInterval : std::min(2 * wait, SpecPolicy::kLastProbeInterval);
}

}  // namespace

void SpecPolicy::record_acceptance(SequenceSpecState& state, int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  // Per drafted token, as a rate: a block accepted up to a of b-1 says the first a were right.
  const double rate = static_cast<double>(accepted) / static_cast<double>(std::min(drafted, accepted + 1));
  state.acceptance = 0.5 * state.acceptance + 0.5 * rate;  // a few blocks decide
  drafter_acceptance_ = 0.9 * drafter_acceptance_ + 0.1 * rate;
  if (state.probing) {
    state.probing = false;
    const bool hit = accepted == drafted;
    state.probe_interval = next_probe_wait(hit, state.probe_interval);
    first_probe_interval_ = next_probe_wait(hit, first_probe_interval_);
  }
}

// A pass of more rows never costs less than one of fewer: the largest of the measured smaller
// buckets is a floor. That keeps a stale, noisy figure for small passes (not re-measured while
// the engine speculates) from making larger passes look cheaper than they are. For an
// unmeasured larger bucket the floor is also the (optimistic) estimate, so it gets tried.
double SpecPolicy::estimate(const std::array<Average, kBuckets>& table, int64_t rows) const {
  const int bucket = bucket_of(rows);
  double floor = 0;
  bool measured = false;
  for (int b = 0; b <= bucket; ++b) {
    if (!table[b].measured) continue;
    floor = std::max(floor, table[b].seconds);
    measured = true;
  }
  if (measured) return floor;
  for (int b = bucket + 1; b < kBuckets; ++b) {
    if (table[b].measured) return table[b].seconds;
  }
  return 0.0;
}

double SpecPolicy::expected_tokens(double acceptance, int64_t b) {
  const double alpha = std::clamp(acceptance, 0.0, 0.999);
  return (1.0 - std::pow(alpha, static_cast<double>(b))) / (1.0 - alpha);
}

double SpecPolicy::step_cost(int64_t batch, int64_t b) const {
  double cost = estimate(target_, batch * b);
  if (b > 1) cost += estimate(draft_, batch * b);
  return cost;
}

int64_t SpecPolicy::choose(SequenceSpecState& state, int64_t batch) {
  if (max_block_size_ < 2) return 1;
  const bool first_choice = state.block_size == 0;
  if (first_choice) {
    state.acceptance = drafter_acceptance_;
    state.probe_interval = first_probe_interval_;
  }
  const bool nothing_measured = std::none_of(target_.begin(), target_.end(), [](const Average& a) { return a.measured; });
  if (nothing_measured) {
    state.block_size = 2;  // a fresh engine: the cheapest block measures both passes
    return state.block_size;
  }
  auto rate = [&](int64_t b) {
    const double cost = step_cost(batch, b);
    return cost > 0 ? expected_tokens(state.acceptance, b) / cost : expected_tokens(state.acceptance, b);
  };
  int64_t best = 1;
  for (int64_t b = 2; b <= max_block_size_; b *= 2) {
    if (rate(b) > rate(best)) best = b;
  }
  if (first_choice || rate(best) >= 1.1 * rate(std::min(state.block_size, max_block_size_))) {
    state.block_size = best;
  }
  if (state.block_size > 1) {
    state.steps_without_draft = 0;
    return state.block_size;
  }
  if (++state.steps_without_draft >= state.probe_interval) {
    state.steps_without_draft = 0;
    state.probing = true;
    return 2;
  }
  return 1;
}

}  // namespace flashq
