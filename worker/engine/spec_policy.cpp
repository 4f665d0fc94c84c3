#include "worker/engine/spec_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashq {

SpecPolicy::SpecPolicy(int64_t max_block_size) : max_block_size_(max_block_size) {}

int SpecPolicy::bucket_of(int64_t rows) {
  if (rows <= kExactRows) return static_cast<int>(std::max<int64_t>(rows, 1)) - 1;
  int bucket = kExactRows;  // rows in (32, 64)
  for (int64_t upper = 2 * kExactRows; upper <= rows && bucket + 1 < kBuckets; upper *= 2) ++bucket;
  return bucket;
}

// Noise on a shared machine only adds time (a thread descheduled in a fork-join region costs a
// whole time slice: passes of 0.2 ms were seen taking 100 ms), so the average follows a faster
// pass quickly and a slower one slowly, and a single sample can at most double it.
void SpecPolicy::update(Average& average, int64_t rows, double seconds) {
  if (average.samples < 2) {
    average.seconds = seconds;  // the first pass of a size is cold: the second replaces it
    average.rows = static_cast<double>(rows);
  } else {
    if (seconds < average.seconds) {
      average.seconds += 0.5 * (seconds - average.seconds);
    } else {
      average.seconds += 0.1 * (std::min(seconds, 2 * average.seconds) - average.seconds);
    }
    average.rows += 0.2 * (static_cast<double>(rows) - average.rows);
  }
  average.samples += 1;
  average.updated_at = ++passes_;
}

void SpecPolicy::record_target_pass(int64_t rows, double seconds) { update(target_[bucket_of(rows)], rows, seconds); }
void SpecPolicy::record_draft_pass(int64_t rows, double seconds) { update(draft_[bucket_of(rows)], rows, seconds); }

namespace {

// The wait after a probe: back to the shortest after a promising one, doubled after one that was
// not (its draft was rejected, or the batch makes drafting too dear whatever the acceptance).
int64_t next_probe_wait(bool promising, int64_t wait) {
  return promising ? SpecPolicy::kFirstProbeInterval : std::min(2 * wait, SpecPolicy::kLastProbeInterval);
}

}  // namespace

void SpecPolicy::record_acceptance(SequenceSpecState& state, int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  // Per drafted token, as a rate: a block accepted up to a of b-1 says the first a were right
  // and the next one wrong: a + 1 tokens tried (a if all were right). The weight of a block
  // grows with the tokens it tried, so one rejected probe of one token does not undo what a
  // long accepted block said.
  const int64_t tried = std::min(drafted, accepted + 1);
  const double rate = static_cast<double>(accepted) / static_cast<double>(tried);
  const double weight = 1.0 - std::pow(0.75, static_cast<double>(tried));  // a few blocks decide
  state.acceptance += weight * (rate - state.acceptance);
  drafter_acceptance_ += 0.1 * (rate - drafter_acceptance_);
  if (state.probing) state.probe_hit = accepted == drafted;
}

// The measured figures as points (rows, seconds), in order of rows. A pass of more rows never
// costs less than one of fewer: where two figures say otherwise, the more recent bounds the
// older (a decode figure from a noisy minute, not re-timed while the engine speculated, once
// made block 2 look cheaper than no draft for ever; a cold first 2-row pass, not re-timed while
// the engine did not speculate, made every block look dear for ever).
void SpecPolicy::CostCurve::refresh(const std::array<Average, kBuckets>& table) {
  points.clear();
  for (int b = 0; b < kBuckets; ++b) {
    const Average& own = table[b];
    if (!own.measured()) continue;
    double seconds = own.seconds;
    for (int o = 0; o < kBuckets; ++o) {
      const Average& other = table[o];
      if (o == b || !other.measured() || other.updated_at < own.updated_at) continue;
      seconds = o < b ? std::max(seconds, other.seconds) : std::min(seconds, other.seconds);
    }
    points.push_back({own.rows, seconds});
  }
}

// Between measured points: interpolated. Beyond the largest: between flat and in proportion to
// the rows. Below the smallest: by the trend of the two smallest, between flat and in
// proportion (flat with one figure).
double SpecPolicy::CostCurve::at(int64_t rows, Unmeasured unmeasured) const {
  if (points.empty()) return 0.0;
  const double r = static_cast<double>(rows);
  if (r <= points.front().rows) {
    const Point& first = points.front();
    if (points.size() < 2) return first.seconds;
    const Point& second = points[1];
    const double per_row = std::clamp((second.seconds - first.seconds) / (second.rows - first.rows), 0.0,
                                      first.seconds / first.rows);
    return first.seconds - per_row * (first.rows - r);
  }
  for (size_t i = 1; i < points.size(); ++i) {
    const Point& lo = points[i - 1];
    const Point& hi = points[i];
    if (r <= hi.rows) return lo.seconds + (hi.seconds - lo.seconds) * (r - lo.rows) / (hi.rows - lo.rows);
  }
  const Point& last = points.back();
  const double proportional = last.seconds / last.rows;
  double per_row = 0;  // one figure only: flat, so the size gets tried
  if (unmeasured == Unmeasured::kProportional) {
    per_row = proportional;
  } else if (points.size() >= 2) {
    const Point& before = points[points.size() - 2];
    per_row = std::clamp((last.seconds - before.seconds) / (last.rows - before.rows), 0.0, proportional);
  }
  return last.seconds + per_row * (r - last.rows);
}

