// The speculative engine with continuous batching (DESIGN.md §5, DFLASH.md §2.4). Per step:
// admit waiting sequences (prefill, one pass each), draft a block for every speculating sequence
// (one drafter pass for all), verify every sequence's block in one batched target pass, accept,
// commit and truncate, emit one event per sequence, retire finished sequences.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "worker/engine/proposer.h"
#include "worker/engine/row_argmax.h"
#include "worker/engine/row_sampler.h"
#include "worker/engine/sequence.h"
#include "worker/engine/spec_policy.h"
#include "worker/model/cache_pool.h"
#include "worker/model/target_model.h"
#include "worker/tokenizer/tokenizer.h"

namespace flashq {

// What one step produced for one sequence.
struct StepEvent {
  uint64_t id;
  std::vector<int32_t> token_ids;  // new output tokens
  std::string text;                // new text, whole characters only
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
  bool cancelled = false;
};

// One JSON-able record per engine step per speculating sequence (flashq generate --trace).
struct TraceRecord {
  uint64_t id;
  int64_t start;
  std::vector<int32_t> draft;
  int64_t accepted;
  int32_t bonus;
};

// What the `auto` policy is told a pass of `rows` rows took, given the seconds measured. By
// default the measured seconds; a test stands a cost model in for the machine's clock.
using PassTimer = std::function<double(int64_t rows, double measured_seconds)>;

struct EngineOptions {
  int64_t max_slots = 8;  // sequences decoding at once
  std::function<void(const StepEvent&)> on_event;
  std::function<void(const TraceRecord&)> on_trace;
  PassTimer target_pass_timer;
  PassTimer draft_pass_timer;
  // Where the target's KV caches come from, whole at admission (the drafter's, through its
  // proposer's use_cache_pool); null: each cache grows on demand. With a pool, a sequence waits
  // in the queue until its caches fit.
  CachePool* cache_pool = nullptr;
  // Sample tokens on the backend (RowSampler), so that only ids reach the host, where no draft
  // of a sampling sequence needs its distribution there. Default: on a GPU backend (on the CPU
  // the logits are host memory already, and the host Sampler draws in double precision).
  std::optional<bool> sample_on_backend;
};

struct PhaseSeconds {
  double prefill = 0, draft = 0, verify = 0, other = 0;
};

struct FinishedSequence {
  uint64_t id;
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish_reason;
  bool cancelled;
  int64_t prompt_tokens;
  SpecStats spec_stats;
  double time_to_first_token_s;
  double total_s;
};

class Engine {
 public:
  // `proposer` may be null (no speculation at all).
  Engine(TargetModel& model, const Tokenizer& tokenizer, Proposer* proposer, EngineOptions options = {});
  ~Engine();

  // Queues a sequence; validates it first (kInvalidArgument naming the problem).
  void add(uint64_t id, SequenceRequest request);
  // Takes effect at the next step; the sequence ends with a cancelled event.
  void cancel(uint64_t id);
  bool idle() const { return waiting_.empty() && running_.empty(); }
  size_t running() const { return running_.size(); }

  void step();
  // Runs steps until every sequence finished.
  void run_until_idle();

  // Sequences finished since the last call.
  std::vector<FinishedSequence> take_finished();
  const PhaseSeconds& phase_seconds() const { return phases_; }

 private:
  void admit();
  // The sequence's caches (and proposer state), whole from the pool if there is one; false when
  // they do not fit now.
  bool take_caches(Sequence& sequence);
  void prefill(Sequence& sequence, int64_t batch);
  void decode_step();
  bool speculates(const Sequence& sequence) const;
  int64_t block_size_for(Sequence& sequence, int64_t batch);
  // An `auto` sequence in a batch of this size where no drafting could pay: the engine keeps no
  // hidden states for it (Proposer::observe_without_taps).
  bool out_of_drafting(const Sequence& sequence, int64_t batch) const;
  // Appends tokens to the output in order, applying every stop; returns the ids emitted.
  void emit(Sequence& sequence, std::span<const int32_t> tokens, StepEvent& event);
  void finish(Sequence& sequence, FinishReason reason, StepEvent& event);
  void retire();
  // Brings what the step needs of the target's logits to the host: with every sequence greedy,
  // each row's argmax only (into choices_: 4 bytes a row, not a vocabulary); else every row
  // (into logits_, and choices_ computed here).
  void fetch_logits(const Tensor& logits, bool all_greedy);
  // Samples every row of the pass on the backend (greedy rows: the argmax) into choices_; only
  // for passes whose sampling sequences draft nothing.
  void sample_on_backend(const Tensor& logits, std::span<Sequence* const> active,
                         std::span<const SequenceChunk> chunks);

  TargetModel& model_;
  const Tokenizer& tokenizer_;
  Proposer* proposer_;
  EngineOptions options_;
  SpecPolicy policy_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<FinishedSequence> finished_;
  PhaseSeconds phases_;
  std::vector<float> logits_;
  std::vector<int32_t> choices_;  // argmax of each row of the last pass
  RowArgmax row_argmax_;
  RowSampler row_sampler_;
  bool sample_on_backend_;
};

}  // namespace flashq
