// `flashq submit`: send one job to the broker, show its text as it comes or once it is done, and
// exit with the job's outcome.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

// Registers the subcommand on `app`; returns the action to run, which gives the exit code (0 when
// the subcommand was not selected).
std::function<int()> add_submit_command(CLI::App& app);

}  // namespace flashq
