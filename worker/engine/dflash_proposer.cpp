#include "worker/engine/dflash_proposer.h"

#include <algorithm>
#include <optional>

#include "shared/error.h"

namespace flashq {

// A sequence's draft context cache, and the taps of its latest committed tokens not yet
// injected: a ring of kRecentRows rows whose oldest, at `head`, is at position
// next_position - recent_rows.
struct DraftContext final : ProposerState {
  DraftContext(KvCache c, Tensor ring) : cache(std::move(c)), recent(std::move(ring)) {}
  KvCache cache;
  Tensor recent;  // [kRecentRows, taps * hidden]
  int64_t head = 0;
  int64_t recent_rows = 0;
  int64_t next_position = 0;  // of the next committed token to observe
  // The first position the context skipped (taps dropped, or observed without any): rows before
  // it are positions in order, what a paged cache's blocks can keep. None: nothing skipped.
  std::optional<int64_t> gap_at;
};

namespace {

DraftContext& context_of(ProposerState* state) { return *static_cast<DraftContext*>(state); }

}  // namespace

std::unique_ptr<ProposerState> DFlashProposer::start_sequence(int64_t max_length) {
  KvCache cache = drafter_.make_context_cache(max_length);
  if (pool_ && !cache.take_whole(*pool_)) return nullptr;
  return std::make_unique<DraftContext>(
      std::move(cache), drafter_.backend().allocate(DType::kF32, {kRecentRows, drafter_.tap_columns()}));
}

int64_t DFlashProposer::pooled_bytes(int64_t max_length) const {
  return pool_ ? drafter_.make_context_cache(max_length).whole_bytes() : 0;
}

// The ring holds at most two runs of rows (before and after its wrap): injected as two batches,
// so that every context receives its rows in position order.
void DFlashProposer::inject_recent(std::span<DraftContext* const> contexts) {
  std::vector<ContextChunk> older, newer;
  for (DraftContext* c : contexts) {
    if (c->recent_rows == 0) continue;
    const int64_t first_position = c->next_position - c->recent_rows;
    const int64_t before_wrap = std::min(c->recent_rows, kRecentRows - c->head);
    older.push_back({c->recent.slice_rows(c->head, before_wrap), &c->cache, first_position});
    if (before_wrap < c->recent_rows) {
      newer.push_back({c->recent.slice_rows(0, c->recent_rows - before_wrap), &c->cache, first_position + before_wrap});
    }
    c->head = 0;
    c->recent_rows = 0;
  }
  drafter_.inject(older);
  drafter_.inject(newer);
}

void DFlashProposer::observe(std::span<const Observation> observations) {
  std::vector<DraftContext*> long_runs;  // a run longer than the ring: injected as it comes
  std::vector<ContextChunk> direct;
  for (const Observation& o : observations) {
    DraftContext& c = context_of(o.state);
    check_invariant(c.next_position == o.first_position, "the proposer observes every committed token in order");
    if (o.taps.dim(0) > kRecentRows) {
      long_runs.push_back(&c);
      direct.push_back({o.taps, &c.cache, o.first_position});
    }
  }
  inject_recent(long_runs);
  drafter_.inject(direct);
  for (const Observation& o : observations) {
    DraftContext& c = context_of(o.state);
    const int64_t n = o.taps.dim(0);
    c.next_position += n;
    if (n > kRecentRows) continue;
    // Taps are views into the target's workspace, valid until its next pass: copy them out. A
    // full ring drops its oldest rows.
    for (int64_t copied = 0; copied < n;) {
      const int64_t tail = (c.head + c.recent_rows) % kRecentRows;
      const int64_t count = std::min(n - copied, kRecentRows - tail);
      drafter_.backend().copy_rows(o.taps.slice_rows(copied, count), c.recent, tail);
      copied += count;
      const int64_t overflow = std::max<int64_t>(0, c.recent_rows + count - kRecentRows);
      if (overflow > 0 && !c.gap_at) c.gap_at = c.cache.length();  // the oldest taps not injected are dropped
      c.head = (c.head + overflow) % kRecentRows;
      c.recent_rows += count - overflow;
    }
  }
}

void DFlashProposer::observe_without_taps(std::span<const Observation> observations) {
  for (const Observation& o : observations) {
    DraftContext& c = context_of(o.state);
    check_invariant(c.next_position == o.first_position, "the proposer observes every committed token in order");
    if (!c.gap_at) c.gap_at = c.cache.length();  // the ring's taps not injected, and these, are skipped
    c.next_position += static_cast<int64_t>(o.tokens.size());
    c.head = 0;
    c.recent_rows = 0;
  }
}

void DFlashProposer::catch_up(std::span<const ProposalRequest> requests) {
  std::vector<DraftContext*> contexts;
  for (const ProposalRequest& r : requests) contexts.push_back(&context_of(r.state));
  inject_recent(contexts);
}

void DFlashProposer::propose(std::span<const ProposalRequest> requests) {
  catch_up(requests);
  std::vector<DraftBlock> blocks;
  for (const ProposalRequest& r : requests) {
    DraftContext& c = context_of(r.state);
    check_invariant(c.next_position == r.start, "a draft starts after the last observed token");
    blocks.push_back({r.last_token, r.block_size, &c.cache, r.start});
  }
  Tensor logits = drafter_.draft(blocks);
  const bool any_constrained =
      std::any_of(requests.begin(), requests.end(), [](const ProposalRequest& r) { return r.constraint != nullptr; });
  if (keep_logits_ || any_constrained) {
    logits_.resize(static_cast<size_t>(logits.numel()));
    drafter_.backend().copy_to_host(logits, logits_.data());
    const DrafterConfig& config = drafter_.config();
    if (config.output_multiplier != 1.0 || config.final_logit_softcapping > 0.0) {
      for (float& logit : logits_) logit = drafter_logit(config, logit);
    }
  }
  if (drafter_.selector() != nullptr) {
    choose_by_selector(requests, logits);
  } else {
    choose_by_argmax(requests, logits);
  }
}

void DFlashProposer::choose_by_argmax(std::span<const ProposalRequest> requests, const Tensor& logits) {
  const std::vector<int32_t>& choices = row_argmax_(drafter_.backend(), logits);
  size_t row = 0;
  for (const ProposalRequest& r : requests) {
    const auto rows = static_cast<size_t>(r.block_size - 1);
    if (r.constraint) {
      choose_constrained(r, row, logits.cols());
    } else {
      r.draft->assign(choices.begin() + static_cast<std::ptrdiff_t>(row),
                      choices.begin() + static_cast<std::ptrdiff_t>(row + rows));
    }
    row += rows;
  }
}

void DFlashProposer::choose_constrained(const ProposalRequest& r, size_t first_row, int64_t vocab) {
  if (!mask_) mask_ = std::make_unique<TokenMask>(vocab);
  // Position by position, each row masked where the draft has got to.
  const auto rows = static_cast<size_t>(r.block_size - 1);
  const std::span<const float> block(logits_.data() + first_row * static_cast<size_t>(vocab),
                                     rows * static_cast<size_t>(vocab));
  choose_constrained_draft(*r.constraint, r.end_ids, block, vocab, *mask_, *r.draft);
}

void DFlashProposer::choose_by_selector(std::span<const ProposalRequest> requests, const Tensor& logits) {
  // Each sampled block's uniforms, drawn from its sequence's stream before the walk.
  std::vector<std::vector<double>> uniforms(requests.size());
  std::vector<SelectorBlock> blocks;
  for (size_t i = 0; i < requests.size(); ++i) {
    const ProposalRequest& r = requests[i];
    const bool sampled = r.temperature > 0.0f && r.sampler != nullptr && r.draft_q != nullptr && !r.constraint;
    if (sampled) {
      for (int64_t j = 1; j < r.block_size; ++j) uniforms[i].push_back(r.sampler->uniform());
    }
    blocks.push_back({r.last_token, r.block_size - 1, sampled ? r.temperature : 0.0f, uniforms[i]});
  }
  const std::vector<SelectorDraft> drafts = drafter_.selector()->select(drafter_.last_hidden(), logits, blocks);
  const auto k = static_cast<size_t>(drafter_.config().dflash2->selector_top_k);
  size_t row = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const ProposalRequest& r = requests[i];
    if (r.constraint) {  // the selector's chain may leave the grammar: the masked argmax keeps to it
      choose_constrained(r, row, logits.cols());
    } else {
      *r.draft = drafts[i].tokens;
      for (size_t j = 0; j < drafts[i].q.size() / k; ++j) {
        const auto at = static_cast<std::ptrdiff_t>(j * k), end = static_cast<std::ptrdiff_t>((j + 1) * k);
        r.draft_q->push_back(
            {std::vector<int32_t>(drafts[i].candidates.begin() + at, drafts[i].candidates.begin() + end),
             std::vector<float>(drafts[i].q.begin() + at, drafts[i].q.begin() + end)});
      }
    }
    row += static_cast<size_t>(r.block_size - 1);
  }
}

