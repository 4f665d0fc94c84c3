// The chat template engine's own rules: which constructs it refuses and how (kUnsupported at
// parse time, naming the construct and its line), syntax errors, raise_exception and other render
// errors, the context it accepts, and the behaviour it adds beyond the reference engine
// (select/reject). What it renders is checked against @huggingface/jinja in jinja_golden_test.
#include <gtest/gtest.h>

#include <chrono>

#include "shared/error.h"
#include "worker/text/jinja/template.h"

namespace flashq {
namespace {

using jinja::Template;

std::string render(std::string_view source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  return Template::parse(source).render(context);
}

// The error `source` fails to parse with, or nullopt-like empty code when it parses.
Error parse_error(std::string_view source) {
  try {
    Template::parse(source);
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::kInternal, "parsed");
}

Error render_error(std::string_view source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  const Template tmpl = Template::parse(source);
  try {
    tmpl.render(context);
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::kInternal, "rendered");
}

void expect_refused(std::string_view source, const std::string& message) {
  const Error e = parse_error(source);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << source << ": " << e.what();
  EXPECT_EQ(std::string(e.what()), message) << source;
}

// A few constructs spelled out; the full set is checked against @huggingface/jinja in
// jinja_golden_test (constructs.json), which these expectations agree with.
TEST(JinjaConstructs, PrintsValuesAsTheReferenceEngineDoes) {
  EXPECT_EQ(render("{{ 1 }}|{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ true }}|{{ none }}|{{ missing }}|{{ [1, 'a', none] }}"),
            "1|1.0|0.30000000000000004|true|||[1, \"a\", null]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [true]}|tojson(indent=2) }}"), "{\n  \"b\": 1,\n  \"a\": [\n    true\n  ]\n}");
}

TEST(JinjaConstructs, LoopsExposeLoopVariablesAndElse) {
  EXPECT_EQ(
      render(
          "{% for x in ['a', 'b'] %}{{ loop.index }}{{ loop.first }}{{ loop.last }}({{ loop.previtem }}){% endfor %}"),
      "1truefalse()2falsetrue(a)");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() if v > 1 %}{{ k }}={{ v }}{% endfor %}"), "b=2");
}

TEST(JinjaConstructs, NamespacesCarryStateOutOfLoops) {
  EXPECT_EQ(
      render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
      "6");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
}

TEST(JinjaConstructs, MacrosTakeDefaultsAndKeywords) {
  EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(b=3, a=4) }}"),
            "1B|12|43");
}

TEST(JinjaConstructs, SlicesStringsAndListsLikePython) {
  EXPECT_EQ(render("{{ [1, 2, 3, 4][::-1] }}|{{ [1, 2, 3, 4][1:-1] }}|{{ 'hello'[1:3] }}|{{ 'abc'[-1] }}"),
            "[4, 3, 2, 1]|[2, 3]|el|c");
}

TEST(JinjaConstructs, WhitespaceControlAndBlockTrimming) {
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("{% if true %}\n  x\n{% endif %}\n"), "  x\n");
}

TEST(JinjaConstructs, StringMethodsAndTests) {
  EXPECT_EQ(
      render("{{ 'a</think>b'.split('</think>')[-1] }}|{{ 'Hello'.startswith(('x', 'He')) }}|{{ '  x '.strip() }}"),
      "b|true|x");
  EXPECT_EQ(render("{{ x is defined }}{{ x is none }}{{ x is not string }}", {{"x", nullptr}}), "truetruetrue");
}

TEST(JinjaRefusals, NamesUnsupportedStatementsAndTheirLine) {
  expect_refused("a\n{% include 'x.jinja' %}", "chat template line 2: statement 'include' is not supported");
  expect_refused("{% extends 'base' %}", "chat template line 1: statement 'extends' is not supported");
  expect_refused("{% block body %}{% endblock %}", "chat template line 1: statement 'block' is not supported");
  expect_refused("\n\n{%- filter upper %}x{% endfilter %}",
                 "chat template line 3: statement 'filter' is not supported");
  expect_refused("{% call m() %}x{% endcall %}", "chat template line 1: statement 'call' is not supported");
  expect_refused("{% with a = 1 %}{% endwith %}", "chat template line 1: statement 'with' is not supported");
  expect_refused("{% raw %}{{ x }}{% endraw %}", "chat template line 1: statement 'raw' is not supported");
  expect_refused("{% import 'm' as m %}", "chat template line 1: statement 'import' is not supported");
  expect_refused("{% do x.append(1) %}", "chat template line 1: statement 'do' is not supported");
}

