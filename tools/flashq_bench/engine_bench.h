// `flashq-bench engine`: prefill and decode speed of the engine on one model.
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_engine_bench(CLI::App& app);

}  // namespace flashq
