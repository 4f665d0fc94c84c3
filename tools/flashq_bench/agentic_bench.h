// `flashq-bench agentic`: the agentic workload (agentic_conversation.h) and its four figures, each
// arm beside the other in one run (docs/perf.md, "Agentic workloads"):
//   1. time to first token of later turns, prefix cache on against off (in-process engine);
//   2. sequences decoding at once in a fixed cache memory, paged against whole-length caches, the
//      sequences using a quarter of their maximum length;
//   3. a broker and three workers as processes: later turns' prefix hit rate and throughput with
//      cache-aware against least-loaded routing (agentic_routing.h);
//   4. decode speed, paged against whole-length caches, at batch 1 and 16.
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_agentic_bench(CLI::App& app);

}  // namespace flashq
