// A proposer double that replays the target's own continuation, with wrong draft tokens at chosen
// positions, so a test decides exactly which draft tokens the target must accept (docs/dflash.md §2.4).
// It also checks the engine's side of the proposer protocol (proposer.h): observations cover the
// committed positions in order, without gaps or repeats; every proposal starts right after the
// last committed token; and (for greedy runs) what was committed is the known continuation.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "worker/engine/proposer.h"

namespace flashq::testing {

// What one sequence should be drafted: `tokens` is the prompt followed by the target's own
// continuation (position p holds tokens[p]); the draft for any position in `wrong_positions` is
// (true token + 1) % vocab instead.
struct ReplayScript {
  std::vector<int32_t> tokens;
  std::set<int64_t> wrong_positions;
};

struct ReplayOptions {
  int64_t block_size = 8;
  int64_t vocab = 0;
  std::vector<int64_t> tap_layers;  // empty: the proposer needs no hidden states
  int64_t target_hidden = 0;        // checks the width of the taps when tap_layers is not empty
  // Greedy runs commit exactly the script; sampled runs commit whatever the target drew.
  bool committed_tokens_follow_script = true;
};

// Everything the engine told the proposer about one sequence.
struct ReplayLog {
  struct Proposal {
    int64_t start;
    int32_t last_token;
    int64_t block_size;
    std::vector<int32_t> draft;
  };
  std::vector<int32_t> committed;  // every observed token, in position order
  std::vector<Proposal> proposals;
  int64_t observed_without_taps = 0;  // of `committed`
};

class ReplayProposer final : public Proposer {
 public:
  // The i-th sequence started is served by scripts[i].
  ReplayProposer(std::vector<ReplayScript> scripts, ReplayOptions options)
      : scripts_(std::move(scripts)), options_(std::move(options)), logs_(scripts_.size()) {}

  int64_t max_block_size() const override { return options_.block_size; }
  std::vector<int64_t> tap_layers() const override { return options_.tap_layers; }

  std::unique_ptr<ProposerState> start_sequence(int64_t /*max_length*/) override {
    if (started_ >= scripts_.size()) {
      ADD_FAILURE() << "ReplayProposer: sequence " << started_ << " started, but only " << scripts_.size()
                    << " scripts were given";
      scripts_.emplace_back();
      logs_.emplace_back();
    }
    return std::make_unique<State>(started_++);
  }

  void observe(std::span<const Observation> observations) override {
    for (const Observation& o : observations) {
      const size_t index = index_of(o.state);
      ReplayLog& log = logs_[index];
      const ReplayScript& script = scripts_[index];
      const auto committed = static_cast<int64_t>(log.committed.size());
      EXPECT_EQ(o.first_position, committed)
          << "sequence " << index << ": an observation must start right after the last committed position";
      EXPECT_FALSE(o.tokens.empty()) << "sequence " << index << ": an observation commits at least one token";
      if (!options_.tap_layers.empty()) {
        const auto width = static_cast<int64_t>(options_.tap_layers.size()) * options_.target_hidden;
        EXPECT_TRUE(o.taps.defined() && o.taps.rank() == 2 && o.taps.dim(0) == static_cast<int64_t>(o.tokens.size()) &&
                    o.taps.dim(1) == width)
            << "sequence " << index << ": taps must be [" << o.tokens.size() << ", " << width << "]";
      }
      for (size_t k = 0; k < o.tokens.size(); ++k) {
        const int64_t position = o.first_position + static_cast<int64_t>(k);
        if (options_.committed_tokens_follow_script && position < static_cast<int64_t>(script.tokens.size())) {
          EXPECT_EQ(o.tokens[k], script.tokens[static_cast<size_t>(position)])
              << "sequence " << index << ": committed token at position " << position
              << " differs from the target's own continuation";
        }
        log.committed.push_back(o.tokens[k]);
      }
    }
  }

  // Tokens the engine committed without capturing hidden states: logged like any others.
  void observe_without_taps(std::span<const Observation> observations) override {
    for (const Observation& o : observations) {
      const size_t index = index_of(o.state);
      ReplayLog& log = logs_[index];
      EXPECT_EQ(o.first_position, static_cast<int64_t>(log.committed.size()))
          << "sequence " << index << ": an observation must start right after the last committed position";
      EXPECT_FALSE(o.taps.defined()) << "sequence " << index << ": taps given to observe_without_taps";
      log.committed.insert(log.committed.end(), o.tokens.begin(), o.tokens.end());
      log.observed_without_taps += static_cast<int64_t>(o.tokens.size());
    }
  }

  void propose(std::span<const ProposalRequest> requests) override {
    for (const ProposalRequest& r : requests) {
      const size_t index = index_of(r.state);
      ReplayLog& log = logs_[index];
      const ReplayScript& script = scripts_[index];
      EXPECT_EQ(r.start, static_cast<int64_t>(log.committed.size()))
          << "sequence " << index << ": a proposal must start at the first uncommitted position";
      EXPECT_TRUE(r.block_size >= 2 && r.block_size <= options_.block_size)
          << "sequence " << index << ": block size " << r.block_size << " outside 2.." << options_.block_size;
      if (options_.committed_tokens_follow_script && r.start < static_cast<int64_t>(script.tokens.size())) {
        EXPECT_EQ(r.last_token, script.tokens[static_cast<size_t>(r.start)])
            << "sequence " << index << ": the last token (position " << r.start << ") is not the target's choice";
      }
      r.draft->assign(static_cast<size_t>(std::max<int64_t>(r.block_size - 1, 0)), 0);
      for (int64_t j = 1; j < r.block_size; ++j) {
        const int64_t position = r.start + j;
        if (position >= static_cast<int64_t>(script.tokens.size())) continue;  // unknown: any token will do
        int32_t token = script.tokens[static_cast<size_t>(position)];
        if (script.wrong_positions.contains(position)) token = static_cast<int32_t>((token + 1) % options_.vocab);
        (*r.draft)[static_cast<size_t>(j - 1)] = token;
      }
      log.proposals.push_back({r.start, r.last_token, r.block_size, *r.draft});
    }
  }

  // The log of the i-th sequence started.
  const ReplayLog& log(size_t index) const { return logs_.at(index); }
  size_t sequences_started() const { return started_; }

 private:
  struct State final : ProposerState {
    explicit State(size_t i) : index(i) {}
    size_t index;
  };

  size_t index_of(ProposerState* state) const {
    const auto* replay = dynamic_cast<const State*>(state);
    if (replay == nullptr) throw std::logic_error("ReplayProposer: a state it did not create");
    return replay->index;
  }

  std::vector<ReplayScript> scripts_;
  ReplayOptions options_;
  std::vector<ReplayLog> logs_;
  size_t started_ = 0;
};

}  // namespace flashq::testing
