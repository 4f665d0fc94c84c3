// JSON Schema to grammar: which texts each supported keyword lets through, and every refusal
// typed and naming its keyword.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/grammar/grammar_test_support.h"
#include "worker/grammar/integer_range.h"
#include "worker/grammar/json_schema_grammar.h"
#include "worker/grammar/regex_grammar.h"

#include <nlohmann/json.hpp>

namespace flashq::grammar {
namespace {

bool schema_accepts(const std::string& schema, const std::string& text) {
  return testing::accepts(json_schema_grammar(schema), text);
}

void expect_refused(const std::string& schema, const std::string& named) {
  try {
    parse_gbnf(json_schema_grammar(schema));
    FAIL() << "accepted: " << schema;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
  }
}

TEST(GrammarJsonSchema, ObjectPropertiesInDeclaredOrderOptionalOnesSkippable) {
  const char* s = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"},
    "c":{"type":"boolean"}},"required":["a"],"additionalProperties":false})";
  EXPECT_TRUE(schema_accepts(s, R"({"a":"x"})"));
  EXPECT_TRUE(schema_accepts(s, R"({"b":1,"a":"x"})"));
  EXPECT_TRUE(schema_accepts(s, R"({"b": 1, "a": "x", "c": true})"));
  EXPECT_TRUE(schema_accepts(s, R"({"a":"x","c":false})"));
  EXPECT_FALSE(schema_accepts(s, R"({"a":"x","b":1})"));  // out of declared order
  EXPECT_FALSE(schema_accepts(s, R"({"b":1})"));          // required a missing
  EXPECT_FALSE(schema_accepts(s, R"({"a":"x","d":1})"));  // undeclared
  EXPECT_FALSE(schema_accepts(s, R"({,"a":"x"})"));
  EXPECT_FALSE(schema_accepts(s, R"({"a":"x",})"));
}

TEST(GrammarJsonSchema, WhitespaceIsAtMostOneSpaceAfterSeparators) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]})";
  EXPECT_TRUE(schema_accepts(s, R"({"a":[1,2]})"));
  EXPECT_TRUE(schema_accepts(s, R"({"a": [1, 2]})"));
  EXPECT_FALSE(schema_accepts(s, R"({"a":  [1,2]})"));
  EXPECT_FALSE(schema_accepts(s, R"({ "a":[1,2]})"));
  EXPECT_FALSE(schema_accepts(s, "{\"a\":\n[1,2]}"));
}

TEST(GrammarJsonSchema, AdditionalPropertiesTrueOrSchemaAllowsExtraMembersAfterDeclared) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})";
  EXPECT_TRUE(schema_accepts(s, R"({"a":1,"x":"y","z":""})"));
  EXPECT_TRUE(schema_accepts(s, R"({"x":"y"})"));
  EXPECT_FALSE(schema_accepts(s, R"({"a":1,"x":2})"));
  EXPECT_TRUE(schema_accepts(R"({"type":"object"})", R"({"k":[1,{"n":null}]})"));  // none declared: any
  EXPECT_FALSE(schema_accepts(R"({"type":"object","properties":{}})", R"({"k":1})"));
  EXPECT_TRUE(schema_accepts(R"({"type":"object","additionalProperties":true})", R"({"k":[1,{"n":null}]})"));
}

TEST(GrammarJsonSchema, ArraysWithItemCounts) {
  const char* s = R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})";
  EXPECT_FALSE(schema_accepts(s, "[]"));
  EXPECT_TRUE(schema_accepts(s, "[1]"));
  EXPECT_TRUE(schema_accepts(s, "[1, 2,3]"));
  EXPECT_FALSE(schema_accepts(s, "[1,2,3,4]"));
  EXPECT_TRUE(schema_accepts(R"({"type":"array","maxItems":0})", "[]"));
  EXPECT_TRUE(schema_accepts(R"({"type":"array"})", R"([1,"a",[],{}])"));
}

