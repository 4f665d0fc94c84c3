// flashq: the client CLI.
#include "client/cli/generate_command.h"
#include "shared/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"flashq: LLM generation as queued jobs"};
  app.require_subcommand(1);
  auto generate = flashq::add_generate_command(app);
  return flashq::run_cli(app, argc, argv, [&] { generate(); });
}
