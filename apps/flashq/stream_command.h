// `flashq stream ID [--from SEQ]`: follow a job's events on the broker's stream socket until its
// final event, from any producer or process.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

// Registers the subcommand on `app`; returns the action to run, which gives the exit code (0 when
// the subcommand was not selected).
std::function<int()> add_stream_command(CLI::App& app);

}  // namespace flashq
