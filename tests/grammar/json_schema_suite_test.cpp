// The JSON-Schema-Test-Suite (npm json-schema-test-suite, draft 4: the draft that package
// ships), every file. For a schema the compiler accepts, the grammar must accept exactly the
// valid instances, each written as the whitespace policy allows (compact, properties in the
// schema's declared order). A schema using a keyword outside the subset must be refused naming
// that keyword. Every case that cannot be held to this is listed below with its reason; a listed
// case that starts passing fails too, so the list stays true.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/grammar/grammar_test_support.h"
#include "tests/tokenizer/qwen3_golden.h"
#include "worker/grammar/json_schema_grammar.h"

namespace flashq::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::filesystem::path suite_dir() {
  return test::source_dir() / "third_party/npm/node_modules/json-schema-test-suite/tests/draft4";
}

// Files whose keyword is outside the subset: each schema naming it must be refused, naming it.
// (additionalItems matters only beside items as an array, which is refused under that name;
// oneOf is supported only for branches that cannot overlap, and oneOf.json's all can.)
const std::map<std::string, std::vector<std::string>> kUnsupportedFiles{
    {"additionalItems.json", {"'additionalItems'", "'items' as an array"}},
    {"dependencies.json", {"'dependencies'"}},
    {"maxProperties.json", {"'maxProperties'"}},
    {"minProperties.json", {"'minProperties'"}},
    {"multipleOf.json", {"'multipleOf'"}},
    {"not.json", {"'not'"}},
    {"oneOf.json", {"'oneOf'"}},
    {"patternProperties.json", {"'patternProperties'"}},
    {"uniqueItems.json", {"'uniqueItems'"}},
    {"refRemote.json", {"only local '$ref'"}},
};

// Schemas in the supported files that are refused, and why ("file: schema description").
const std::map<std::string, std::string> kRefusedSchemas{
#include "tests/grammar/json_schema_suite_refused.inc"
};

// Instances judged differently from the suite, and why ("file: schema / instance description").
const std::map<std::string, std::string> kDifferentInstances{
#include "tests/grammar/json_schema_suite_different.inc"
};