const SpecPolicy::CostCurve& SpecPolicy::curve(Curve which) const {
  if (curves_at_ != passes_) {  // something was timed since: the points are out of date
    target_curve_.refresh(target_);
    draft_curve_.refresh(draft_);
    curves_at_ = passes_;
  }
  return which == Curve::kTarget ? target_curve_ : draft_curve_;
}

double SpecPolicy::expected_tokens(double acceptance, int64_t b) {
  const double alpha = std::clamp(acceptance, 0.0, 0.999);
  return (1.0 - std::pow(alpha, static_cast<double>(b))) / (1.0 - alpha);
}

double SpecPolicy::step_cost(int64_t batch, int64_t b, Unmeasured unmeasured) const {
  double cost = curve(Curve::kTarget).at(batch - 1 + b, unmeasured);
  if (b > 1) cost += curve(Curve::kDraft).at(b, unmeasured);
  return cost;
}

namespace {

// Tokens per second of a step of `batch` sequences in which one sequence, of this acceptance,
// drafts a block of b: the others' one token each and its E(b).
double step_rate(const SpecPolicy& policy, int64_t batch, double acceptance, int64_t b,
                 SpecPolicy::Unmeasured unmeasured) {
  const double tokens = static_cast<double>(batch - 1) + SpecPolicy::expected_tokens(acceptance, b);
  const double cost = policy.step_cost(batch, b, unmeasured);
  return cost > 0 ? tokens / cost : tokens;
}

}  // namespace

bool SpecPolicy::drafting_could_pay(int64_t batch) const {
  if (could_pay_at_ != passes_) {
    could_pay_by_batch_.assign(could_pay_by_batch_.size(), -1);
    could_pay_at_ = passes_;
  }
  if (batch < 1) batch = 1;
  if (static_cast<size_t>(batch) >= could_pay_by_batch_.size()) {
    could_pay_by_batch_.resize(static_cast<size_t>(batch) + 1, -1);
  }
  int8_t& known = could_pay_by_batch_[static_cast<size_t>(batch)];
  if (known < 0) {
    known = 0;
    const double without = step_rate(*this, batch, 0.0, 1, Unmeasured::kTrend);  // E(1) = 1 whatever the acceptance
    for (int64_t b = 2; b <= max_block_size_ && known == 0; b *= 2) {
      known = step_rate(*this, batch, 1.0, b, Unmeasured::kTrend) > without;
    }
  }
  return known == 1;
}

int64_t SpecPolicy::choose(SequenceSpecState& state, int64_t batch) {
  if (max_block_size_ < 2) return 1;
  const bool first_choice = state.block_size == 0;
  if (first_choice) {
    state.acceptance = drafter_acceptance_;
    state.probe_interval = first_probe_interval_;
    state.steps_without_draft = idle_steps_ % first_probe_interval_;
  }
  const bool nothing_measured =
      std::none_of(target_.begin(), target_.end(), [](const Average& a) { return a.measured(); });
  if (nothing_measured) {
    state.block_size = 2;  // a fresh engine: the cheapest block measures both passes
    return state.block_size;
  }
  // A sequence out of drafting in a batch where no drafting could pay: nothing to weigh.
  if (state.block_size == 1 && !state.probing && !drafting_could_pay(batch)) {
    ++state.steps_without_draft;
    ++idle_steps_;
    return 1;
  }
  auto rate = [&](int64_t b) { return step_rate(*this, batch, state.acceptance, b, Unmeasured::kTrend); };
  // Whether drafting could pay at this batch size at all (every draft accepted), with passes of
  // more rows than measured costed by their rows.
  auto could_pay_proportional = [&] {
    for (int64_t b = 2; b <= max_block_size_; b *= 2) {
      if (step_rate(*this, batch, 1.0, b, Unmeasured::kProportional) > rate(1)) return true;
    }
    return false;
  };
  int64_t best = 1;
  for (int64_t b = 2; b <= max_block_size_; b *= 2) {
    if (rate(b) > rate(best)) best = b;
  }
  if (first_choice || rate(best) >= 1.1 * rate(std::min(state.block_size, max_block_size_))) {
    state.block_size = best;
  }
  if (state.probing) {  // the choice after a probe judges it
    state.probing = false;
    // An accepted probe that did not resume drafting yet still promises, if drafting could pay
    // at this batch size (unmeasured passes costed by their rows): a few more probes raise the
    // acceptance enough to resume.
    const bool promising = state.block_size > 1 || (state.probe_hit && could_pay_proportional());
    state.probe_interval = next_probe_wait(promising, state.probe_interval);
    first_probe_interval_ = next_probe_wait(promising, first_probe_interval_);
  }
  if (state.block_size > 1) {
    state.steps_without_draft = 0;
    return state.block_size;
  }
  // A probe only measures the acceptance: where no acceptance would make drafting pay at this
  // batch size (by the trend of the measured passes), it would only cost.
  if (++state.steps_without_draft >= state.probe_interval && drafting_could_pay(batch)) {
    state.steps_without_draft = 0;
    state.probing = true;
    return 2;
  }
  ++idle_steps_;
  return 1;
}

}  // namespace flashq
