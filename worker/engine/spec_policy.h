// When and how far to speculate (`spec: auto`). DFlash pays off when a verify pass of B rows costs
// little more than a decode pass and the drafter's tokens are accepted; both change with the
// batch size and the text. The policy measures instead of assuming:
//  - the cost of target passes and drafter passes by row count (one figure per row count up to
//    32 rows, per power of two above), as the engine runs them; each figure follows a faster
//    pass quickly and a slower one slowly, since noise only adds time;
//  - each sequence's acceptance rate (a moving average of accepted / drafted), starting from the
//    drafter's recent acceptance over all sequences, so a warm engine does not re-learn per job.
// Each step it picks, for each `auto` sequence, the block size b that gives the step the most
// tokens per second: the other sequences' tokens (one each) plus E(b) = (1 - alpha^b) /
// (1 - alpha), over the cost of a target pass of the other rows plus b, and of drafting b rows.
// A sequence in a batch thus pays for its own extra rows: on a compute-bound CPU a batch of 16
// doubles its pass for one sequence's block of 16, on a GPU the same rows come nearly free.
// Costs between measured row counts are interpolated; beyond the largest, they follow the trend
// of the last two (between flat and in proportion to the rows), or, with one figure only, are
// taken as flat (optimism: the block gets tried, and so measured). A pass of more rows never
// costs less than one of fewer: where two figures disagree, the more recent bounds the older
// (that one was timed on a cold cache or during a noisy minute). The first figure of each size is
// replaced, not averaged, by the second: the first pass of a size is cold. Hysteresis: the block
// changes only for a predicted gain of 10% or more.
//
// A sequence that stopped speculating keeps a stale acceptance, so now and then it probes with
// the cheapest block (2), unless no acceptance would make drafting pay at the batch size (by
// the trend of the measured passes): then a probe could only cost, and it waits. A probe that neither resumes drafting nor promises to (its draft was
// rejected, or the batch makes drafting too dear whatever the acceptance) doubles the wait
// before the next one, so a useless drafter, or a drafter in a large batch, costs one small pass
// every few hundred steps. The wait a new sequence starts with is learned the same way over all
// sequences (doubled by each failed probe, back to the shortest by a promising one), and a new
// sequence takes the engine's probe clock up where the sequences before it left it: a stream of
// jobs shorter than the wait probes about once per wait, neither once per job nor never.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

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

  // Whether any block could pay at this batch size even if every draft were accepted, by the
  // trend of the measured passes (true before anything is measured). Where it cannot, an `auto`
  // sequence that is not drafting stays out entirely (the engine then keeps no hidden states
  // for it). Worked out once per batch size per timed pass.
  bool drafting_could_pay(int64_t batch) const;

  // How to cost a pass of more rows than any measured: by the trend of the measured ones (flat
  // with a single figure: worth trying), or in proportion to its rows (what a compute-bound pass
  // costs).
  enum class Unmeasured { kTrend, kProportional };

  // Predicted cost of a step of `batch` sequences in which one drafts a block of b and the others
  // run one row each (seconds).
  double step_cost(int64_t batch, int64_t b, Unmeasured unmeasured = Unmeasured::kTrend) const;
  static double expected_tokens(double acceptance, int64_t b);
  double drafter_acceptance() const { return drafter_acceptance_; }

 private:
  static constexpr int kExactRows = 32;                 // one bucket per row count up to here,
  static constexpr int kBuckets = kExactRows + 11;      // then one per power of two up to 2^15
  struct Average {
    double seconds = 0;
    double rows = 0;  // mean rows of the passes timed (a bucket above kExactRows spans several)
    int64_t samples = 0;
    int64_t updated_at = 0;  // the policy's pass count when last timed
    bool measured() const { return samples > 0; }
  };
  static int bucket_of(int64_t rows);
  void update(Average& average, int64_t rows, double seconds);
  // Cost against rows, from a table's figures; rebuilt when a pass was timed since.
  struct CostCurve {
    struct Point {
      double rows, seconds;
    };
    std::vector<Point> points;
    void refresh(const std::array<Average, kBuckets>& table);
    double at(int64_t rows, Unmeasured unmeasured) const;
  };
  enum class Curve { kTarget, kDraft };
  const CostCurve& curve(Curve which) const;

  int64_t max_block_size_;
  double drafter_acceptance_ = 0.5;  // prior, before anything was measured
  int64_t first_probe_interval_ = kFirstProbeInterval;  // a new sequence's wait before its first probe
  int64_t idle_steps_ = 0;  // steps of auto sequences without a draft, all sequences together
  int64_t passes_ = 0;      // passes timed so far: the clock of Average::updated_at
  std::array<Average, kBuckets> target_;
  std::array<Average, kBuckets> draft_;
  mutable CostCurve target_curve_, draft_curve_;
  mutable int64_t curves_at_ = -1;  // passes_ when the curves were built
  mutable std::vector<int8_t> could_pay_by_batch_;  // drafting_could_pay per batch: -1 unknown, 0, 1
  mutable int64_t could_pay_at_ = -1;               // passes_ when it was last cleared
};

}  // namespace flashq
