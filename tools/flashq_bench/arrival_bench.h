// `flashq-bench arrival`: the inter-token gaps of sequences decoding in a worker while a long chat
// prompt arrives, with the prompt's text work (template, encoding) on the prepare thread as the
// worker runs it, or on the engine thread; and with no arrival, for the baseline.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace flashq {

std::function<void()> add_arrival_bench(CLI::App& app);

}  // namespace flashq
