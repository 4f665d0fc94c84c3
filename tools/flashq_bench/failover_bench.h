// `flashq-bench failover`: how long jobs stop flowing through a broker when its Redis primary
// dies, and whether every job in flight across that is accounted for. A primary, its replica and
// three Sentinels (redis-server and redis-sentinel processes on loopback, in a scratch
// directory), a broker in this process on a redis+sentinel:// URL, a synthetic worker that ends
// each job after one token, and a producer submitting at a steady rate, submitting again every
// 50 ms a job refused `unavailable`. The primary is SIGKILLed mid-run.
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_failover_bench(CLI::App& app);

}  // namespace flashq
