// When and how far to speculate (`spec: auto`). DFlash pays off when a verify pass of B rows costs
// little more than a decode pass and the drafter's tokens are accepted; both change with the
// batch size and the text. The policy measures instead of assuming:
//  - the cost of target passes and drafter passes by row count (moving averages per power-of-two
//    bucket, quick to follow a faster pass and slow to follow a slower one: noise only adds
//    time), as the engine runs them;
//  - each sequence's acceptance rate (a moving average of accepted / drafted), starting from the
//    drafter's recent acceptance over all sequences, so a warm engine does not re-learn per job.
// Each step it picks, for each `auto` sequence, the block size with the best expected tokens per
// second, E(b) / cost(b), where E(b) = (1 - alpha^b) / (1 - alpha). A pass of more rows is taken
// to cost at least what any measured smaller one costs, and at most what a larger one costs; where
// two figures disagree, the more recent wins (the other was timed on a cold cache or during a
// noisy minute, and nothing re-timed it since). A block size never measured is assumed to cost
// what the largest smaller one does (optimism, so it gets tried once and measured). The first
// figure of each size is replaced, not averaged, by the second: the first pass of a size is cold.
// Hysteresis: the block changes only for a predicted gain of 10% or more.
//
// A sequence that stopped speculating keeps a stale acceptance, so now and then it probes with
// the cheapest block (2). A probe that neither resumes drafting nor promises to (its draft was
// rejected, or the batch makes drafting too dear whatever the acceptance) doubles the wait
// before the next one, so a useless drafter, or a drafter in a large batch, costs one small pass
// every few hundred steps. The wait a new sequence starts
// with is learned the same way over all sequences (doubled by each failed probe, back to the
// shortest by a promising one), and a new sequence takes the engine's probe clock up where the
// sequences before it left it: a stream of jobs shorter than the wait probes about once per
// wait, neither once per job nor never.
#pragma once

#include <array>
#include <cstdint>

namespace flashq {

struct SequenceSpecState {
  double acceptance = 0;    // set from the policy's drafter acceptance on the first choice
  int64_t block_size = 0;   // current choice; 0 = not chosen yet
  int64_t steps_without_draft = 0;
  int64_t probe_interval = 0;  // steps between probes while not speculating; 0 = not set yet
  bool probing = false;        // the last choice was a probe, not yet judged
  bool probe_hit = false;      // that probe's draft was accepted
};

class SpecPolicy {
 public:
  static constexpr int64_t kFirstProbeInterval = 64;
  static constexpr int64_t kLastProbeInterval = 1024;

  explicit SpecPolicy(int64_t max_block_size);

  void record_target_pass(int64_t rows, double seconds);
  void record_draft_pass(int64_t rows, double seconds);
  void record_acceptance(SequenceSpecState& state, int64_t drafted, int64_t accepted);

  // Block size (1 = no speculation) for one auto sequence among `batch` sequences this step.
  int64_t choose(SequenceSpecState& state, int64_t batch);

  // How to cost a pass of more rows than any measured: as the largest measured smaller one
  // (optimistic: worth trying), or in proportion to its rows (what a compute-bound pass costs).
  enum class Unmeasured { kOptimistic, kProportional };

  // Predicted cost of one step of `batch` sequences with blocks of b (seconds).
  double step_cost(int64_t batch, int64_t b, Unmeasured unmeasured = Unmeasured::kOptimistic) const;
  static double expected_tokens(double acceptance, int64_t b);
  double drafter_acceptance() const { return drafter_acceptance_; }

 private:
  static constexpr int kBuckets = 16;  // rows up to 2^15
  struct Average {
    double seconds = 0;
    int64_t samples = 0;
    int64_t updated_at = 0;  // the policy's pass count when last timed
    bool measured() const { return samples > 0; }
  };
  static int bucket_of(int64_t rows);
  void update(Average& average, double seconds);
  double estimate(const std::array<Average, kBuckets>& table, int64_t rows, Unmeasured unmeasured) const;

  int64_t max_block_size_;
  double drafter_acceptance_ = 0.5;  // prior, before anything was measured
  int64_t first_probe_interval_ = kFirstProbeInterval;  // a new sequence's wait before its first probe
  int64_t idle_steps_ = 0;  // steps of auto sequences without a draft, all sequences together
  int64_t passes_ = 0;      // passes timed so far: the clock of Average::updated_at
  std::array<Average, kBuckets> target_;
  std::array<Average, kBuckets> draft_;
};

}  // namespace flashq
