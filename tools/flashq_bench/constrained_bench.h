// `flashq-bench constrained`: the engine's decode rate with a JSON Schema constraint against
// without one, target-only and with DFlash, and DFlash's tau with the drafter's rows masked
// against only the target's (what keeping drafts to the grammar gains), side by side on the
// demo pair.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace flashq {

std::function<void()> add_constrained_bench(CLI::App& app);

}  // namespace flashq
