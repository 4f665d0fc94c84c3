#include "shared/logging.h"

#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "shared/error.h"

namespace flashq {

void init_logging(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    throw Error(ErrorCode::kInvalidArgument, "unknown log level '" + std::string(level) + "'");
  }
  auto logger = spdlog::stderr_color_mt("flashq");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(parsed);
}

}  // namespace flashq
