#include "worker/engine/dflash_proposer.h"

#include "shared/error.h"
#include "worker/engine/sampler.h"

namespace flashq {
namespace {

struct DraftContext final : ProposerState {
  explicit DraftContext(KvCache c) : cache(std::move(c)) {}
  KvCache cache;
};

KvCache& context_of(ProposerState* state) { return static_cast<DraftContext*>(state)->cache; }

}  // namespace

std::unique_ptr<ProposerState> DFlashProposer::start_sequence(int64_t max_length) {
  return std::make_unique<DraftContext>(drafter_.make_context_cache(max_length));
}

void DFlashProposer::observe(std::span<const Observation> observations) {
  std::vector<ContextChunk> chunks;
  for (const Observation& o : observations) {
    check_invariant(context_of(o.state).length() == o.first_position, "draft context covers every committed token");
    chunks.push_back({o.taps, &context_of(o.state)});
  }
  drafter_.inject(chunks);
}

void DFlashProposer::propose(std::span<const ProposalRequest> requests) {
  std::vector<DraftBlock> blocks;
  for (const ProposalRequest& r : requests) {
    check_invariant(context_of(r.state).length() == r.start, "draft starts where the context ends");
    blocks.push_back({r.last_token, r.block_size, &context_of(r.state)});
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
