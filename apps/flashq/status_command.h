// `flashq status ID`: where a job stands, as one JSON object (id, state, attempt, seq, final).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

// Registers the subcommand on `app`; returns the action to run, which gives the exit code (0 when
// the subcommand was not selected).
std::function<int()> add_status_command(CLI::App& app);

}  // namespace flashq
