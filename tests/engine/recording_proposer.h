// A proposer for reference checks: delegates to the DFlash proposer and keeps, step after step,
// the drafter's logits and (DFlash2) the candidate selector's scores.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "worker/engine/dflash_proposer.h"

namespace flashq::testing {

class RecordingProposer final : public Proposer {
 public:
  explicit RecordingProposer(DFlashProposer& inner) : inner_(inner) { inner_.keep_logits(true); }
  int64_t max_block_size() const override { return inner_.max_block_size(); }
  std::vector<int64_t> tap_layers() const override { return inner_.tap_layers(); }
  std::unique_ptr<ProposerState> start_sequence(int64_t max_length) override {
    return inner_.start_sequence(max_length);
  }
  void observe(std::span<const Observation> observations) override { inner_.observe(observations); }
  void observe_without_taps(std::span<const Observation> observations) override {
    inner_.observe_without_taps(observations);
  }
  void propose(std::span<const ProposalRequest> requests) override {
    inner_.propose(requests);
    logits.insert(logits.end(), inner_.last_logits().begin(), inner_.last_logits().end());
    const std::vector<float>& step_scores = inner_.last_selector_scores();
    scores.insert(scores.end(), step_scores.begin(), step_scores.end());
  }
  std::vector<float> logits;
  std::vector<float> scores;

 private:
  DFlashProposer& inner_;
};

}  // namespace flashq::testing
