#include "worker/grammar/tool_call_grammar.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "worker/grammar/gbnf_text.h"
#include "worker/grammar/json_schema_grammar.h"

namespace flashq::grammar {
namespace {

// A tool without parameters takes no arguments: `{}`.
constexpr const char* kNoParameters = R"({"type": "object", "properties": {}, "additionalProperties": false})";

Error invalid(const std::string& what) { return Error(ErrorCode::kInvalidArgument, "tool calls: " + what); }

// "auto" without an answer format: free text until the model opens a call.
bool is_lazy(const ToolCallRequest& request) { return request.choice == ToolCallChoice::kAuto && !request.answer; }

// OpenAI's rule for function names; it also keeps a name from breaking the format around it
// (harmony writes it bare in a header).
void check_name(const std::string& name) {
  const bool fits = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!fits) throw invalid("the function name '" + name + "' must be 1 to 64 letters, digits, '_' or '-'");
}

// The rules of tool i's arguments, prefixed `tool<i>-` (entry `tool<i>-root`).
std::string arguments_rules(const ToolSchema& tool, size_t i) {
  std::string gbnf;
  try {
    gbnf = tool.strict ? json_schema_grammar(tool.parameters_json.empty() ? kNoParameters : tool.parameters_json)
                       : json_object_grammar();
  } catch (const Error& e) {
    throw invalid("the parameters of '" + tool.name + "': " + e.what());
  }
  return prefix_rule_names(gbnf, "tool" + std::to_string(i) + "-");
}

std::string json_name(const std::string& name) { return nlohmann::json(name).dump(); }

// One call of tool i, as the model's format writes it (harmony: the message's header and body;
// the <|call|> that ends it is an end token).
std::string call_rule(ToolCallSyntax syntax, const std::string& name, size_t i) {
  const std::string arguments = " tool" + std::to_string(i) + "-root ";
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return gbnf_literal("<tool_call>\n{\"name\": " + json_name(name) + ", \"arguments\": ") + arguments +
             gbnf_literal("}\n</tool_call>");
    case ToolCallSyntax::kLlama3Json:
      return gbnf_literal("{\"name\": " + json_name(name) + ", \"parameters\": ") + arguments + gbnf_literal("}");
    case ToolCallSyntax::kHarmony:
      return gbnf_literal("to=functions." + name) + " recipient-channel " +
             gbnf_literal(" <|constrain|>json<|message|>") + arguments;
  }
  return {};
}

// `calls`: one call, or several where the format joins them.
std::string calls_rules(const ToolCallRequest& request) {
  std::string out;
  std::string alternatives;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    out += "call-" + std::to_string(i) + " ::= " + call_rule(request.syntax, request.tools[i].name, i) + "\n";
    alternatives += (i ? " | call-" : "call-") + std::to_string(i);
  }
  out += "call ::= " + alternatives + "\n";
  if (request.syntax == ToolCallSyntax::kHarmony) {
    // A harmony call ends the turn; its message opens on the channel. A lazy grammar meets the
    // recipient wherever the model wrote it, also before the channel
    // (`to=functions.f<|channel|>commentary`).
    out += "calls ::= " + gbnf_literal("<|channel|>commentary ") + " call\n";
    out += std::string("recipient-channel ::= ") +
           (is_lazy(request) ? "(" + gbnf_literal("<|channel|>commentary") + ")?" : std::string("\"\"")) + "\n";
  } else {
    const std::string separator = request.syntax == ToolCallSyntax::kHermes ? "\n" : "; ";
    out += "calls ::= call" + (request.parallel ? " (" + gbnf_literal(separator) + " call)*" : std::string()) + "\n";
  }
  return out;
}

// `reasoning`: the block a reasoning model writes before its answer (none: an empty rule).
std::string reasoning_rules(const ToolCallRequest& request) {
  if (request.syntax == ToolCallSyntax::kHarmony) {
    if (request.reasoning == ReasoningStart::kNone) return "reasoning ::= \"\"\n";
    return "reasoning ::= (" + gbnf_literal("<|channel|>analysis<|message|>") + " analysis-text " +
           gbnf_literal("<|end|><|start|>assistant") + ")?\n" + text_without_rules("analysis-text", "<|end|>");
  }
  const std::string after = gbnf_literal("</think>") + " " + gbnf_literal("\n") + "{0,2}";
  switch (request.reasoning) {
    case ReasoningStart::kNone: return "reasoning ::= \"\"\n";
    case ReasoningStart::kOptional:
      return "reasoning ::= (" + gbnf_literal("<think>") + " think-text " + after + ")?\n" +
             text_without_rules("think-text", "</think>");
    case ReasoningStart::kInside:
      return "reasoning ::= think-text " + after + "\n" + text_without_rules("think-text", "</think>");
  }
  return {};
}