const Json* resolve(const Json& root, const Json* schema) {
  for (int hops = 0; hops < 8 && schema->is_object() && schema->contains("$ref"); ++hops) {
    std::string ref = schema->at("$ref").get<std::string>();
    if (ref.empty() || ref[0] != '#') return schema;
    try {
      schema = &root.at(Json::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      return schema;
    }
  }
  return schema;
}

// The instance as the grammar writes it: members in the schema's declared order, then the rest.
Json in_declared_order(const Json& instance, const Json& root, const Json* schema) {
  schema = resolve(root, schema);
  if (!schema->is_object()) return instance;
  if (instance.is_array() && schema->contains("items") && schema->at("items").is_object()) {
    Json out = Json::array();
    for (const Json& item : instance) out.push_back(in_declared_order(item, root, &schema->at("items")));
    return out;
  }
  if (!instance.is_object()) return instance;
  // The declared properties: the schema's own, then those its allOf branches add (the order in
  // which the compiler merges them).
  std::vector<std::pair<std::string, const Json*>> declared;
  std::vector<const Json*> parts{schema};
  if (schema->contains("allOf")) {
    for (const Json& branch : schema->at("allOf")) parts.push_back(resolve(root, &branch));
  }
  for (const Json* part : parts) {
    if (!part->is_object() || !part->contains("properties") || !part->at("properties").is_object()) continue;
    for (const auto& [key, sub] : part->at("properties").items()) {
      bool seen = false;
      for (const auto& d : declared) seen = seen || d.first == key;
      if (!seen) declared.emplace_back(key, &sub);
    }
  }
  Json out = Json::object();
  for (const auto& [key, sub] : declared) {
    if (instance.contains(key)) out[key] = in_declared_order(instance.at(key), root, sub);
  }
  for (const auto& [key, value] : instance.items()) {
    if (!out.contains(key)) out[key] = value;
  }
  return out;
}

struct SuiteReport {
  int schemas_compiled = 0, schemas_refused = 0, instances_checked = 0, instances_listed = 0;
  std::set<std::string> listed_seen;
};

void check_unsupported_file(const std::string& file, const Json& cases,
                            const std::vector<std::string>& keywords) {
  for (const Json& c : cases) {
    std::string name = file + ": " + c.at("description").get<std::string>();
    try {
      parse_gbnf(json_schema_grammar(c.at("schema").dump()));
      ADD_FAILURE() << name << ": schema with " << keywords[0] << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << name;
      bool named = false;
      for (const std::string& k : keywords) named = named || std::string(e.what()).find(k) != std::string::npos;
      EXPECT_TRUE(named) << name << ": the refusal does not name " << keywords[0] << ": " << e.what();
    }
  }
}

void check_instances(const std::string& name, const Json& c, const std::string& gbnf, SuiteReport& report) {
  for (const Json& t : c.at("tests")) {
    std::string label = name + " / " + t.at("description").get<std::string>();
    Json data = in_declared_order(t.at("data"), c.at("schema"), &c.at("schema"));
    std::string text = data.dump(-1, ' ', false, Json::error_handler_t::replace);
    bool accepted = testing::accepts(gbnf, text);
    bool valid = t.at("valid").get<bool>();
    auto listed = kDifferentInstances.find(label);
    if (listed != kDifferentInstances.end()) {
      report.listed_seen.insert(label);
      ++report.instances_listed;
      EXPECT_NE(accepted, valid) << label << " is listed as different (" << listed->second << ") but agrees";
      continue;
    }
    ++report.instances_checked;
    EXPECT_EQ(accepted, valid) << label << ": " << text;
  }
}

TEST(GrammarJsonSchemaSuite, Draft4AcceptsExactlyTheValidInstances) {
  ASSERT_TRUE(std::filesystem::exists(suite_dir())) << suite_dir() << " is missing: run scripts/setup";
  SuiteReport report;
  for (const auto& entry : std::filesystem::directory_iterator(suite_dir())) {
    if (entry.path().extension() != ".json") continue;
    std::string file = entry.path().filename().string();
    Json cases = Json::parse(read_text_file(entry.path()));
    if (auto it = kUnsupportedFiles.find(file); it != kUnsupportedFiles.end()) {
      check_unsupported_file(file, cases, it->second);
      continue;
    }
    for (const Json& c : cases) {
      std::string name = file + ": " + c.at("description").get<std::string>();
      std::string gbnf;
      try {
        gbnf = json_schema_grammar(c.at("schema").dump());
        parse_gbnf(gbnf);
      } catch (const Error& e) {
        ++report.schemas_refused;
        report.listed_seen.insert(name);
        EXPECT_TRUE(kRefusedSchemas.count(name) > 0) << name << " refused but not listed: " << e.what();
        continue;
      }
      EXPECT_EQ(kRefusedSchemas.count(name), 0u) << name << " is listed as refused but compiles";
      ++report.schemas_compiled;
      check_instances(name, c, gbnf, report);
    }
  }
  for (const auto& [label, reason] : kDifferentInstances) {
    EXPECT_TRUE(report.listed_seen.count(label) > 0) << "listed case not found: " << label;
  }
  std::printf("suite: %d schemas compiled, %d refused (listed); %d instances checked, %d listed as different\n",
              report.schemas_compiled, report.schemas_refused, report.instances_checked, report.instances_listed);
}

// optional/format.json: the formats the compiler enforces are held to the suite; the others are
// annotations here, and their cases are skipped, each format named with that reason.
TEST(GrammarJsonSchemaSuite, Draft4OptionalFormats) {
  const std::set<std::string> enforced{"date-time", "ipv4"};
  const std::map<std::string, std::string> skipped{
      {"email", "an annotation: not enforced"}, {"hostname", "an annotation: not enforced"},
      {"ipv6", "an annotation: not enforced"},  {"uri", "an annotation: not enforced"}};
  std::filesystem::path file = suite_dir() / "optional/format.json";
  ASSERT_TRUE(std::filesystem::exists(file)) << file << " is missing: run scripts/setup";
  SuiteReport report;
  int skipped_cases = 0;
  for (const Json& c : Json::parse(read_text_file(file))) {
    std::string format = c.at("schema").at("format").get<std::string>();
    std::string name = "optional/format.json: " + c.at("description").get<std::string>();
    if (skipped.count(format) > 0) {
      std::printf("skipped: %s (format '%s' is %s)\n", name.c_str(), format.c_str(), skipped.at(format).c_str());
      ++skipped_cases;
      continue;
    }
    ASSERT_TRUE(enforced.count(format) > 0) << name << ": format '" << format << "' is in neither list";
    check_instances(name, c, json_schema_grammar(c.at("schema").dump()), report);
  }
  EXPECT_GT(report.instances_checked, 0);
  std::printf("optional formats: %d instances checked, %d cases skipped\n", report.instances_checked, skipped_cases);
}

}  // namespace
}  // namespace flashq::grammar
