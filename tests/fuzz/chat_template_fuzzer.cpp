// libFuzzer target for chat templates: an input is the text of a checkpoint's chat_template,
// parsed as the worker parses it (jinja::Template::parse) and, when accepted, rendered over a
// fixed conversation with a system prompt, tools, a tool call and its result. A refused template
// is a kInvalidArgument (syntax) or kUnsupported (outside the subset) flashq::Error, and so is a
// render that fails; anything else escaping (a std:: exception, a sanitizer report, a stack
// overflow from unbounded recursion) crashes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz_check.h"
#include "worker/text/jinja/template.h"

namespace {

using flashq::fuzz::require;

bool is_template_error(const flashq::Error& e) {
  return e.code() == flashq::ErrorCode::kInvalidArgument || e.code() == flashq::ErrorCode::kUnsupported;
}

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "content": "{\"temperature\": 21.5}"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"
  })");
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const flashq::jinja::Template tmpl = flashq::jinja::Template::parse(source);
    flashq::jinja::RenderOptions options;
    options.now = std::chrono::system_clock::time_point(std::chrono::seconds(1721999045));
    options.max_loop_iterations = 20000;  // keeps each run short; the bound itself is what is checked
    options.max_string_bytes = 1 << 20;
    (void)tmpl.render(conversation(), options);
  } catch (const flashq::Error& e) {
    require(is_template_error(e), "a refused or failing template is kInvalidArgument or kUnsupported");
  }
  return 0;
}