int64_t DFlashProposer::ordered_context(ProposerState* state) {
  DraftContext& c = context_of(state);
  DraftContext* const one[] = {&c};
  inject_recent(one);
  return c.gap_at.value_or(c.cache.length());
}

void DFlashProposer::export_context_block(ProposerState* state, int64_t first_position, PagedKvStore& store,
                                          BlockId id) {
  KvCache& cache = context_of(state).cache;
  const int64_t b = store.block_size();
  check_invariant(first_position + b <= cache.length(), "a block's drafter rows are injected before they are kept");
  Backend& backend = drafter_.backend();
  for (int64_t layer = 0; layer < drafter_.config().layers.num_layers; ++layer) {
    backend.copy_rows(cache.keys(layer).slice_rows(first_position, b), store.draft_keys(layer), id * b);
    backend.copy_rows(cache.values(layer).slice_rows(first_position, b), store.draft_values(layer), id * b);
  }
}

int64_t DFlashProposer::import_context_blocks(ProposerState* state, PagedKvStore& store,
                                              std::span<const BlockId> blocks) {
  DraftContext& c = context_of(state);
  check_invariant(c.next_position == 0 && c.cache.length() == 0, "drafter rows are imported before anything else");
  const int64_t b = store.block_size(), positions = static_cast<int64_t>(blocks.size()) * b;
  if (positions == 0) return 0;
  c.cache.reserve(positions);
  Backend& backend = drafter_.backend();
  for (int64_t layer = 0; layer < drafter_.config().layers.num_layers; ++layer) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) * b;
      backend.copy_rows(store.draft_keys(layer).slice_rows(blocks[i] * b, b), c.cache.keys(layer), row);
      backend.copy_rows(store.draft_values(layer).slice_rows(blocks[i] * b, b), c.cache.values(layer), row);
    }
  }
  c.cache.commit(positions);
  c.next_position = positions;
  return positions;
}

}  // namespace flashq