// The answer that opens no call: the answer's grammar (after reasoning), or free text up to the
// trigger.
std::string answer_rules(const ToolCallRequest& request) {
  if (request.answer) {
    const std::string rules = prefix_rule_names(request_gbnf(*request.answer), "answer-");
    if (request.syntax == ToolCallSyntax::kHarmony) {
      return "answer ::= " + gbnf_literal("<|channel|>final<|message|>") + " answer-root\n" + rules;
    }
    return "answer ::= answer-root\n" + rules;
  }
  if (request.syntax == ToolCallSyntax::kLlama3Json) {
    // A message whose first character past whitespace is not '{' (the parser skips whitespace).
    return "answer ::= [ \\t\\n\\r]* ([^{ \\t\\n\\r] .*)?\n";
  }
  return text_without_rules("answer", tool_call_trigger(request.syntax));
}

// The root: a call from the start (after reasoning), or, for "auto", an answer or a call.
std::string root_rule(const ToolCallRequest& request) {
  if (request.choice != ToolCallChoice::kAuto) return "root ::= reasoning calls\n";
  if (request.answer) return "root ::= reasoning (answer | calls)\n";
  switch (request.syntax) {
    case ToolCallSyntax::kHermes: return "root ::= answer calls?\n";
    case ToolCallSyntax::kLlama3Json: return "root ::= answer | calls\n";
    // Free text up to `to=functions.`, then the rest of that header and the call's body.
    case ToolCallSyntax::kHarmony: return "root ::= answer call?\n";
  }
  return {};
}

std::string escaped_class_char(char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned char>(c));
  return buf;
}

}  // namespace

std::string tool_call_grammar(const ToolCallRequest& request) {
  if (request.tools.empty()) throw invalid("no tools to call");
  if (request.choice == ToolCallChoice::kNamed && request.tools.size() != 1) {
    throw invalid("a named choice constrains to exactly one tool");
  }
  if (request.answer && request.choice != ToolCallChoice::kAuto) {
    throw invalid("an answer format goes with the choice \"auto\" only");
  }
  std::set<std::string> names;
  for (const ToolSchema& tool : request.tools) {
    check_name(tool.name);
    if (!names.insert(tool.name).second) throw invalid("two tools are named '" + tool.name + "'");
  }
  std::string gbnf = root_rule(request) + calls_rules(request);
  // The free text of a lazy grammar is the whole answer; reasoning then is part of that text.
  if (!is_lazy(request)) gbnf += reasoning_rules(request);
  if (request.choice == ToolCallChoice::kAuto) gbnf += answer_rules(request);
  for (size_t i = 0; i < request.tools.size(); ++i) gbnf += arguments_rules(request.tools[i], i);
  return gbnf;
}

bool spells_special_tokens(ToolCallSyntax syntax) { return syntax == ToolCallSyntax::kHarmony; }

std::string tool_call_trigger(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kHermes: return "<tool_call>";
    case ToolCallSyntax::kLlama3Json: return "{";
    case ToolCallSyntax::kHarmony: return "to=functions.";
  }
  return {};
}

// The automaton of "has not yet seen `forbidden`" (Knuth-Morris-Pratt's), one rule per state:
// state q has matched the first q characters. Every state may end; reaching the whole string
// is the one move no rule offers.
std::string text_without_rules(const std::string& name, const std::string& forbidden) {
  const size_t m = forbidden.size();
  auto state_name = [&](size_t q) { return q == 0 ? name : name + "-" + std::to_string(q); };
  // The longest prefix of `forbidden` that is a suffix of its first q characters and then c.
  auto next_state = [&](size_t q, char c) {
    const std::string seen = forbidden.substr(0, q) + c;
    for (size_t k = std::min(seen.size(), m); k > 0; --k) {
      if (seen.compare(seen.size() - k, k, forbidden, 0, k) == 0) return k;
    }
    return size_t{0};
  };
  const std::set<char> letters(forbidden.begin(), forbidden.end());
  std::string others = "[^";
  for (char c : letters) others += escaped_class_char(c);
  others += "]";
  std::string out;
  for (size_t q = 0; q < m; ++q) {
    out += state_name(q) + " ::= \"\" | " + others + " " + name;
    for (char c : letters) {
      const size_t next = next_state(q, c);
      if (next < m) out += " | [" + escaped_class_char(c) + "] " + state_name(next);
    }
    out += "\n";
  }
  return out;
}

}  // namespace flashq::grammar