TEST(GrammarJsonSchema, StringsEnumConstPatternAndLength) {
  EXPECT_TRUE(schema_accepts(R"({"type":"string"})", R"("a\"b\\c\u00e9\n")"));
  EXPECT_FALSE(schema_accepts(R"({"type":"string"})", "\"a\nb\""));  // raw control character
  EXPECT_TRUE(schema_accepts(R"({"enum":["red",1,null,{"a":[true]}]})", R"({"a":[true]})"));
  EXPECT_FALSE(schema_accepts(R"({"enum":["red","green"]})", R"("blue")"));
  EXPECT_TRUE(schema_accepts(R"({"const":"x"})", R"("x")"));
  const char* p = R"({"type":"string","pattern":"^[a-z]+-\\d{2}$"})";
  EXPECT_TRUE(schema_accepts(p, R"("ab-12")"));
  EXPECT_FALSE(schema_accepts(p, R"("ab-1")"));
  EXPECT_TRUE(schema_accepts(R"({"type":"string","pattern":"x"})", R"("abxcd")"));  // unanchored
  EXPECT_TRUE(schema_accepts(R"({"type":"string","pattern":"^\"$"})", R"("\"")"));
  const char* l = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_FALSE(schema_accepts(l, R"("a")"));
  EXPECT_TRUE(schema_accepts(l, R"("\u00e9\n")"));
  EXPECT_TRUE(schema_accepts(l, "\"\xC3\xA9\xC3\xA9\xC3\xA9\""));  // code points, not bytes
  EXPECT_FALSE(schema_accepts(l, R"("abcd")"));
}

TEST(GrammarJsonSchema, EnforcedFormats) {
  auto ok = [](const char* format, const std::string& text) {
    return schema_accepts(std::string(R"({"type":"string","format":")") + format + "\"}", "\"" + text + "\"");
  };
  EXPECT_TRUE(ok("date-time", "1963-06-19T08:30:06.283185Z"));
  EXPECT_TRUE(ok("date-time", "2024-02-29t23:59:60+05:30"));
  EXPECT_FALSE(ok("date-time", "06/19/1963 08:30:06 PST"));
  EXPECT_FALSE(ok("date-time", "2013-350T01:01:01"));
  EXPECT_FALSE(ok("date-time", "2013-13-01T01:01:01Z"));
  EXPECT_TRUE(ok("date", "2026-11-28"));
  EXPECT_FALSE(ok("date", "2026-11-32"));
  EXPECT_TRUE(ok("time", "17:00:00Z"));
  EXPECT_FALSE(ok("time", "24:00:00Z"));
  EXPECT_TRUE(ok("uuid", "123e4567-e89b-12d3-a456-426614174000"));
  EXPECT_FALSE(ok("uuid", "123e4567e89b12d3a456426614174000"));
  EXPECT_TRUE(ok("ipv4", "192.168.0.1"));
  for (const char* bad : {"127.0.0.0.1", "256.256.256.256", "127.0", "0x7f000001", "01.2.3.4"}) {
    EXPECT_FALSE(ok("ipv4", bad)) << bad;
  }
  EXPECT_TRUE(ok("email", "anything at all"));  // an annotation: not enforced
}

TEST(GrammarJsonSchema, NumbersAndIntegerBounds) {
  EXPECT_TRUE(schema_accepts(R"({"type":"number"})", "-1.5e+10"));
  EXPECT_FALSE(schema_accepts(R"({"type":"number"})", "01"));
  EXPECT_FALSE(schema_accepts(R"({"type":"integer"})", "1.0"));
  const char* s = R"({"type":"integer","minimum":-15,"maximum":120})";
  for (int v = -30; v <= 150; ++v) {
    EXPECT_EQ(schema_accepts(s, std::to_string(v)), v >= -15 && v <= 120) << v;
  }
  EXPECT_FALSE(schema_accepts(s, "-0"));
  const char* e = R"({"type":"integer","exclusiveMinimum":9})";
  EXPECT_FALSE(schema_accepts(e, "9"));
  EXPECT_TRUE(schema_accepts(e, "10"));
  EXPECT_TRUE(schema_accepts(e, "123456789012"));
  EXPECT_TRUE(schema_accepts(R"({"type":"integer","maximum":-100})", "-100000"));
  EXPECT_FALSE(schema_accepts(R"({"type":"integer","maximum":-100})", "-99"));
}

// Decimals on a grid of quarters (written as JSON writes them) against integral bounds, every
// combination of open and closed ends, both signs.
TEST(GrammarJsonSchema, NumberRangesWithIntegralBoundsMatchExactlyTheirMembers) {
  const std::pair<int, int> ranges[] = {{0, 0}, {-3, 5}, {2, 12}, {-12, -2}, {0, 1}, {-1, 0}};
  for (auto [lo, hi] : ranges) {
    for (int shape = 0; shape < 16; ++shape) {
      std::optional<NumberBound> l, h;
      if (shape & 1) l = NumberBound{lo, (shape & 2) != 0};
      if (shape & 4) h = NumberBound{hi, (shape & 8) != 0};
      if (!l && !h) continue;
      std::string g;
      try {
        g = "root ::= " + number_range_gbnf(l, h) + "\n";
      } catch (const Error&) {
        EXPECT_TRUE(l && h && l->value == h->value && (l->exclusive || h->exclusive));
        continue;
      }
      for (int q = -64; q <= 64; ++q) {
        double v = q / 4.0;
        bool inside = (!l || (l->exclusive ? v > l->value : v >= l->value)) &&
                      (!h || (h->exclusive ? v < h->value : v <= h->value));
        std::string text = nlohmann::json(v).dump();
        if (q % 4 == 0) text = std::to_string(q / 4);
        ASSERT_EQ(testing::accepts(g, text), inside) << "shape " << shape << " " << lo << ".." << hi << ": " << text;
        if (q % 4 == 0 && q != 0) {
          ASSERT_EQ(testing::accepts(g, text + ".0"), inside) << text << ".0";
        }
      }
      EXPECT_FALSE(testing::accepts(g, "1e2"));
      EXPECT_FALSE(testing::accepts(g, "-0"));
    }
  }
}

TEST(GrammarJsonSchema, IntegerRangesMatchExactlyTheirMembers) {
  const std::pair<int, int> ranges[] = {{0, 0}, {7, 7}, {0, 9}, {3, 1234}, {-250, -3}, {-9, 9}, {100, 999}, {19, 20}};
  for (auto [lo, hi] : ranges) {
    std::string g = "root ::= " + integer_range_gbnf(lo, hi) + "\n";
    for (int v = -1500; v <= 1500; ++v) {
      ASSERT_EQ(testing::accepts(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    }
  }
}

TEST(GrammarJsonSchema, AnyOfTypeArraysBooleanAndNull) {
  const char* s = R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})";
  EXPECT_TRUE(schema_accepts(s, "12"));
  EXPECT_TRUE(schema_accepts(s, R"("a")"));
  EXPECT_FALSE(schema_accepts(s, R"("ab")"));
  EXPECT_TRUE(schema_accepts(R"({"type":["boolean","null"]})", "null"));
  EXPECT_TRUE(schema_accepts(R"({"type":["boolean","null"]})", "false"));
  EXPECT_FALSE(schema_accepts(R"({"type":["boolean","null"]})", "0"));
}

TEST(GrammarJsonSchema, AllOfAndKeywordsBesideAnyOfAreMergedIntersections) {
  const char* s = R"({"allOf":[{"properties":{"bar":{"type":"integer"}},"required":["bar"]},
    {"$ref":"#/$defs/foo"}],"$defs":{"foo":{"properties":{"foo":{"type":"string"}},"required":["foo"]}}})";
  EXPECT_TRUE(schema_accepts(s, R"({"bar":2,"foo":"baz"})"));
  EXPECT_FALSE(schema_accepts(s, R"({"bar":2})"));
  const char* bounds = R"({"allOf":[{"type":"integer","maximum":30},{"minimum":20,"maximum":40}]})";
  EXPECT_TRUE(schema_accepts(bounds, "25"));
  EXPECT_FALSE(schema_accepts(bounds, "31"));
  EXPECT_FALSE(schema_accepts(bounds, "19"));
  const char* any = R"({"type":"string","anyOf":[{"maxLength":2},{"minLength":4}]})";
  EXPECT_TRUE(schema_accepts(any, R"("ab")"));
  EXPECT_FALSE(schema_accepts(any, R"("abc")"));
  EXPECT_TRUE(schema_accepts(any, R"("abcd")"));
  EXPECT_FALSE(schema_accepts(any, "4"));
  EXPECT_TRUE(schema_accepts(R"({"type":"string","anyOf":[{"type":"integer"},{"maxLength":1}]})", R"("a")"));
  const char* enums = R"({"enum":["a","b","c"],"allOf":[{"enum":["b","c","d"]}]})";
  EXPECT_TRUE(schema_accepts(enums, R"("b")"));
  EXPECT_FALSE(schema_accepts(enums, R"("a")"));
}

