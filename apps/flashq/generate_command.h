// `flashq generate`: run one prompt through a model in this process and stream the text.
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

// Registers the subcommand on `app`; returns the action to run when it was selected.
std::function<void()> add_generate_command(CLI::App& app);

}  // namespace flashq
