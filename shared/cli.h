// What every flashq executable does around its CLI11 app: parse, set up logging, and turn
// errors into exit codes. Exit 0 on success, 2 on bad input (any flashq::Error that is not a
// bug), 1 on an internal error.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;

// Adds --log-level to `app`, parses argv, then calls `body` (the selected subcommand's work).
// Any exception is printed as one "error: ..." line on stderr and mapped to an exit code.
int run_cli(CLI::App& app, int argc, char** argv, const std::function<void()>& body);

}  // namespace flashq
