#include "worker/process/job_request.h"

#include <variant>

#include "shared/error.h"

namespace flashq {
namespace {

std::vector<int32_t> prompt_tokens(const protocol::Prompt& prompt, const Tokenizer& tokenizer,
                                   const ChatTemplate* chat_template) {
  if (const auto* text = std::get_if<std::string>(&prompt)) return tokenizer.encode(*text);
  if (const auto* tokens = std::get_if<protocol::TokenIds>(&prompt)) return *tokens;
  std::vector<ChatMessage> chat;
  for (const protocol::ChatMessage& m : std::get<std::vector<protocol::ChatMessage>>(prompt)) {
    chat.push_back({m.role, m.content});
  }
  if (chat_template == nullptr) throw Error(ErrorCode::kInvalidArgument, "this model has no chat template");
  return tokenizer.encode(chat_template->render(chat));
}

SpecMode engine_spec_mode(protocol::SpecMode mode) {
  switch (mode) {
    case protocol::SpecMode::kOff:
      return SpecMode::kOff;
    case protocol::SpecMode::kDflash:
      return SpecMode::kDflash;
    case protocol::SpecMode::kAuto:
      return SpecMode::kAuto;
  }
  return SpecMode::kAuto;
}

}  // namespace

JobRequest make_job_request(const protocol::Assign& assign, const Tokenizer& tokenizer, const WorkerModel& model) {
  const protocol::Job& job = assign.job;
  if (job.model && *job.model != model.name) {
    throw Error(ErrorCode::kInvalidArgument, "this worker serves model '" + model.name + "', not '" + *job.model + "'");
  }
  JobRequest out;
  GenerationRequest& g = out.sequence.generation;
  g.prompt_tokens = prompt_tokens(job.prompt, tokenizer, model.chat_template);
  out.job_prompt_tokens = static_cast<int64_t>(g.prompt_tokens.size());
  g.prompt_tokens.insert(g.prompt_tokens.end(), assign.resume_tokens.begin(), assign.resume_tokens.end());

  const int64_t resumed = static_cast<int64_t>(assign.resume_tokens.size());
  out.resumed_tokens = resumed;
  out.sequence.resume = {.tokens = resumed, .text_bytes = assign.resume_text_bytes};
  out.nothing_left = resumed >= job.max_tokens;
  g.max_tokens = out.nothing_left ? 1 : job.max_tokens - resumed;
  g.sampling.temperature = static_cast<float>(job.temperature);
  g.sampling.top_p = static_cast<float>(job.top_p);
  g.sampling.top_k = static_cast<int32_t>(job.top_k);  // the protocol bounds it to int32
  g.sampling.seed = job.seed;
  g.stop = job.stop;
  g.stop_token_ids = job.stop_token_ids;

  out.sequence.spec = engine_spec_mode(job.spec);
  // docs/protocol.md 9.5: a worker without a drafter runs any job target-only; speculation never
  // changes the output, only its speed.
  if (!model.has_drafter) out.sequence.spec = SpecMode::kOff;
  const bool may_draft = out.sequence.spec != SpecMode::kOff;
  out.sequence.block_size = may_draft ? job.block_size : 0;
  return out;
}

}  // namespace flashq
