#include "worker/engine/dflash_proposer.h"

#include "shared/error.h"
#include "worker/engine/sampler.h"

namespace flashq {

// Committed tokens wait here, as their taps, until the sequence next drafts: a sequence that
// `auto` keeps from speculating then costs a copy per step instead of an injection.
struct DraftContext final : ProposerState {
  DraftContext(KvCache c, Tensor buffer) : cache(std::move(c)), pending(std::move(buffer)) {}
  KvCache cache;
  Tensor pending;  // [kPendingRows, taps * hidden]; rows 0 .. pending_rows-1 are waiting
  int64_t pending_rows = 0;

  int64_t covered() const { return cache.length() + pending_rows; }
};

namespace {

DraftContext& context_of(ProposerState* state) { return *static_cast<DraftContext*>(state); }

}  // namespace

std::unique_ptr<ProposerState> DFlashProposer::start_sequence(int64_t max_length) {
  return std::make_unique<DraftContext>(drafter_.make_context_cache(max_length),
                                        drafter_.backend().allocate(DType::kF32, {kPendingRows, drafter_.tap_columns()}));
}

void DFlashProposer::inject_pending(std::span<DraftContext* const> contexts) {
  std::vector<ContextChunk> chunks;
  for (DraftContext* c : contexts) {
    if (c->pending_rows > 0) chunks.push_back({c->pending.slice_rows(0, c->pending_rows), &c->cache});
  }
  drafter_.inject(chunks);
  for (DraftContext* c : contexts) c->pending_rows = 0;
}

void DFlashProposer::observe(std::span<const Observation> observations) {
  std::vector<DraftContext*> full;  // pending rows that must be injected first
  std::vector<ContextChunk> direct;  // runs too long to wait
  for (const Observation& o : observations) {
    DraftContext& c = context_of(o.state);
    check_invariant(c.covered() == o.first_position, "draft context covers every committed token");
    const int64_t n = o.taps.dim(0);
    if (c.pending_rows + n > kPendingRows) full.push_back(&c);
    if (n > kPendingRows) direct.push_back({o.taps, &c.cache});
  }
  inject_pending(full);
  drafter_.inject(direct);
  for (const Observation& o : observations) {
    DraftContext& c = context_of(o.state);
    const int64_t n = o.taps.dim(0);
    if (n > kPendingRows) continue;
    // Taps are views into the target's workspace, valid until its next pass: copy them out.
    drafter_.backend().copy_rows(o.taps, c.pending, c.pending_rows);
    c.pending_rows += n;
  }
}

void DFlashProposer::propose(std::span<const ProposalRequest> requests) {
  std::vector<DraftContext*> contexts;
  for (const ProposalRequest& r : requests) contexts.push_back(&context_of(r.state));
  inject_pending(contexts);
  std::vector<DraftBlock> blocks;
  for (const ProposalRequest& r : requests) {
    KvCache& cache = context_of(r.state).cache;
    check_invariant(cache.length() == r.start, "draft starts where the context ends");
    blocks.push_back({r.last_token, r.block_size, &cache});
  }
  Tensor logits = drafter_.draft(blocks);
  const int64_t vocab = logits.cols();
  logits_.resize(static_cast<size_t>(logits.numel()));
  drafter_.backend().copy_to_host(logits, logits_.data());
  int64_t row = 0;
  for (const ProposalRequest& r : requests) {
    r.draft->clear();
    for (int64_t j = 1; j < r.block_size; ++j, ++row) {
      r.draft->push_back(argmax(std::span<const float>(logits_.data() + row * vocab, static_cast<size_t>(vocab))));
    }
  }
}

}  // namespace flashq
