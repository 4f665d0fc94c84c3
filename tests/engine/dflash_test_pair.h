// A random tiny target and DFlash drafter pair, written to a temp dir and loaded on the CPU.
#pragma once

#include "tests/model/tiny_model.h"
#include "worker/engine/dflash_proposer.h"
#include "worker/engine/engine.h"
#include "worker/model/dflash_drafter.h"
#include "worker/text/tokenizer.h"

namespace flashq::testing {

struct DFlashTestPair {
  LoadedTinyModel target;
  TempDir drafter_dir;
  std::unique_ptr<DFlashDrafter> drafter;
  std::unique_ptr<DFlashProposer> proposer;
  std::unique_ptr<Tokenizer> tokenizer;

  DFlashTestPair(const TinyModelSpec& target_spec, const TinyDrafterSpec& drafter_spec) : target(target_spec) {
    write_tiny_drafter(drafter_spec, target.dir.path(), drafter_dir.path());
    drafter = DFlashDrafter::load(drafter_dir.path(), *target.model, *target.backend);
    proposer = std::make_unique<DFlashProposer>(*drafter);
    tokenizer = load_tokenizer(target.dir.path());
  }

  // The target's and the drafter's caches made after hold `dtype` (kF32 or kBF16).
  void set_kv_cache_dtype(DType dtype) {
    target.model->set_kv_cache_dtype(dtype);
    drafter->set_kv_cache_dtype(dtype);
  }
};

inline TinyModelSpec f32_target(uint64_t seed, int64_t layers = 3, int64_t hidden = 64, int64_t heads = 4,
                                int64_t kv_heads = 2, int64_t head_dim = 16) {
  TinyModelSpec s;
  s.layers = layers, s.hidden = hidden, s.heads = heads, s.kv_heads = kv_heads, s.head_dim = head_dim;
  s.inter = 2 * hidden, s.vocab = 512, s.dtype = DType::kF32, s.seed = seed;
  return s;
}

// A greedy request of `max_tokens` after `prompt` that ends only at max_tokens.
inline SequenceRequest greedy_request(std::vector<int32_t> prompt, SpecMode spec, int64_t max_tokens) {
  SequenceRequest r;
  r.generation.prompt_tokens = std::move(prompt);
  r.generation.max_tokens = max_tokens;
  r.generation.ignore_eos = true;
  r.spec = spec;
  return r;
}

// Runs every request to completion in one engine; returns the outputs in request order.
inline std::vector<std::vector<int32_t>> run_engine(TargetModel& model, Proposer* proposer,
                                                    const std::vector<SequenceRequest>& requests, int64_t slots,
                                                    std::vector<TraceRecord>* trace = nullptr,
                                                    EngineOptions options = {}) {
  options.max_slots = slots;
  if (trace) options.on_trace = [trace](const TraceRecord& r) { trace->push_back(r); };
  Engine engine(model, proposer, options);
  for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
  engine.run_until_idle();
  std::vector<std::vector<int32_t>> outputs(requests.size());
  for (FinishedSequence& done : engine.take_finished()) outputs[done.id] = std::move(done.tokens);
  return outputs;
}

}  // namespace flashq::testing
