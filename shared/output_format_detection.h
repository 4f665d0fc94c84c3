// A model's output formats (shared/protocol/output_format.h) from what its chat template writes:
// the worker decides them once at load and sends them in READY; the gateway's tests and tools
// detect them from a template directly.
//
// detect_output_format(model_type, chat_template) decides, in this order:
//   harmony: a template that writes `<|channel|>` (gpt-oss) is kHarmony for both tool calls and
//     reasoning, whatever else it mentions;
//   tool calls: a template that writes `<tool_call>` with a JSON object inside is Hermes
//     (Qwen2.5, Qwen3, Hermes, and the many templates copied from them); one that writes
//     `<tool_call>` with `<function=` inside is Qwen3-Coder's XML form, which has no parser yet
//     (kNone); a `llama` model_type, or a template that writes `<|python_tag|>`, is Llama 3.x
//     JSON; else kNone.
//   reasoning: a template that writes `<think>` is kThinkTags. Whether its
//     generation prompt already opens <think> (kThinkInPrompt) takes a rendering, which only the
//     worker can do: it renders one user message and asks prompt_opens_reasoning().
// kNone for tool calls means no parser knows the model's format: the gateway refuses a request
// with tools for it rather than answer with calls left unparsed in the content.
#pragma once

#include <string_view>

#include "shared/protocol/output_format.h"

namespace flashq {

// model_type from config.json; chat_template the template's source as loaded.
protocol::OutputFormat detect_output_format(std::string_view model_type, std::string_view chat_template);

// True when the rendered prompt ends inside an opened <think> (trailing whitespace aside), so
// the output starts in the reasoning.
bool prompt_opens_reasoning(std::string_view rendered_prompt);

}  // namespace flashq