TEST(JinjaRefusals, NamesUnsupportedFilters) {
  expect_refused("{{ x }}\n{{ text | wordwrap(20) }}", "chat template line 2: filter 'wordwrap' is not supported");
  expect_refused("{{ 2.5|round }}", "chat template line 1: filter 'round' is not supported");
  expect_refused("{{ s|e }}", "chat template line 1: filter 'e' is not supported");
  expect_refused("{{ s|escape }}", "chat template line 1: filter 'escape' is not supported");
  expect_refused("{{ xs|batch(2) }}", "chat template line 1: filter 'batch' is not supported");
  // The reference engine dispatches the bare and the called form separately.
  expect_refused("{{ s|trim() }}", "chat template line 1: filter 'trim' with arguments is not supported");
  expect_refused("{{ s|default }}", "chat template line 1: filter 'default' without arguments is not supported");
  expect_refused("{{ xs|map(f) }}", "chat template line 1: filter 'map' without attribute= is not supported");
  expect_refused("{{ xs|selectattr('a', 'sameas', none) }}", "chat template line 1: test 'sameas' is not supported");
  expect_refused("{{ xs|reject('divisibleby', 3) }}", "chat template line 1: test 'divisibleby' is not supported");
}

TEST(JinjaRefusals, NamesUnsupportedTestsMethodsAndGlobals) {
  expect_refused("{{ x is float }}", "chat template line 1: test 'float' is not supported");
  expect_refused("{{ x is divisibleby(3) }}", "chat template line 1: test 'divisibleby' is not supported");
  expect_refused("{{ x is defined(1) }}", "chat template line 1: test 'defined' with an argument is not supported");
  expect_refused("{{ s.find('a') }}", "chat template line 1: method 'find' is not supported");
  expect_refused("{{ '{}'.format(1) }}", "chat template line 1: method 'format' is not supported");
  expect_refused("{{ xs.append(1) }}", "chat template line 1: method 'append' is not supported");
  expect_refused("{{ loop.cycle('a', 'b') }}", "chat template line 1: method 'cycle' is not supported");
  expect_refused("{{ dict(a=1) }}", "chat template line 1: function 'dict' is not supported");
  expect_refused("{{ f(*args) }}", "chat template line 1: argument unpacking with * or ** is not supported");
  expect_refused("{% macro m() %}{{ kwargs }}{% endmacro %}",
                 "chat template line 1: 'kwargs' in a macro is not supported");
}

TEST(JinjaSyntaxErrors, AreInvalidArgumentWithTheLine) {
  const struct {
    const char* source;
    const char* message;
  } cases[] = {
      {"{% if x %}\nopen", "chat template line 1: 'if' is never closed"},
      {"a\n{% for x in xs %}", "chat template line 2: 'for' is never closed"},
      {"{% endfor %}", "chat template line 1: unexpected statement 'endfor'"},
      {"x\n\n{{ 'abc }}", "chat template line 3: unterminated string literal"},
      {"{{ a ! b }}", "chat template line 1: unexpected character '!'"},
      {"{# never closed", "chat template line 1: missing end of comment tag"},
      {"{{ 'a\\q' }}", "chat template line 1: unexpected escaped character: q"},
      {"{{ x }\n}", "chat template line 1: expected '}}'"},
      {"{% macro m(a=1, b) %}{% endmacro %}", "chat template line 1: non-default argument follows default argument"},
      {"{% for 1 in xs %}{% endfor %}", "chat template line 1: expected a loop variable name"},
  };
  for (const auto& c : cases) {
    const Error e = parse_error(c.source);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << c.source << ": " << e.what();
    EXPECT_EQ(std::string(e.what()), c.message) << c.source;
  }
}

TEST(JinjaRender, RaiseExceptionIsInvalidArgumentCarryingTheMessageAndLine) {
  const Error e = render_error("line one\n{{ raise_exception('Roles must alternate: ' ~ n) }}", {{"n", 3}});
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()), "chat template line 2: Roles must alternate: 3");
}