TEST(GrammarJsonSchema, OneOfWithBranchesThatCannotOverlap) {
  const char* tagged = R"({"oneOf":[
    {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},
    {"type":"object","properties":{"kind":{"enum":["square"]},"side":{"type":"number"}},"required":["kind","side"]}]})";
  EXPECT_TRUE(schema_accepts(tagged, R"({"kind":"circle","r":2})"));
  EXPECT_TRUE(schema_accepts(tagged, R"({"kind":"square","side":1.5})"));
  EXPECT_FALSE(schema_accepts(tagged, R"({"kind":"circle","side":1.5})"));
  const char* typed = R"({"oneOf":[{"type":"string"},{"type":["integer","null"]}]})";
  EXPECT_TRUE(schema_accepts(typed, "null"));
  EXPECT_TRUE(schema_accepts(typed, R"("x")"));
  expect_refused(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "may both match");
  expect_refused(R"({"oneOf":[{"type":"object","properties":{"k":{"const":1}}},{"type":"object","properties":{"k":{"const":2}}}]})",
                 "may both match");  // k not required: {} matches both
}

TEST(GrammarJsonSchema, RefsAndRecursionToAnyDepth) {
  const char* s = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
    "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],
    "additionalProperties":false}},"$ref":"#/$defs/node"})";
  EXPECT_TRUE(schema_accepts(s, R"({"v":1,"kids":[]})"));
  EXPECT_TRUE(schema_accepts(s, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]},{"v":4,"kids":[]}]})"));
  EXPECT_FALSE(schema_accepts(s, R"({"v":1,"kids":[{"v":2}]})"));
  EXPECT_TRUE(schema_accepts(R"({"definitions":{"a":{"type":"null"}},"items":{"$ref":"#/definitions/a"},"type":"array"})", "[null]"));
}

TEST(GrammarJsonSchema, DescriptionAndTitleAreIgnored) {
  EXPECT_TRUE(schema_accepts(R"({"type":"integer","title":"t","description":"d"})", "3"));
  EXPECT_TRUE(schema_accepts(R"({})", R"([{"a":1}])"));
}

TEST(GrammarJsonSchema, JsonObjectModeAndChoices) {
  EXPECT_TRUE(testing::accepts(json_object_grammar(), R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_FALSE(testing::accepts(json_object_grammar(), "[1]"));
  EXPECT_TRUE(testing::accepts(choice_grammar({"yes", "no", "n\"a"}), "n\"a"));
  EXPECT_FALSE(testing::accepts(choice_grammar({"yes", "no"}), "ye"));
}

TEST(GrammarJsonSchema, RefusesUnsupportedKeywordsByName) {
  expect_refused(R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties'");
  expect_refused(R"({"if":{"type":"string"},"then":{}})", "'if'");
  expect_refused(R"({"not":{"type":"string"}})", "'not'");
  expect_refused(R"({"type":"array","uniqueItems":true})", "'uniqueItems'");
  expect_refused(R"({"oneOf":[{"type":"integer"},{"minimum":2}]})", "'oneOf' whose branches 0 and 1 may both match");
  expect_refused(R"({"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]})", "'pattern' in both schemas");
  expect_refused(R"({"allOf":[{"type":"string"},{"type":"integer"}]})", "no value satisfies every schema of 'allOf'");
  expect_refused(R"({"allOf":[{"anyOf":[{"type":"null"}]},{"anyOf":[{"type":"string"}]}]})", "'anyOf' in both");
  expect_refused(R"({"type":"string","anyOf":[{"type":"integer"}]})", "no branch of 'anyOf' can be satisfied");
  expect_refused(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})",
                 "'additionalProperties' in an intersection whose other schema declares 'b'");
  expect_refused(R"({"allOf":[{"minimum":5,"exclusiveMinimum":true},{"minimum":7}]})", "'exclusiveMinimum' (draft 4");
  expect_refused(R"({"type":"number","minimum":1.5})", "'minimum' with a fractional bound on type number");
  expect_refused(R"({"type":"array","items":[{"type":"string"}]})", "'items' as an array");
  expect_refused(R"({"type":"string","format":"date","pattern":"^2"})", "'pattern' beside an enforced 'format'");
  expect_refused(R"({"type":"string","format":"uuid","maxLength":40})", "'minLength'/'maxLength' beside");
  expect_refused(R"({"properties":{"a":{"multipleOf":2}}})", "#/properties/a: unsupported keyword 'multipleOf'");
}

