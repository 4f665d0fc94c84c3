#include "shared/cli.h"

#include <cstdio>
#include <string>

#include "shared/error.h"
#include "shared/logging.h"

namespace flashq {

int run_cli(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  }
  try {
    init_logging(log_level);
    body();
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.code() == ErrorCode::kInternal ? kExitInternal : kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return kExitInternal;
  }
}

}  // namespace flashq
