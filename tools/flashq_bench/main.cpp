// flashq-bench: benchmarks. Speed is measured here, never in timed unit tests.
#include "shared/cli.h"
#include "tools/flashq_bench/agentic_bench.h"
#include "tools/flashq_bench/arrival_bench.h"
#include "tools/flashq_bench/constrained_bench.h"
#include "tools/flashq_bench/broker_bench.h"
#include "tools/flashq_bench/engine_bench.h"
#include "tools/flashq_bench/failover_bench.h"
#include "tools/flashq_bench/gateway_bench.h"
#include "tools/flashq_bench/grammar_bench.h"
#include "tools/flashq_bench/kernel_bench.h"
#include "tools/flashq_bench/kv_memory_bench.h"
#include "tools/flashq_bench/tokenizer_bench.h"

int main(int argc, char** argv) {
  CLI::App app{"flashq-bench: benchmarks"};
  app.require_subcommand(1);
  auto engine = flashq::add_engine_bench(app);
  auto kernels = flashq::add_kernel_bench(app);
  auto broker = flashq::add_broker_bench(app);
  auto failover = flashq::add_failover_bench(app);
  auto tokenizer = flashq::add_tokenizer_bench(app);
  auto gateway = flashq::add_gateway_bench(app);
  auto agentic = flashq::add_agentic_bench(app);
  auto arrival = flashq::add_arrival_bench(app);
  auto grammar = flashq::add_grammar_bench(app);
  auto constrained = flashq::add_constrained_bench(app);
  auto kv_memory = flashq::add_kv_memory_bench(app);
  return flashq::run_cli(app, argc, argv, [&] {
    engine();
    kernels();
    broker();
    failover();
    tokenizer();
    gateway();
    agentic();
    arrival();
    grammar();
    constrained();
    kv_memory();
  });
}
