#include "worker/process/job_request.h"

#include <variant>

#include "shared/error.h"
#include "shared/protocol/limits.h"
#include "worker/grammar/grammar_constraint.h"
#include "worker/grammar/structured_output.h"

namespace flashq {
namespace {

// The job's structured output compiled (or found compiled) over the model's token table.
std::shared_ptr<TokenConstraint> output_constraint(const std::string& spec, const WorkerModel& model) {
  if (model.grammars == nullptr || !model.token_table) {
    throw Error(ErrorCode::kInvalidArgument, "this worker does not constrain its output (structured_output)");
  }
  const grammar::GrammarRequest request = grammar::read_structured_output(spec);
  if (request.spells_special_tokens && !model.special_token_table) {
    throw Error(ErrorCode::kInvalidArgument, "this model's tool calls are not written in special tokens");
  }
  return std::make_shared<grammar::GrammarConstraint>(model.grammars->get_or_compile(
      request, request.spells_special_tokens ? model.special_token_table : model.token_table));
}

// Whether JSON `text` nests arrays and objects deeper than a message may (protocol::kMaxDepth):
// the values it would parse into are copied and rendered recursively.
bool nested_too_deep(const std::string& text) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > protocol::kMaxDepth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// OpenAI sends a tool call's arguments as JSON text in a string; chat templates take the
// arguments as a mapping (e.g. `tool_call.arguments | tojson`), so text that holds a JSON object
// becomes that object. Anything else reaches the template as it came.
ChatJson template_arguments(const std::string& arguments_json) {
  ChatJson value = ChatJson::parse(arguments_json);
  if (!value.is_string() || nested_too_deep(value.get<std::string>())) return value;
  ChatJson parsed = ChatJson::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : value;
}

// An assistant turn that only calls tools has no content (null, as OpenAI's clients send it); its
// template gets "" as vLLM gives it, since published templates test and concatenate an assistant's
// content as text (Qwen3's `'</think>' in message.content`) and treat "" as none.
ChatJson message_json(const protocol::ChatMessage& m) {
  const bool calls_only = m.role == "assistant" && !m.content && !m.tool_calls.empty();
  ChatJson out = {{"role", m.role},
                  {"content", m.content ? ChatJson(*m.content) : calls_only ? ChatJson("") : ChatJson(nullptr)}};
  if (!m.tool_calls.empty()) {
    ChatJson calls = ChatJson::array();
    for (const protocol::ToolCall& call : m.tool_calls) {
      ChatJson c = ChatJson::object();
      if (!call.id.empty()) c["id"] = call.id;
      c["type"] = "function";
      c["function"] = {{"name", call.name}, {"arguments", template_arguments(call.arguments_json)}};
      calls.push_back(std::move(c));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) out["tool_call_id"] = *m.tool_call_id;
  if (m.name) out["name"] = *m.name;
  // Under both names templates read it: Qwen3's reasoning_content, gpt-oss's thinking.
  if (m.reasoning_content) {
    out["reasoning_content"] = *m.reasoning_content;
    out["thinking"] = *m.reasoning_content;
  }
  return out;
}

std::vector<int32_t> prompt_tokens(const protocol::Job& job, const Tokenizer& tokenizer,
                                   const ChatTemplate* chat_template) {
  // Text gets the tokenizer's special tokens (Llama 3's <|begin_of_text|>), as Hugging Face's
  // encode does by default; a rendered chat already holds those its template writes.
  if (const auto* text = std::get_if<std::string>(&job.prompt)) return tokenizer.encode_with_special_tokens(*text);
  if (const auto* tokens = std::get_if<protocol::TokenIds>(&job.prompt)) return *tokens;
  if (chat_template == nullptr) throw Error(ErrorCode::kInvalidArgument, "this model has no chat template");
  return tokenizer.encode(chat_template->render(make_chat_request(job)));
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

ChatRequest make_chat_request(const protocol::Job& job) {
  ChatRequest request;
  for (const protocol::ChatMessage& m : std::get<std::vector<protocol::ChatMessage>>(job.prompt)) {
    request.messages.push_back(message_json(m));
  }
  // The protocol checked that these are JSON text of an array and of an object.
  if (job.tools) request.tools = ChatJson::parse(*job.tools);
  if (job.chat_template_kwargs) request.options = ChatJson::parse(*job.chat_template_kwargs);
  request.add_generation_prompt = job.add_generation_prompt;
  return request;
}

JobRequest make_job_request(const protocol::Assign& assign, const Tokenizer& tokenizer, const WorkerModel& model) {
  const protocol::Job& job = assign.job;
  if (job.model && *job.model != model.name) {
    throw Error(ErrorCode::kInvalidArgument, "this worker serves model '" + model.name + "', not '" + *job.model + "'");
  }
  JobRequest out;
  GenerationRequest& g = out.sequence.generation;
  g.prompt_tokens = prompt_tokens(job, tokenizer, model.chat_template);
  out.job_prompt_tokens = static_cast<int64_t>(g.prompt_tokens.size());
  g.prompt_tokens.insert(g.prompt_tokens.end(), assign.resume_tokens.begin(), assign.resume_tokens.end());

  const int64_t resumed = static_cast<int64_t>(assign.resume_tokens.size());
  out.resumed_tokens = resumed;
  out.nothing_left = resumed >= job.max_tokens;
  g.max_tokens = out.nothing_left ? 1 : job.max_tokens - resumed;
  g.sampling.temperature = static_cast<float>(job.temperature);
  g.sampling.top_p = static_cast<float>(job.top_p);
  g.sampling.top_k = static_cast<int32_t>(job.top_k);  // the protocol bounds it to int32
  g.sampling.seed = job.seed;
  g.stop = job.stop;
  g.stop_token_ids = job.stop_token_ids;
  g.logprobs = job.logprobs ? static_cast<int32_t>(*job.logprobs) : -1;  // the protocol bounds it to 0..20

  if (job.structured_output) out.sequence.constraint = output_constraint(*job.structured_output, model);
  out.sequence.spec = engine_spec_mode(job.spec);
  // docs/protocol.md 9.5: a worker without a drafter runs any job target-only; speculation never
  // changes the output, only its speed.
  if (!model.has_drafter) out.sequence.spec = SpecMode::kOff;
  const bool may_draft = out.sequence.spec != SpecMode::kOff;
  out.sequence.block_size = may_draft ? job.block_size : 0;
  return out;
}

}  // namespace flashq