TEST(JinjaRender, RuntimeErrorsNameTheirLine) {
  const Error call = render_error("{% if true %}\n  {{ undefined_function() }}\n{% endif %}");
  EXPECT_EQ(call.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(call.what()),
            "chat template line 2: Cannot call something that is not a function: got UndefinedValue");
  const Error loop = render_error("{% for m in messages %}{{ m.content - 1 }}{% endfor %}",
                                  nlohmann::ordered_json::parse(R"({"messages": [{"content": "x"}]})"));
  EXPECT_EQ(std::string(loop.what()),
            "chat template line 1: Unknown operator \"-\" between StringValue and IntegerValue");
}

TEST(JinjaRender, RefusesToPrintWhatItWouldPrintDifferently) {
  EXPECT_EQ(render_error("{{ range }}").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_error("{{ 'a' ~ {'k': 1} }}").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_error("{{ {'b': 1}|tojson(sort_keys=true) }}").code(), ErrorCode::kUnsupported);
  const Error weekday = render_error("{{ strftime_now('%A') }}");
  EXPECT_EQ(weekday.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(std::string(weekday.what()), "chat template line 1: strftime_now directive %A is not supported");
}

TEST(JinjaRender, RefusesCaseMappingsThatAreNotCharacterForCharacter) {
  EXPECT_EQ(render("{{ 'caf\u00e9 \u03c3'|upper }}"), "CAF\u00c9 \u03a3");
  EXPECT_EQ(render_error("{{ 'stra\u00dfe'|upper }}").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_error("{{ '\u0130stanbul'.lower() }}").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_error("{{ '\u039f\u0394\u039f\u03a3'|lower }}").code(), ErrorCode::kUnsupported);
}

TEST(JinjaRender, StrftimeNowFormatsTheGivenInstantInUtc) {
  jinja::RenderOptions options;
  options.now = std::chrono::system_clock::time_point(std::chrono::seconds(1721999045));  // 2024-07-26 13:04:05 UTC
  EXPECT_EQ(Template::parse("{{ strftime_now('%d %b %Y, %B %H:%M %%') }}").render(nlohmann::json::object(), options),
            "26 Jul 2024, July 13:04 %");
}

TEST(JinjaRender, OrderedContextKeepsKeyOrderAndPlainJsonSortsIt) {
  const Template tmpl = Template::parse("{{ tool|tojson }}");
  const auto ordered = nlohmann::ordered_json::parse(R"({"tool": {"name": "f", "description": "d"}})");
  EXPECT_EQ(tmpl.render(ordered), R"({"name": "f", "description": "d"})");
  EXPECT_EQ(tmpl.render(nlohmann::json::parse(R"({"tool": {"name": "f", "description": "d"}})")),
            R"({"description": "d", "name": "f"})");
}

TEST(JinjaRender, RejectsAContextThatIsNotAnObjectOrShadowsABuiltin) {
  EXPECT_EQ(render_error("x", nlohmann::ordered_json::array()).code(), ErrorCode::kInvalidArgument);
  const Error shadow = render_error("x", {{"range", 1}});
  EXPECT_EQ(shadow.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(shadow.what()).find("'range'"), std::string::npos) << shadow.what();
}

TEST(JinjaRender, BreakOutsideALoopIsAnError) {
  EXPECT_EQ(render_error("{% break %}").code(), ErrorCode::kInvalidArgument);
}

// Beyond the reference engine, which lacks them: Jinja's select/reject with a test, as the full
// Llama 3.1 template uses with builtin_tools.
TEST(JinjaRender, SelectAndRejectFilterByTest) {
  const nlohmann::ordered_json context = {{"tools", {"brave_search", "code_interpreter", "wolfram_alpha"}}};
  EXPECT_EQ(render("{{ tools|reject('equalto', 'code_interpreter')|join(', ') }}", context),
            "brave_search, wolfram_alpha");
  EXPECT_EQ(render("{{ tools|select('equalto', 'code_interpreter')|join(', ') }}", context), "code_interpreter");
  EXPECT_EQ(render("{{ [0, 1, '', 'a', none]|select|list }}"), "[1, \"a\"]");
  EXPECT_EQ(render("{{ [1, 2, 3, 4]|reject('even')|list }}"), "[1, 3]");
  EXPECT_EQ(render_error("{{ 'abc'|select }}").code(), ErrorCode::kInvalidArgument);
}

// Beyond the reference engine too: map with a filter name, as Gemma 4's template writes it for a
// tool parameter with several types.
TEST(JinjaRender, MapAppliesANamedFilterToEachItem) {
  EXPECT_EQ(render("{{ ['string', 'null']|map('upper')|list }}"), "[\"STRING\", \"NULL\"]");
  EXPECT_EQ(render("{{ [' a ', 'b ']|map('trim')|join(',') }}"), "a,b");
  EXPECT_EQ(parse_error("{{ xs|map('wordwrap') }}").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_error("{{ [1]|map('upper')|list }}").code(), ErrorCode::kInvalidArgument);
}

TEST(JinjaRender, DropsGenerationTagsKeepingTheirWhitespaceControl) {
  EXPECT_EQ(render("a {% generation %}b{% endgeneration %} c"), "a b c");
  EXPECT_EQ(render("a {%- generation -%} b"), "ab");
}

TEST(JinjaRender, TemplateIsReusableAndCopyable) {
  const Template tmpl =
      Template::parse("{% set n = namespace(c=0) %}{% for m in ms %}{% set n.c = n.c + 1 %}{% endfor %}{{ n.c }}");
  const Template copy = tmpl;
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json{{"ms", {1, 2, 3}}}), "3");
  EXPECT_EQ(copy.render(nlohmann::ordered_json{{"ms", {1}}}), "1");
}

