// flashq: the client CLI.
#include <functional>
#include <vector>

#include "apps/flashq/cancel_command.h"
#include "apps/flashq/generate_command.h"
#include "apps/flashq/keygen_command.h"
#include "apps/flashq/status_command.h"
#include "apps/flashq/stream_command.h"
#include "apps/flashq/submit_command.h"
#include "apps/flashq/up_command.h"
#include "shared/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"flashq: LLM generation as queued jobs"};
  app.require_subcommand(1);
  auto generate = flashq::add_generate_command(app);
  auto up = flashq::add_up_command(app);
  auto keygen = flashq::add_keygen_command(app);
  // The job commands end with the job's outcome as exit code (apps/flashq/job_report.h).
  const std::vector<std::function<int()>> job_commands = {
      flashq::add_submit_command(app), flashq::add_stream_command(app), flashq::add_cancel_command(app),
      flashq::add_status_command(app)};
  int job_exit = flashq::kExitOk;
  const int rc = flashq::run_cli(app, argc, argv, [&] {
    generate();
    up();
    keygen();
    for (const auto& command : job_commands) {
      if (const int code = command(); code != flashq::kExitOk) job_exit = code;
    }
  });
  return rc != flashq::kExitOk ? rc : job_exit;
}
