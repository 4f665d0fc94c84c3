#include "worker/engine/generate.h"

#include <algorithm>
#include <chrono>

#include "shared/error.h"
#include "worker/engine/stop_matcher.h"
#include "worker/tokenizer/incremental_decoder.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int32_t next_token(Qwen3Model& model, std::span<const int32_t> tokens, KvCache& cache, Sampler& sampler,
                   std::vector<float>& logits) {
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {});
  logits.resize(static_cast<size_t>(out.logits.numel()));
  model.backend().copy_to_host(out.logits, logits.data());
  return sampler.sample(logits);
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  return reason == FinishReason::kStop ? "stop" : "length";
}

double GenerationStats::prefill_tokens_per_s() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_s() const {
  // The first completion token comes out of the prefill pass.
  return decode_seconds > 0 && completion_tokens > 1 ? static_cast<double>(completion_tokens - 1) / decode_seconds : 0.0;
}

GenerationResult generate(Qwen3Model& model, const Tokenizer& tokenizer, const GenerationRequest& request,
                          const StreamCallback& on_step) {
  const ModelConfig& config = model.config();
  const int64_t prompt_length = static_cast<int64_t>(request.prompt_tokens.size());
  if (prompt_length == 0) throw Error(ErrorCode::kInvalidArgument, "the prompt is empty");
  if (prompt_length >= config.max_position_embeddings) {
    throw Error(ErrorCode::kInvalidArgument, "prompt of " + std::to_string(prompt_length) +
                                                 " tokens does not fit the model's context of " +
                                                 std::to_string(config.max_position_embeddings));
  }
  if (request.max_tokens <= 0) throw Error(ErrorCode::kInvalidArgument, "max_tokens must be positive");
  for (int32_t id : request.prompt_tokens) {
    if (id < 0 || id >= config.vocab_size) {
      throw Error(ErrorCode::kInvalidArgument, "prompt token id " + std::to_string(id) + " is outside the vocabulary");
    }
  }

  Sampler sampler(request.sampling);
  KvCache cache = model.make_cache(prompt_length + request.max_tokens);
  IncrementalDecoder detokenizer(tokenizer, /*skip_special_tokens=*/false);
  StopMatcher stops(request.stop);
  auto contains = [](const std::vector<int32_t>& ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  auto ends_generation = [&](int32_t id) {
    return (!request.ignore_eos && contains(config.eos_token_ids, id)) || contains(request.stop_token_ids, id);
  };

  GenerationResult result;
  result.stats.prompt_tokens = prompt_length;
  std::vector<float> logits;
  auto start = Clock::now();
  int32_t token = next_token(model, request.prompt_tokens, cache, sampler, logits);
  result.stats.prefill_seconds = seconds_since(start);
  start = Clock::now();

  bool stopped_by_string = false;
  auto emit = [&](std::span<const int32_t> ids, const std::string& decoded) {
    StopMatcher::Result text = stops.push(decoded);
    result.text += text.text;
    if (on_step) on_step(ids, text.text);
    stopped_by_string = text.stopped;
  };
  while (true) {
    if (ends_generation(token)) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    result.tokens.push_back(token);
    // Ids past the tokenizer (padding rows of the embedding) have no text.
    const bool has_text = token < tokenizer.vocab_size();
    emit({&token, 1}, has_text ? detokenizer.push({&token, 1}) : std::string());
    if (stopped_by_string) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    // The next pass would append `token` to the cache: it must fit the context.
    const bool context_full = cache.length() + 1 > cache.max_length();
    if (static_cast<int64_t>(result.tokens.size()) >= request.max_tokens || context_full) {
      result.finish_reason = FinishReason::kLength;
      break;
    }
    token = next_token(model, {&token, 1}, cache, sampler, logits);
  }
  if (!stopped_by_string) {
    emit({}, detokenizer.flush());
    if (stopped_by_string) {
      result.finish_reason = FinishReason::kStop;
    } else {
      std::string rest = stops.flush();
      result.text += rest;
      if (on_step && !rest.empty()) on_step({}, rest);
    }
  }
  result.stats.completion_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace flashq
