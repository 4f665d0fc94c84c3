// The speculative engine with continuous batching (docs/architecture.md, docs/dflash.md §2.4). Per step:
// admit waiting sequences (prefill, one pass each); then decode, role by role over one record per
// sequence (SequenceStep): plan the block sizes (StepPlanner), propose a draft for every
// speculating sequence (one drafter pass for all), verify every sequence's block in one batched
// target pass (Verifier), accept and commit (truncate the target KV, the proposer observes the
// committed tokens), emit one event per sequence (step_event.h); retire finished sequences.
// Token ids in, token ids out: the text (detokenizing, stop strings) is its callers' work, off
// its thread (worker/text/text_stream.h), and a stop string found there ends a sequence through
// stop().
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
#include "worker/model/paged_kv_store.h"
#include "worker/model/target_model.h"

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
  // Paged target KV caches over this store (kv_cache.h), in place of whole-length ones: a
  // sequence takes blocks as it grows, waits at admission until its blocks (and one block of
  // growth for every running sequence) can be had, and when a running sequence finds no block
  // for its next step the one admitted last is preempted: its blocks go back (its full blocks
  // stay cached) and it waits first in line, to be recomputed from its tokens so far without
  // emitting anything again. A sequence that cannot grow while holding the whole pool finishes
  // with `length`. The store must outlive the engine.
  PagedKvStore* paged_cache = nullptr;
  // With a paged cache: a new sequence starts on the longest cached prefix of its prompt and
  // prefills only the rest, and full blocks of committed tokens are registered for others.
  bool prefix_caching = true;
  // Sample tokens on the backend (RowSampler), so that only ids reach the host, where no draft
  // of a sampling sequence needs its distribution there. Default: on a GPU backend (on the CPU
  // the logits are host memory already, and the host Sampler draws in double precision).
  std::optional<bool> sample_on_backend;
  // Constrained sequences' drafts kept to their constraint position by position (the drafter's
  // rows masked, token_constraint.h); off, only the target's rows are masked and a forbidden
  // drafted token is simply rejected (what masking the drafter gains is measured against it).
  bool mask_drafts = true;
  // A constrained sequence that drafts nothing this step verifies, after its token, the run of
  // tokens its constraint forces (up to kMaxForcedRun): one pass for all of them (jump-forward).
  bool jump_forward = true;
};

// The longest forced run one step appends.
inline constexpr int64_t kMaxForcedRun = 16;

// The paged cache's counters (BlockPoolStats: blocks used, free and cached, prefix lookups and
// hits in tokens), the engine's preemptions, and the hits that brought the drafter's context.
struct PagedCacheStats {
  BlockPoolStats blocks;
  int64_t preemptions = 0;
  int64_t draft_hit_tokens = 0;  // positions whose drafter context came with a cached prefix
};

struct PhaseSeconds {
  double prefill = 0, draft = 0, verify = 0, other = 0;
};

struct FinishedSequence {
  uint64_t id;
  // Every token the engine emitted; after an Engine::stop, those past the stop string too (its
  // caller kept count of what belongs to the output).
  std::vector<int32_t> tokens;
  FinishReason finish_reason;
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
  Engine(TargetModel& model, Proposer* proposer, EngineOptions options = {});
  ~Engine();

  // Queues a sequence; validates it first (kInvalidArgument naming the problem).
  void add(uint64_t id, SequenceRequest request);
  // Takes effect at the next step; the sequence ends with a cancelled event.
  void cancel(uint64_t id);
  // A stop string ended the sequence's text (its caller streams the text: TextStream): it ends
  // with `stop` at the start of the next step, before anything more is computed for it. What it
  // emitted since the stop string is the caller's to discard. Unknown ids are ignored.
  void stop(uint64_t id);
  bool idle() const { return waiting_.empty() && running_.empty(); }
  size_t running() const { return running_.size(); }

  void step();
  // Runs steps until every sequence finished.
  void run_until_idle();

  // Sequences finished since the last call.
  std::vector<FinishedSequence> take_finished();
  const PhaseSeconds& phase_seconds() const { return phases_; }
  // Nothing without a paged cache.
  std::optional<PagedCacheStats> cache_stats() const;

 private:
  void request_end(uint64_t id, FinishReason reason);
  void admit();
  // The sequence's caches (and proposer state), whole from the pool if there is one, or the
  // blocks of its tokens beyond their cached prefix; false when they do not fit now.
  bool take_caches(Sequence& sequence);
  // Runs the sequence's context beyond what its cache holds (one pass), and for a new sequence
  // emits its first token.
  void prefill(Sequence& sequence, int64_t batch);
  // With a paged cache: every planned block's positions reserved, preempting the sequence
  // admitted last while some cannot be (its step leaves `steps`; a sequence alone in the pool
  // finishes with `length`).
  void reserve_blocks(std::vector<SequenceStep>& steps);
  // Gives the sequence's caches back and queues it first in line, to resume.
  void preempt(Sequence& sequence);
  // Gives the sequence's blocks back, its partial last block cached as a tail with prefix caching.
  void release_blocks(Sequence& sequence);
  // Registers the sequence's full blocks of committed tokens in the prefix cache.
  void register_blocks(Sequence& sequence);
  // Copies the drafter's context rows of the sequence's registered blocks into the store, so that
  // a later sequence adopting them need not inject them again (before its caches go back).
  void keep_draft_context(Sequence& sequence);
  // One decode step of every running sequence: plan, propose, verify, accept and commit, emit.
  void decode_step();
  // Ends each sequence whose context is full (planned block size 0) with `length`.
  void end_full_contexts(std::span<SequenceStep> steps);
  // Jump-forward: each constrained step without a draft takes the run of tokens its constraint
  // forces as its draft, within max_tokens and the context.
  void add_forced_runs(std::span<SequenceStep> steps);
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
  Proposer* proposer_;
  EngineOptions options_;
  SpecPolicy policy_;
  StepPlanner planner_;
  Verifier verifier_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<FinishedSequence> finished_;
  PhaseSeconds phases_;
  uint64_t admissions_ = 0;
  int64_t preemptions_ = 0;
  int64_t draft_hit_tokens_ = 0;
};

}  // namespace flashq
