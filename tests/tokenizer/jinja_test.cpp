// The chat template engine's constructs one by one, its refusals and its errors.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "worker/tokenizer/jinja/template.h"

namespace flashq {
namespace {

std::string render(std::string_view source, const nlohmann::json& context = nlohmann::json::object()) {
  return jinja::Template::parse(source).render(context);
}

TEST(Jinja, RendersTextAndExpressions) {
  EXPECT_EQ(render("Hello {{ name }}!", {{"name", "world"}}), "Hello world!");
}

}  // namespace
}  // namespace flashq
