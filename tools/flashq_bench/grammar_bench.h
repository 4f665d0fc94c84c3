// `flashq-bench grammar`: the structured-output grammar engine on a real vocabulary: schema
// compile time (cold, and served from the grammar cache) and the time to compute one token mask,
// per token, walking a valid instance of a 10-field nested JSON schema.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_grammar_bench(CLI::App& app);

}  // namespace flashq
