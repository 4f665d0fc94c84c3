// The speculative engine with continuous batching (docs/architecture.md, docs/dflash.md §2.4). Per step:
// admit waiting sequences (prefill, one pass each); then decode, role by role over one record per
// sequence (SequenceStep): plan the block sizes (StepPlanner), propose a draft for every
// speculating sequence (one drafter pass for all), verify every sequence's block in one batched
// target pass (Verifier), accept and commit (truncate the target KV, the proposer observes the
// committed tokens), emit one event per sequence (step_event.h); retire finished sequences.
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
#include "worker/engine/sequence.h"
#include "worker/engine/sequence_step.h"
#include "worker/engine/spec_policy.h"
#include "worker/engine/step_event.h"
#include "worker/engine/step_plan.h"
#include "worker/engine/verifier.h"
#include "worker/model/cache_pool.h"
#include "worker/model/target_model.h"
#include "worker/tokenizer/tokenizer.h"

namespace flashq {

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
  // From Engine::add: to the first token, to the end, and waiting for admission (a slot and
  // cache memory).
  double time_to_first_token_s;
  double total_s;
  double queue_s;
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
  // One decode step of every running sequence: plan, propose, verify, accept and commit, emit.
  void decode_step();
  // Ends each sequence whose context is full (planned block size 0) with `length`.
  void end_full_contexts(std::span<SequenceStep> steps);
  // One drafter pass for every sequence that drafts this step; the pass's time goes to the policy.
  void propose(std::span<SequenceStep> steps);
  // The target's tap layers, if any sequence of the pass keeps hidden states.
  std::vector<int64_t> tap_layers_for(std::span<SequenceStep* const> verified) const;
  // The verified block's commit (docs/dflash.md §2.4): the target KV keeps x, d_1..d_a; the proposer
  // will observe them (into `observations`); the statistics and the policy count the draft.
  void commit(SequenceStep& step, const Verifier::Pass& pass, std::vector<Observation>& observations,
              std::vector<Observation>& observations_without_taps);
  // The output the step adds: d_1..d_a and the bonus token, as one event.
  void emit(SequenceStep& step);
  void publish(const StepEvent& event) const;
  void retire();

  TargetModel& model_;
  const Tokenizer& tokenizer_;
  Proposer* proposer_;
  EngineOptions options_;
  SpecPolicy policy_;
  StepPlanner planner_;
  Verifier verifier_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<FinishedSequence> finished_;
  PhaseSeconds phases_;
};

}  // namespace flashq
