// Process-wide logging through spdlog. Logs go to stderr so that stdout stays for results.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace flashq {

// level: trace, debug, info, warn, error, off. Throws kInvalidArgument on an unknown level.
void init_logging(std::string_view level);

}  // namespace flashq
