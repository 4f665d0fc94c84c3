// `flashq cancel ID`: ask the broker to stop a job.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

// Registers the subcommand on `app`; returns the action to run, which gives the exit code (0 when
// the subcommand was not selected).
std::function<int()> add_cancel_command(CLI::App& app);

}  // namespace flashq
