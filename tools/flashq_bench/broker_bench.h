// `flashq-bench broker`: the broker driven by synthetic producers and synthetic workers (test
// programs in this process that speak the wire protocol; no model runs). Reports job
// submissions/s, token events/s fanned out to subscribers, and the latency the broker adds to a
// token event, against a bare ZeroMQ forwarder (ROUTER in, XPUB out) measured in the same run.
// With --redis, the same behind Redis; with --redis-wait-replicas too, intake (submissions/s and
// SUBMIT-to-ACCEPTED latency) with WAIT for that many replicas beside intake without.
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_broker_bench(CLI::App& app);

}  // namespace flashq