std::string nested_parentheses(int depth) {
  return "{{ " + std::string(static_cast<size_t>(depth), '(') + "1" + std::string(static_cast<size_t>(depth), ')') +
         " }}";
}

TEST(JinjaLimits, DeepNestingIsRefusedNotACrash) {
  EXPECT_EQ(render(nested_parentheses(50)), "1");
  EXPECT_EQ(parse_error(nested_parentheses(100000)).code(), ErrorCode::kUnsupported);
  std::string ifs;
  for (int i = 0; i < 100000; ++i) ifs += "{% if true %}";
  EXPECT_EQ(parse_error(ifs).code(), ErrorCode::kUnsupported);
}

TEST(JinjaLimits, EndlessMacroRecursionIsAnErrorNotACrash) {
  const Error e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
}

TEST(JinjaLimits, ValueCyclesAndDeepValuesAreRefusedNotACrash) {
  EXPECT_EQ(render_error("{% set ns = namespace(a=1) %}{% set ns.self = [ns] %}{{ ns }}").code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ(
      render_error("{% set n = namespace(x=[]) %}{% for i in range(1000) %}{% set n.x = [n.x] %}{% endfor %}{{ n.x }}")
          .code(),
      ErrorCode::kInvalidArgument);
  std::string deep_json(1000, '[');
  deep_json += std::string(1000, ']');
  const Error context =
      render_error("{{ x }}", nlohmann::ordered_json{{"x", nlohmann::ordered_json::parse(deep_json)}});
  EXPECT_EQ(context.code(), ErrorCode::kInvalidArgument) << context.what();
}

TEST(JinjaLimits, HugeNumbersAreValuesNotUndefinedBehaviour) {
  EXPECT_EQ(render("{{ [1, 2][10 ** 30] }}|{{ 'ab'[-(10 ** 30)] }}|{{ " + std::string(400, '9') + " }}"), "||Infinity");
  EXPECT_EQ(render_error("{{ 'a'|indent(1000000000) }}").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_error("{{ [1]|tojson(indent=-1) }}").code(), ErrorCode::kUnsupported);
}

TEST(JinjaLimits, RunawayStringsAndLoopsAreErrorsNotExhaustedMemoryOrTime) {
  jinja::RenderOptions options;
  options.max_string_bytes = 4096;
  options.max_loop_iterations = 1000;
  const auto fails = [&](std::string_view source) {
    try {
      Template::parse(source).render(nlohmann::json::object(), options);
    } catch (const Error& e) {
      return e.code() == ErrorCode::kInvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(fails(
      "{% set s = namespace(t='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set s.t = s.t ~ s.t %}{% endfor %}"));
  EXPECT_TRUE(fails("{% for i in range(5000) %}x{% endfor %}"));
  EXPECT_TRUE(fails("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(fails(
      "{% set n = namespace(s='x') %}{% for i in range(30) %}{% set n.s = n.s|replace('x', 'xx') %}{% endfor %}"));
  EXPECT_FALSE(fails("{% for i in range(900) %}{% endfor %}"));
  EXPECT_EQ(render_error("{{ range(1000000) }}").code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace flashq
