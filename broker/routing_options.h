// Which worker a job goes to: the options of cache-aware routing (cache_aware_dispatcher.h) and
// the switch to least-loaded only (dispatcher.h), as BrokerOptions carries them.
#pragma once

#include <cstdint>

namespace flashq {

struct RoutingOptions {
  bool cache_aware = true;               // false: least-loaded only (LeastLoadedDispatcher)
  double max_load_gap = 0.5;             // a preferred worker's load may exceed the least-loaded one's by this
  int64_t max_sessions = 65536;          // sessions remembered
  int64_t max_prefix_blocks = 262144;    // prefix blocks remembered (each ~100 bytes)
  int64_t prefix_blocks_per_job = 1024;  // blocks of one prompt looked up and remembered (256 KiB)
};

}  // namespace flashq
