// A checkpoint's chat template (Jinja source from tokenizer_config.json or chat_template.jinja),
// parsed once and rendered per conversation. The engine implements the subset of Jinja that real
// chat templates use and renders it exactly as Hugging Face's JavaScript engine (@huggingface/jinja,
// which transformers.js uses for apply_chat_template) does: trim_blocks and lstrip_blocks on, one
// trailing newline of the source dropped, `none` and undefined printing as nothing, booleans as
// true/false, tojson with ", " and ": " separators. A construct outside the subset is refused
// when the template is parsed, naming the construct and its line, never rendered differently.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace flashq::jinja {

struct Node;

struct RenderOptions {
  // What strftime_now() formats (in UTC).
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
  // Bounds no real template comes near, so that a hostile one fails (kInvalidArgument) instead
  // of exhausting the time or memory of the process rendering it.
  size_t max_loop_iterations = 1000000;        // all loops of one render together
  size_t max_string_bytes = size_t{64} << 20;  // any string built, the output included
};

class Template {
 public:
  // Parses `source`. A construct outside the supported subset is a kUnsupported flashq::Error
  // naming it and its line ("chat template line 12: filter 'wordwrap' is not supported"); a
  // syntax error is kInvalidArgument with the line.
  static Template parse(std::string_view source);

  // Renders with `context`, a JSON object of variables (messages, tools, add_generation_prompt,
  // bos_token, eos_token, enable_thinking, ...); a variable may not be named like a built-in
  // (true, range, namespace, ...). raise_exception(msg) in the template and runtime errors
  // (calling an undefined function, a bad operand) are kInvalidArgument errors carrying the
  // message and line; a value the engine will not print as the reference would is kUnsupported.
  // A Template may render on several threads at once.
  std::string render(const nlohmann::json& context, const RenderOptions& options = {}) const;
  // The same with the context's object keys in their own order, as the reference engine sees
  // them: tojson prints tool definitions in the order the request wrote them (nlohmann::json
  // sorts keys, so pass a context parsed as ordered_json where that order matters).
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Node> program) : program_(std::move(program)) {}
  std::shared_ptr<const Node> program_;  // shared: a Template is cheap to copy
};

}  // namespace flashq::jinja