TEST(GrammarJsonSchema, RefusesBrokenSchemas) {
  expect_refused(R"({"type":"object")", "invalid JSON");
  expect_refused(R"({"type":"strin"})", "unknown type 'strin'");
  expect_refused(R"({"$ref":"#/$defs/missing"})", "points at nothing");
  expect_refused(R"({"$ref":"http://example.com/s.json"})", "only local '$ref'");
  expect_refused(R"({"enum":[]})", "non-empty array");
  expect_refused(R"({"type":"integer","minimum":5,"maximum":4})", "no integer lies between");
  expect_refused(R"({"type":"array","minItems":3,"maxItems":2})", "below 'minItems'");
  expect_refused(R"({"type":"string","maxLength":100000})", "above 4096");
  expect_refused(R"(false)", "allows no value");
  expect_refused(R"({"$ref":"#"})", "left-recursive");
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(100, '}');
  expect_refused(deep, "nested deeper than");
}

TEST(GrammarJsonSchema, RefusesTooLargeSchemas) {
  std::string many = R"({"type":"object","properties":{)";
  for (int i = 0; i < 6000; ++i) many += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"integer"})";
  many += "}}";
  expect_refused(many, "the schema is too large");
}

TEST(GrammarRegex, SupportedSubset) {
  auto ok = [](const std::string& re, const std::string& text) { return testing::accepts(regex_grammar(re), text); };
  EXPECT_TRUE(ok(R"(\d{3}-\d{4})", "555-1234"));
  EXPECT_FALSE(ok(R"(\d{3}-\d{4})", "55-1234"));
  EXPECT_TRUE(ok(R"((?:ab|c)+d?)", "abcab"));
  EXPECT_TRUE(ok(R"([^a-c\s]*)", "xyz\xC3\xA9"));
  EXPECT_FALSE(ok(R"([^a-c\s]*)", "x y"));
  EXPECT_TRUE(ok(R"(a.c)", "a\xE2\x82\xAC" "c"));
  EXPECT_FALSE(ok(R"(a.c)", "a\nc"));
  EXPECT_TRUE(ok(R"(\w+@\w+\.com)", "me@ex.com"));
  EXPECT_TRUE(ok(R"(x{2,}?)", "xxx"));
}

TEST(GrammarRegex, RefusesUnsupportedConstructsByName) {
  for (auto [re, named] : std::vector<std::pair<std::string, std::string>>{
           {R"((a)\1)", "backreferences"}, {R"((?=a)a)", "lookaround"}, {R"(\bword)", "word boundaries"},
           {R"(a^b)", "'^' is supported only at the start"}, {R"(a$b)", "'$' is supported only at the end"},
           {R"(*a)", "nothing to repeat"}, {R"((a)", "missing ')'"}, {R"([a)", "unterminated"},
           {R"(a{5,2})", "max below min"}, {R"(\p{L})", "Unicode property"}, {R"(a++)", "possessive"}}) {
    try {
      regex_grammar(re);
      ADD_FAILURE() << "accepted " << re;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace flashq::grammar
